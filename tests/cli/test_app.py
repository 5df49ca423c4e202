"""The command line as Typer users expect it: --version, python -m, completion, --json,
a fast start."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from equibench import __version__
from equibench.cli import app
from equibench.tasks.suites import BUILTIN_SUITES

HEAVY = ("torch", "sklearn", "pandas", "numpy", "scipy", "matplotlib", "openml")


def test_version_option_and_python_dash_m(tmp_path):
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"equibench {__version__}"
    # outside the checkout, so that `-m` finds the installed package, not the source tree
    ran = subprocess.run([sys.executable, "-m", "equibench", "--version"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.strip() == f"equibench {__version__}"
    ran = subprocess.run([sys.executable, "-m", "equibench", "suites", "--json"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert ran.returncode == 0 and json.loads(ran.stdout)[0]["suite"] == "gt10"
    ran = subprocess.run([sys.executable, "-m", "equibench.cli", "--version"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.strip() == f"equibench {__version__}"


def test_shell_completion_is_offered():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--install-completion" in result.output and "--show-completion" in result.output


def test_json_output_of_info_methods_and_suites():
    runner = CliRunner()
    suites = json.loads(runner.invoke(app, ["suites", "--json"]).stdout)
    assert {s["suite"]: [str(t) for t in s["task_ids"]] for s in suites} == \
        {n: list(s.task_ids) for n, s in BUILTIN_SUITES.items()}
    assert suites[0]["task_ids"][:2] == [5, 7] and suites[2]["task_ids"][0] == "demo-iris"  # OpenML's ids are integers
    methods = json.loads(runner.invoke(app, ["methods", "--json"]).stdout)
    knn = next(row for row in methods if row["method"] == "knn")
    assert knn["ready"] is True and knn["install"] is None
    info = json.loads(runner.invoke(app, ["info", "--json"]).stdout)
    assert info["equibench"] == __version__ and info["device"]["type"] in ("cpu", "cuda")
    assert {c["file"] for c in info["checkpoints"]} >= {"equitabpfn-small.pt", "tabpfn-star-small.pt"}
    assert all(c["arch"] in ("equitabpfn", "tabpfn-star") for c in info["checkpoints"])


def test_help_and_listing_commands_import_no_heavy_module(tmp_path):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from equibench.cli import app\n"
        "for args in (['--help'], ['methods'], ['suites'], ['suites', '--json'], ['--version']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    # outside the checkout: `-c` puts the working directory first on sys.path, where the
    # uninstalled source tree (without equibench.model / equibench.baselines) would shadow
    # a regular install
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"


def _output_without_heavy_modules(arguments: list[str], cwd) -> str:
    """The output of ``equibench ARGUMENTS`` in a fresh interpreter, checked to have imported
    none of the heavy modules (run outside the checkout, so the installed package is used)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from equibench.cli import app\n"
        f"result = CliRunner().invoke(app, {arguments!r}, env={{'COLUMNS': '250'}})\n"
        "assert result.exit_code == 0, result.output\n"
        "print(result.output)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert ran.returncode == 0, ran.stderr
    output, heavy = ran.stdout.strip().rsplit("\n", 1)
    assert heavy == "[]"
    return output


def test_pretrain_help_shows_the_configurations_defaults_without_importing_torch(tmp_path):
    """The flags' shown defaults are read from TrainConfig and PriorConfig (torch-free modules),
    never copied by hand."""
    from equibench.pretrain.config import TrainConfig
    from equibench.prior.config import PriorConfig

    shown = _output_without_heavy_modules(["pretrain", "--help"], tmp_path)
    for flag, default in (("--lr", TrainConfig.lr), ("--validate-every", TrainConfig.validate_every),
                          ("--rows", PriorConfig.rows), ("--p-binary", PriorConfig.p_binary)):
        line = next(line for line in shown.splitlines() if f"{flag} " in line)
        assert f"[default: ({default})]" in line, line


def test_the_suites_light_names_match_the_task_loaders():
    from equibench.tasks import suites, task, user_data

    assert suites.DEMO_NAMES == tuple(task.DEMO_TASKS)
    assert suites.FILE_PREFIX == user_data.PREFIX


def test_pretrain_recipe_list_needs_no_out_and_no_heavy_module(tmp_path):
    listing = _output_without_heavy_modules(["pretrain", "--recipe", "list"], tmp_path)
    assert [line.split()[0] for line in listing.splitlines()] == ["deeper-6", "medium-gpu", "small-cpu"]


def _commands(group, path=()):
    """Every command of the click ``group`` and its subgroups, as argument paths."""
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def test_no_help_shows_a_value_type_beside_a_flag():
    """Flags (--dry-run, --no-progress, --help) take no value, so no `<bool>` beside them; options
    that take one keep their type."""
    import typer.main

    paths = [(), *_commands(typer.main.get_command(app))]
    assert ("prior", "preview") in paths and ("evaluate",) in paths
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, path
    evaluate = runner.invoke(app, ["evaluate", "--help"]).output
    assert "--dry-run" in evaluate and "<int>" in evaluate and "<path>" in evaluate
    result = runner.invoke(app, ["evaluate", "--suite", "demo", "--dry-run", "true"])
    assert result.exit_code == 2 and "true" in result.output  # a flag: `true` is an unexpected argument


def _quality_file(folder, arch: str, iris: float, sha256: str | None = None):
    """The JSON scorecard of the packaged <arch>-small.pt in ``folder`` (`equibench score --out
    FILE.json`): iris against LogisticRegression, one OpenML task against KNN."""
    import hashlib

    import pandas as pd

    from equibench.baselines.registry import method_spec
    from equibench.scoring.bar import COLUMNS, evaluate_criteria
    from equibench.scoring.scorecard import Scorecard

    model, checkpoint = method_spec(arch).plain_label, folder / f"{arch}-small.pt"
    scores = pd.DataFrame([("bundled", "iris", "iris", 0, model, iris), ("bundled", "iris", "iris", 0, "LogisticRegression", 0.95),
                           ("<=10", "4", "labor", 0, model, 0.95), ("<=10", "4", "labor", 0, "KNN", 0.90)],
                          columns=list(COLUMNS))
    card = Scorecard(f"model/{checkpoint.name}", arch, scores, evaluate_criteria(scores, model), folds=tuple(range(10)),
                     sha256=sha256 or hashlib.sha256(checkpoint.read_bytes()).hexdigest(), date="2026-11-28T12:00:00+00:00")
    checkpoint.with_suffix(".json").write_text(json.dumps(card.to_dict()))


def _packaged_here(folder, monkeypatch):
    """The packaged checkpoints, linked into ``folder``, are the installation's (without scorecards)."""
    from equibench.model import packaged_checkpoints

    for path in packaged_checkpoints():
        (folder / path.name).symlink_to(path)
    monkeypatch.setattr("equibench.model.checkpoint.packaged_checkpoint_dir", lambda: folder)


@pytest.mark.parametrize("change, why", [
    (lambda data: data.pop("sha256"), "it has no 'sha256' field"),
    (lambda data: data.pop("criteria"), "it has no 'criteria' field"),
    (lambda data: data.update(format=2), "scorecard format 2, where this equibench reads format 1"),
    (lambda data: data.pop("format"), "scorecard format None, where this equibench reads format 1"),
])
def test_info_says_why_a_scorecard_is_unreadable_and_prints_the_rest(tmp_path, monkeypatch, change, why):
    """A packaged scorecard without its sha256 (or of another format): `info` prints everything
    else, and says the scorecard is unreadable and why, where it raised KeyError: 'sha256'."""
    from rich.console import Console

    _packaged_here(tmp_path, monkeypatch)
    _quality_file(tmp_path, "equitabpfn", 0.96)
    path = tmp_path / "equitabpfn-small.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    monkeypatch.setattr("equibench.cli.output.console", Console(width=1000))
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "not scored" in next(line for line in lines if line.startswith("│ equitabpfn-small.pt"))
    line = next(line for line in lines if line.startswith("equitabpfn-small.pt: not scored"))
    assert f"(its scorecard equitabpfn-small.json is unreadable: {why};" in line and "equibench score" in line
    assert any(line.startswith("tabpfn-star-small.pt card:") for line in lines)
    assert any(line.startswith("device:") for line in lines)
    quality = next(card for card in json.loads(CliRunner().invoke(app, ["info", "--json"]).stdout)["checkpoints"]
                   if card["file"] == "equitabpfn-small.pt")["quality"]
    assert why in quality["error"]


def test_info_leads_with_the_checkpoints_and_their_quality(tmp_path, monkeypatch):
    """The checkpoints (what, how good: the scorecard installed beside each, else the card's
    validation), then their cards, versions and device; hardware step ranges only with --verbose, last."""
    from rich.console import Console

    runner = CliRunner()
    _packaged_here(tmp_path, monkeypatch)
    _quality_file(tmp_path, "equitabpfn", 0.96)  # meets the bar
    monkeypatch.setattr("equibench.cli.output.console", Console(width=1000))
    text = runner.invoke(app, ["info"]).stdout
    lines = text.splitlines()
    assert lines[0].strip() == "packaged checkpoints" and "quality" in lines[2]
    assert "meets the bar" in next(line for line in lines if line.startswith("│ equitabpfn-small.pt"))
    assert "not scored" in next(line for line in lines if line.startswith("│ tabpfn-star-small.pt"))
    verdict = next(line for line in lines if line.startswith("equitabpfn-small.pt: EquiTabPFN meets the bar: 3 of 3"))
    assert f"(scored 2026-11-28: {tmp_path / 'equitabpfn-small.json'})" in verdict
    assert any(line.startswith("  >10-class mean: not measured") for line in lines)  # what is not met, alone
    assert "  iris: +1.00 points vs LogisticRegression (bar >= -1.0): met" not in lines
    unscored = next(line for line in lines if line.startswith("tabpfn-star-small.pt: not scored"))
    assert "equibench score" in unscored and "iris 0.947" in unscored
    position = {key: next(i for i, line in enumerate(lines) if key in line)
                for key in ("equitabpfn-small.pt: EquiTabPFN", "equitabpfn-small.pt card:", "torch", "device:")}
    assert list(position.values()) == sorted(position.values())
    assert "step ranges" not in text and "steps by hardware" not in text and "--verbose" in lines[-1]

    _quality_file(tmp_path, "tabpfn-star", 0.90)  # iris 5 points behind LR
    lines = runner.invoke(app, ["info", "--verbose"]).stdout.splitlines()
    assert "bar not met" in next(line for line in lines if line.startswith("│ tabpfn-star-small.pt"))
    assert "  iris: +1.00 points vs LogisticRegression (bar >= -1.0): met" in lines
    assert "  iris: -5.00 points vs LogisticRegression (bar >= -1.0): NOT met" in lines
    device = next(i for i, line in enumerate(lines) if line.startswith("device:"))
    assert "step ranges: " in lines[-1] and all(" steps by hardware: " in line or " step ranges: " in line
                                                for line in lines[device + 1:])

    data = json.loads(runner.invoke(app, ["info", "--json"]).stdout)
    equi = next(card for card in data["checkpoints"] if card["file"] == "equitabpfn-small.pt")
    assert equi["quality"]["met"] is True and equi["quality"]["checkpoint"] == "model/equitabpfn-small.pt"
    assert len(equi["quality"]["criteria"]) == 4 and equi["hardware_history"] and equi["metrics"]["iris_accuracy"]

    _quality_file(tmp_path, "tabpfn-star", 0.96, sha256="0" * 64)  # the scorecard of another file
    lines = runner.invoke(app, ["info"]).stdout.splitlines()
    stale = next(line for line in lines if line.startswith("tabpfn-star-small.pt: not scored"))
    assert "(it scored another file (sha256 000000000000...);" in stale
    (tmp_path / "tabpfn-star-small.json").write_text("# Quality bar of model/tabpfn-star-small.pt")
    lines = runner.invoke(app, ["info"]).stdout.splitlines()
    assert "not an `equibench score` JSON scorecard" in next(line for line in lines if line.startswith("tabpfn-star-small.pt"))
