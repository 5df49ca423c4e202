"""The progress of `equibench evaluate`: the time left from the cells' estimated cost (on a
terminal and in the plain lines of a log), and the line that names the cells running now."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from equibench.baselines.settings import Settings
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.cells import Cell
from equibench.evaluate.progress import CellsProgress, CellsRemainingColumn, CellsWork, running_text
from equibench.progress import remaining_s


def _cells(method: str, n: int) -> list[Cell]:
    return [Cell("gt10", f"task-{i}", 0, method, Settings()) for i in range(n)]


def _seconds(clock: str) -> int:
    """The seconds of a plain line's clock: ``1:02:03`` or ``2 days, 1:02:03``."""
    days, _, time = clock.rpartition(", ")
    hours, minutes, seconds = map(int, time.split(":"))
    return (int(days.split()[0]) if days else 0) * 86400 + hours * 3600 + minutes * 60 + seconds


def test_the_time_left_follows_the_cost_when_the_slowest_method_runs_first(monkeypatch):
    """10 cells of cost 100 first, taking 100 s each, then 90 of cost 1, taking 1 s each: after
    the slow ones 90 s are left, which the cost says, where the cell count says 2.5 hours."""
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    now = [0.0]
    costs = {**dict.fromkeys(_cells("tabnet", 10), 100.0), **dict.fromkeys(_cells("knn", 90), 1.0)}
    work = CellsWork(costs, clock=lambda: now[0])
    cells = list(costs)
    log = io.StringIO()
    with CellsProgress(console=Console(file=log, width=200), get_time=lambda: now[0], auto_refresh=False) as bar:
        task_id = bar.add_task("evaluate gt10", total=len(costs), work=work)
        for i, cell in enumerate(cells[:10]):
            work.running(cells[i:], 1)
            now[0] += costs[cell]  # a cell takes its estimated cost in seconds
            work.finish(cell, "ok")
            work.running(cells[i + 1:], 1)
            bar.update(task_id, advance=1)
        task = bar.tasks[0]
        assert remaining_s(task) == pytest.approx(90.0)
        assert CellsRemainingColumn().render(task).plain == "0:01:30"
        assert task.elapsed / task.completed * (task.total - task.completed) == pytest.approx(9000.0)
    lines = log.getvalue().splitlines()
    assert lines[0] == "evaluate gt10: 0/100 done, elapsed 0:00:00, ETA ?"
    assert lines[10] == "evaluate gt10: 10/100 done, elapsed 0:16:40, ETA 0:01:30"  # no work object printed


def test_the_first_time_left_counts_the_cells_still_running_on_the_other_workers():
    """Two workers, 10 cells of cost 1 taking 60 s each: when the first finishes, the other one
    is done too, so 4 rounds of 60 s are left (4:00), where the finished cells against the time so
    far said more than twice that (9 cells x 60 s: 9:00); the running cells' time counts on."""
    now = [0.0]
    cells = _cells("tabnet", 10)
    work = CellsWork(dict.fromkeys(cells, 1.0), workers=2, clock=lambda: now[0])
    work.running(cells, 2)
    assert work.remaining_s() is None  # nothing finished yet
    now[0] = 60.0
    work.finish(cells[0], "ok")
    work.running(cells[1:], 2)
    assert work.remaining_s() == pytest.approx(240.0)
    now[0] = 90.0  # cells 1 (since 0 s) and 2 (since 60 s) are running
    assert work.remaining_s() == pytest.approx((9 - 1 - 0.5) * 60 / 2)  # cell 1 counts done, not more
    work.finish(cells[1], "ok")  # late: cells cost more than the first said
    work.running(cells[2:], 2)
    assert work.remaining_s() == pytest.approx((8 - 30 / 75) * 75 / 2)


def test_a_skipped_cell_takes_the_rest_of_its_method_and_variant_out_of_the_work():
    official, knn = _cells("equitabpfn-official", 3), _cells("knn", 3)
    now = [0.0]
    work = CellsWork({**dict.fromkeys(official, 4000.0), **dict.fromkeys(knn, 2.0)}, clock=lambda: now[0])
    assert sum(work.left.values()) == 12006.0
    work.running([*official, *knn], 1)
    work.finish(official[0], "skipped")  # no weights: its other cells skip alike, in no time
    assert sum(work.left.values()) == 6.0 and work.remaining_s() is None
    work.running(knn, 1)
    now[0] = 1.0
    work.finish(knn[0], "ok")
    work.running(knn[1:], 1)
    now[0] = 2.0
    work.finish(knn[1], "failed")  # it ran: its time was spent
    work.running(knn[2:], 1)
    assert sum(work.left.values()) == 2.0 and work.remaining_s() == pytest.approx(1.0)


def test_the_running_line_names_the_running_cells_and_counts_the_queued_ones():
    """The run keeps two cells per worker submitted: the first ``workers`` run, the others wait."""
    running = {cell.key: cell for cell in _cells("knn", 4)}
    assert running_text({}, 2) == ""
    assert running_text(dict(list(running.items())[:1]), 1) == "running on 1 worker: task-0 knn fold 0"
    assert running_text(running, 2) == "running on 2 workers: task-0 knn fold 0, task-1 knn fold 0 (+2 queued)"
    assert running_text(running, 4) == "running on 4 workers: task-0 knn fold 0, task-1 knn fold 0 and 2 more"
    assert running_text(running, 0) == "queued: 4, no worker yet"


def test_a_log_counts_this_run_s_cells_and_takes_the_time_left_from_their_cost(tmp_path, monkeypatch):
    """stderr no terminal: the plain lines count the cells of this run, not those stored before,
    and the time left follows their cost: iris first, at a 10,000th of the others' cost, leaves
    after it 50,000 times its time (by cells, 5 times: well under a minute)."""
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    evaluate(EvaluateConfig(suite="demo", methods=("knn",), folds=(0,)), tmp_path, progress=False)
    monkeypatch.setattr("equibench.evaluate.run.estimated_cost",
                        lambda cell, info: 1e-4 if cell.task_id == "demo-iris" else 1.0)
    log = io.StringIO()
    evaluate(EvaluateConfig(suite="demo", methods=("knn",), folds=(0, 1)), tmp_path, console=Console(file=log, width=200))
    lines = [line for line in log.getvalue().splitlines() if line.startswith("evaluate demo: ")]
    assert {line.partition(" done")[0] for line in lines} == {f"evaluate demo: {n}/6" for n in range(7)}
    assert lines[0].endswith("ETA ?")  # before the first cell finished
    after_iris = next(line for line in lines if line.startswith("evaluate demo: 1/6 done"))
    assert _seconds(after_iris.rpartition("ETA ")[2]) >= 60
    assert lines[-1].startswith("evaluate demo: 6/6 done, ok 6, skipped 0, failed 0") and lines[-1].endswith("ETA 0:00:00")
