"""Progress where stderr is not a terminal: plain lines, so that a log shows the run is alive."""

from __future__ import annotations

import io
import re

from rich.console import Console
from typer.testing import CliRunner

from equibench.cli import app
from equibench.progress import Progress


def test_plain_lines_when_the_console_is_no_terminal(monkeypatch):
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    stream = io.StringIO()
    with Progress(console=Console(file=stream, force_terminal=False), name="score") as bar:
        task = bar.add_task("iris", total=3, loss=1.25)
        for _ in range(3):
            bar.advance(task)
        bar.update(task, loss=0.5)  # after completion: no more lines
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("score iris:")]
    assert lines[0].startswith("score iris: 1/3 done, loss 1.25, elapsed 0:00:00, ETA ")
    assert lines[-1].startswith("score iris: 3/3 done, loss 1.25") and lines[-1].endswith("ETA 0:00:00")
    assert len(lines) == 3


def test_no_plain_lines_on_a_terminal_or_before_the_interval(monkeypatch):
    for env, terminal in (("0", True), ("3600", False)):
        monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", env)
        stream = io.StringIO()
        with Progress(console=Console(file=stream, force_terminal=terminal, width=80), name="x") as bar:
            task = bar.add_task("t", total=10)
            bar.advance(task)
        assert "x t: 1/10 done" not in stream.getvalue()


def test_evaluate_writes_progress_lines_to_a_log(tmp_path, monkeypatch):
    """`equibench evaluate ... 2>log`: progress lines in the log while it runs."""
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "evaluate demo: 1/6 done, ok 1, skipped 0, failed 0" in result.stderr
    assert "evaluate demo: 6/6 done" in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("evaluate demo: ")]
    finished = [line for line in lines if not line.startswith("evaluate demo: 0/6 done")]
    clock = r"(\d+ days?, )?\d+:\d\d:\d\d"
    assert finished and all(re.search(rf", elapsed {clock}, ETA {clock}$", line) for line in finished)
    assert lines[-1].startswith("evaluate demo: 6/6 done") and lines[-1].endswith("ETA 0:00:00")
