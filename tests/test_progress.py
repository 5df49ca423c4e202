"""Progress where stderr is not a terminal: plain lines, so that a log shows the run is alive."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import InvalidInputError
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
    assert lines[0] == "score iris: 0/3 done, loss 1.25, elapsed 0:00:00, ETA ?"  # at the start
    assert lines[1].startswith("score iris: 1/3 done, loss 1.25, elapsed 0:00:00, ETA ")
    assert lines[-1].startswith("score iris: 3/3 done, loss 1.25") and lines[-1].endswith("ETA 0:00:00")
    assert len(lines) == 4


def test_a_line_at_the_start_then_every_interval_while_a_long_step_runs(monkeypatch):
    """A log shows the run is alive from its start, also while no step finishes (a slow cell):
    the lines come from a timer, not from the steps; none of a number not yet known (NaN)."""
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0.2")
    stream = io.StringIO()
    with Progress(console=Console(file=stream, force_terminal=False, width=200), name="evaluate") as bar:
        bar.add_task("demo", total=5, loss=float("nan"))
        assert stream.getvalue() == "evaluate demo: 0/5 done, elapsed 0:00:00, ETA ?\n"
        time.sleep(0.9)  # one step running all along
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("evaluate demo:")]
    assert 4 <= len(lines) <= 6 and all(line.startswith("evaluate demo: 0/5 done, elapsed ") for line in lines)


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf"])
def test_a_bad_progress_interval_is_refused_with_one_line_before_anything_runs(value, tmp_path, monkeypatch):
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", value)
    with pytest.raises(InvalidInputError, match=f"EQUIBENCH_PROGRESS_EVERY_S must be .* got {value!r}"):
        Progress(console=Console(file=io.StringIO()))
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.stderr.startswith("error: EQUIBENCH_PROGRESS_EVERY_S must be the seconds")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "out").exists()


def test_no_plain_lines_on_a_terminal_or_before_the_interval(monkeypatch):
    for env, terminal in (("0", True), ("3600", False)):
        monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", env)
        stream = io.StringIO()
        with Progress(console=Console(file=stream, force_terminal=terminal, width=80), name="x") as bar:
            task = bar.add_task("t", total=10)
            bar.advance(task)
        assert "x t: 1/10 done" not in stream.getvalue()


def test_a_deadline_caps_the_eta_and_says_so(monkeypatch):
    """A task with a time limit (its deadline field): the ETA is the time left to it where that
    is sooner than the steps' ETA, marked as the time limit's, in the plain lines and the bar;
    the text field is in the plain lines as it is, the deadline is not."""
    import time

    from equibench.progress import LimitedRemainingColumn

    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    stream = io.StringIO()
    with Progress(console=Console(file=stream, force_terminal=False, width=200), name="pretrain") as bar:
        task = bar.add_task("run", total=65316, stats="lr 1.0e-03", deadline=time.monotonic() + 300)
        bar.update(task, completed=0)
        time.sleep(0.02)  # a step: all 65316 would take 20 minutes
        bar.update(task, completed=1, stats="loss 0.5, 2.0 datasets/s")
        column = LimitedRemainingColumn().render(bar.tasks[0])
        soon = bar.add_task("soon", total=2, deadline=time.monotonic() + 3600)
        time.sleep(0.01)
        bar.update(soon, completed=1)
    lines = stream.getvalue().splitlines()
    assert re.fullmatch(r"pretrain run: 0/65316 done, lr 1\.0e-03, elapsed 0:00:00, ETA 0:0[45]:\d\d \(time limit\)",
                        lines[0]), lines[0]
    assert re.fullmatch(r"pretrain run: 1/65316 done, loss 0\.5, 2\.0 datasets/s, elapsed 0:00:00, "
                        r"ETA 0:0[45]:\d\d \(time limit\)", lines[2]), lines[2]  # after the start line
    assert re.fullmatch(r"0:0[45]:\d\d \(limit\)", column.plain), column.plain
    soon_line = next(line for line in lines if line.startswith("pretrain soon: 1/2"))  # the steps end first
    assert re.search(r"ETA 0:00:00$", soon_line) and "deadline" not in stream.getvalue()


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
