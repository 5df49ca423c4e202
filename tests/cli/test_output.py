"""The commands' output: never cut, at natural width when piped, progress bars on stderr."""

from __future__ import annotations

import re

import pytest
import typer.rich_utils
from rich.console import Console
from typer.testing import CliRunner

from equibench.cli import app
from equibench.tasks.suites import BUILTIN_SUITES


def test_suites_table_shows_every_task_id_even_in_a_narrow_terminal(monkeypatch):
    narrow = Console(width=50, force_terminal=True, soft_wrap=True, color_system=None)
    monkeypatch.setattr("equibench.cli.output.console", narrow)
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


@pytest.mark.parametrize("command", ["pretrain", "evaluate", "equivariance", "download", "export"])
def test_piped_help_never_cuts_an_option_name(command, monkeypatch):
    monkeypatch.delenv("TERMINAL_WIDTH", raising=False)
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", None)  # as a fresh process has it
    result = CliRunner().invoke(app, [command, "--help"])  # stdout is not a terminal here
    assert result.exit_code == 0
    assert "…" not in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.count("<") > line.count(">")]  # no folded choices
    assert "--grad-accumulation" in result.stdout or command != "pretrain"


def test_progress_bars_are_on_stderr(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "2",
                                 "--batch-size", "2", "--rows", "64", "--device", "cpu", "--no-bundled-validation",
                                 "--validate-every", "100"])
    assert result.exit_code == 0, result.output
    assert "loss" in result.stderr and "datasets/s" in result.stderr
    assert "datasets/s" not in result.stdout and "model written to" in result.stdout
    # piped, the progress line keeps every column (the shared stderr console: never cut at 80)
    columns = r"equitabpfn-tiny ━+ 2/2 \d:\d\d:\d\d \d:\d\d:\d\d loss \S+ +lr \S+ +\S+ datasets/s, prior wait \d+%"
    assert re.fullmatch(columns, result.stderr.splitlines()[-1]), result.stderr
    from make_fixtures import CHECKPOINTS

    result = runner.invoke(app, ["equivariance", "--checkpoints", str(CHECKPOINTS["equitabpfn"]), "--out",
                                 str(tmp_path / "eq"), "--classes", "3", "--ensembles", "1", "--datasets", "2",
                                 "--rows", "32", "--no-toy"])
    assert result.exit_code == 0, result.output
    assert "1/1" in result.stderr and "(checkpoint or method, K)" in result.stderr
    assert "arg-max changes" in result.stdout and "1/1" not in result.stdout
