"""The command line as Typer users expect it: --version, python -m, completion, --json,
a fast start."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from equibench import __version__
from equibench.cli import FEATURE_COUNT_NAMES, SCHEDULE_NAMES, SIZE_NAMES, app
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
    assert {s["suite"]: s["task_ids"] for s in suites} == {n: list(s.task_ids) for n, s in BUILTIN_SUITES.items()}
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


def test_cli_size_schedule_and_feature_count_names_match_the_library():
    from equibench.model import SIZES
    from equibench.pretrain import SCHEDULES
    from equibench.prior.config import FEATURE_COUNTS

    assert tuple(SIZES) == SIZE_NAMES
    assert SCHEDULES == SCHEDULE_NAMES
    assert FEATURE_COUNTS == FEATURE_COUNT_NAMES


def test_pretrain_recipe_list_needs_no_out_and_no_heavy_module(tmp_path):
    from equibench.cli.training import RECIPES_DIR
    from equibench.pretrain.recipe import RECIPES_DIR as LIBRARY_RECIPES_DIR

    assert RECIPES_DIR == LIBRARY_RECIPES_DIR
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from equibench.cli import app\n"
        "result = CliRunner().invoke(app, ['pretrain', '--recipe', 'list'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(result.output)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    listing, heavy = ran.stdout.strip().rsplit("\n", 1)
    assert heavy == "[]"
    assert [line.split()[0] for line in listing.splitlines()] == ["deeper-6", "medium-gpu", "small-cpu"]
