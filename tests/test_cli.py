"""The command line as Typer users expect it: --version, python -m, completion, --json,
a fast start, output that is never cut, progress bars on stderr."""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console
from typer.testing import CliRunner

from equibench import __version__
from equibench.cli import SCHEDULE_NAMES, SIZE_NAMES, app
from equibench.suites import BUILTIN_SUITES

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


def test_shell_completion_is_offered():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--install-completion" in result.output and "--show-completion" in result.output


def test_json_output_of_info_methods_and_suites():
    runner = CliRunner()
    suites = json.loads(runner.invoke(app, ["suites", "--json"]).stdout)
    assert {s["suite"]: s["task_ids"] for s in suites} == {n: list(s.task_ids) for n, s in BUILTIN_SUITES.items()}
    methods = json.loads(runner.invoke(app, ["methods", "--json"]).stdout)
    knn = next(row for row in methods if row["method"] == "knn")
    assert knn["ready"] is True and knn["install"] is None
    info = json.loads(runner.invoke(app, ["info", "--json"]).stdout)
    assert info["equibench"] == __version__ and info["device"]["type"] in ("cpu", "cuda")
    assert {c["file"] for c in info["checkpoints"]} >= {"equitabpfn-small.pt", "tabpfn-star-small.pt"}
    assert all(c["arch"] in ("equitabpfn", "tabpfn-star") for c in info["checkpoints"])


def test_suites_table_shows_every_task_id_even_in_a_narrow_terminal(monkeypatch):
    narrow = Console(width=50, force_terminal=True, soft_wrap=True, color_system=None)
    monkeypatch.setattr("equibench.cli.console", narrow)
    with narrow.capture() as captured:
        result = CliRunner().invoke(app, ["suites"])
    assert result.exit_code == 0
    text = captured.get()
    assert "…" not in text and "..." not in text
    ids: dict[str, str] = {}
    suite = None
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) == 5 and "suite" not in cells[1]:
            suite = cells[1].strip() or suite
            ids[suite] = ids.get(suite, "") + cells[3].strip()
    assert {name: joined.replace(" ", "").split(",") for name, joined in ids.items()} == {
        name: list(s.task_ids) for name, s in BUILTIN_SUITES.items()
    }
    assert max(len(line) for line in text.splitlines()) <= 50


def test_piped_output_is_not_wrapped():
    result = CliRunner().invoke(app, ["suites"])  # stdout is not a terminal here
    le10 = next(line for line in result.stdout.splitlines() if "le10" in line)
    assert ", ".join(BUILTIN_SUITES["le10"].task_ids) in le10


def test_help_and_listing_commands_import_no_heavy_module(tmp_path):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from equibench.cli import app\n"
        "for args in (['--help'], ['methods'], ['--version']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    # outside the checkout: `-c` puts the working directory first on sys.path, where the
    # uninstalled source tree (without equibench.model / equibench.baselines) would shadow
    # a regular install
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"


def test_cli_size_and_schedule_names_match_the_library():
    from equibench.model import SIZES

    from equibench.pretrain import SCHEDULES

    assert tuple(SIZES) == SIZE_NAMES
    assert SCHEDULES == SCHEDULE_NAMES


def test_progress_bars_are_on_stderr(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "2",
                                 "--batch-size", "2", "--rows", "64", "--device", "cpu", "--no-bundled-validation",
                                 "--validate-every", "100"])
    assert result.exit_code == 0, result.output
    assert "loss" in result.stderr and "datasets/s" in result.stderr
    assert "datasets/s" not in result.stdout and "model written to" in result.stdout
    from make_fixtures import CHECKPOINTS

    result = runner.invoke(app, ["equivariance", "--checkpoints", str(CHECKPOINTS["equitabpfn"]), "--out",
                                 str(tmp_path / "eq"), "--classes", "3", "--ensembles", "1", "--datasets", "2",
                                 "--rows", "32", "--no-toy"])
    assert result.exit_code == 0, result.output
    assert "1/1" in result.stderr and "(checkpoint, K)" in result.stderr
    assert "arg-max changes" in result.stdout and "1/1" not in result.stdout
