"""`equibench evaluate --scheduler`: cells on a Dask cluster give the table of local execution,
survive a killed worker and a killed client, and a cell that kills its workers becomes a failed row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from equibench.cli import app
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.backends import DaskBackend, LocalBackend, make_backend
from equibench.evaluate.plan import estimated_cost, task_infos
from equibench.tasks.suites import load_suite

pytest.importorskip("distributed")
import cloudpickle  # noqa: E402 - installed with distributed
import dask  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

DATA = Path(__file__).parents[1] / "data"
METRICS = ["task_id", "fold", "method", "variant", "status", "accuracy", "auc", "f1", "log_loss", "n_train", "n_test",
           "threads"]


def _config(**changes) -> EvaluateConfig:
    return EvaluateConfig(**{
        "suite": "demo", "methods": ("knn", "linear-model", "decision-tree", "equitabpfn"), "folds": (0,),
        "weights": {"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt")},
        **changes,
    })


def _table(directory: Path) -> pd.DataFrame:
    return pd.read_csv(directory / "results.csv")[METRICS].reset_index(drop=True)


def _assert_same_rows(left: pd.DataFrame, right: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(left, right, check_exact=True)


@pytest.mark.slow
def test_a_local_dask_cluster_gives_the_rows_of_local_execution(tmp_path):
    # every cell runs on --threads-per-cell threads (1) on both backends: the same numbers
    with LocalBackend(2) as backend:
        evaluate(_config(), tmp_path / "local", backend=backend, progress=False)
    with DaskBackend.connect("local:2") as backend:
        assert backend.workers() == 2 and backend.capacity() == 4
        summary = evaluate(_config(), tmp_path / "dask", backend=backend, progress=False)
    assert summary.counts == {"ok": 24} and set(_table(tmp_path / "dask").threads) == {1}
    _assert_same_rows(_table(tmp_path / "dask"), _table(tmp_path / "local"))
    # the cluster is gone with the backend; rerunning has nothing left to do
    assert evaluate(_config(), tmp_path / "dask", progress=False).pending == []


@pytest.mark.parametrize("scheduler, message", [
    ("local:0", "positive number of workers"),
    ("local:two", "positive number of workers"),
    ("tcp://127.0.0.1:9", "could not reach a Dask scheduler at 'tcp://127.0.0.1:9'"),
    ("/no/such/scheduler.json", "does not exist"),
])
def test_bad_scheduler_says_what_to_do(scheduler, message):
    with pytest.raises(ValueError, match=message):
        DaskBackend.connect(scheduler, timeout_s=1)


def test_cli_refuses_jobs_with_a_scheduler_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--jobs", "2", "--scheduler", "local:2",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "exclude each other" in result.output
    assert not (tmp_path / "run").exists()
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--out", str(tmp_path / "run")],
                                env={"EQUIBENCH_SCHEDULER": "local:zero"})
    assert result.exit_code == 2 and "positive number of workers" in result.output


def test_cells_go_longest_first_on_parallel_backends(tmp_path):
    submitted = []

    class Recording(LocalBackend):
        def submit(self, cell, context):
            submitted.append(cell)
            return super().submit(cell, context)

        def workers(self):
            return 2

    config = _config(methods=("knn", "equitabpfn"))
    evaluate(config, tmp_path, backend=Recording(), progress=False)
    infos = task_infos(load_suite("demo"), None)
    costs = [estimated_cost(cell, infos[cell.task_id]) for cell in submitted]
    assert len(submitted) == 12 and costs == sorted(costs, reverse=True)
    # by n_train x n_classes x method: EquiTabPFN on the 30-class task first, KNN on iris last
    assert (submitted[0].task_id, submitted[0].method) == ("demo-synthetic-30", "equitabpfn")
    assert (submitted[-1].task_id, submitted[-1].method) == ("demo-iris", "knn")


@pytest.mark.slow
def test_a_killed_worker_has_its_cell_rescheduled_and_the_table_is_complete(tmp_path):
    config = _config(methods=("knn", "linear-model", "decision-tree"), folds=(0, 1, 2))
    with LocalBackend(2) as backend:
        evaluate(config, tmp_path / "local", backend=backend, progress=False)
    killed = []
    with DaskBackend.connect("local:2") as backend:
        def kill_a_worker():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not list((tmp_path / "dask" / "cells").glob("*.json")):
                time.sleep(0.01)
            pid = next(iter(backend.client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        killer = threading.Thread(target=kill_a_worker)
        killer.start()
        summary = evaluate(config, tmp_path / "dask", backend=backend, progress=False)
        killer.join()
    assert killed and summary.counts == {"ok": 54}
    table = _table(tmp_path / "dask")
    assert len(table) == 54 and table.groupby(["task_id", "fold", "method"]).size().max() == 1
    _assert_same_rows(table, _table(tmp_path / "local"))


def _kill_own_worker(cell, context, task=None):
    os.kill(os.getpid(), signal.SIGKILL)


class _Sabotaged(DaskBackend):
    """Runs the KNN cell of iris with a function that kills whichever worker runs it."""

    def submit(self, cell, context):
        if cell.task_id == "demo-iris" and cell.method == "knn":
            return self.executor.submit(_kill_own_worker, cell, context)
        return super().submit(cell, context)


@pytest.mark.slow
def test_a_cell_that_kills_its_workers_ends_as_a_failed_row(tmp_path):
    from distributed import Client, LocalCluster

    config = _config(methods=("knn", "linear-model"))
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
        with _Sabotaged(Client(cluster), cluster) as backend:
            summary = evaluate(config, tmp_path, backend=backend, progress=False)
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 12 and table.groupby(["task_id", "method"]).size().max() == 1
    culprit = table[(table.task_id == "demo-iris") & (table.method == "knn")].iloc[0]
    assert culprit.status == "failed" and "worker died 2 times" in culprit.reason
    # a cell queued on a dying worker may share the blame; any such row says so and reruns
    others = table.drop(culprit.name)
    assert ((others.status == "ok") | others.reason.str.contains("worker died", na=False)).all()
    assert summary.counts["failed"] == (table.status == "failed").sum()
    rerun = evaluate(config, tmp_path, progress=False)
    assert len(rerun.pending) == summary.counts["failed"] and set(pd.read_csv(tmp_path / "results.csv").status) == {"ok"}


@pytest.mark.slow
def test_resume_after_the_client_and_its_cluster_are_killed(tmp_path):
    command = [
        sys.executable, "-m", "equibench.cli", "evaluate", "--suite", "demo", "--methods", "knn,linear-model,equitabpfn",
        "--folds", "0-2", "--weights", f"equitabpfn={DATA / 'tiny-equitabpfn.pt'}",
        "--scheduler", "local:2", "--out", str(tmp_path / "run"), "--no-progress",
    ]
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as stderr_file:  # own session: the kill takes the client and its workers at once
        process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr_file,
                                   start_new_session=True)
        cells = tmp_path / "run" / "cells"
        deadline = time.monotonic() + 300
        while process.poll() is None and len(list(cells.glob("*.json"))) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        exited_by_itself = process.poll() is not None
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not exited_by_itself, stderr.read_text()
    done_before = len(list(cells.glob("*.json")))
    assert 5 <= done_before < 54, "the run should have been killed part-way"
    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    table = _table(tmp_path / "run")
    assert len(table) == 54 and set(table.status) == {"ok"}
    assert table.groupby(["task_id", "fold", "method", "variant"]).size().max() == 1
    with LocalBackend(2) as backend:
        evaluate(_config(methods=("knn", "linear-model", "equitabpfn"), folds=(0, 1, 2)), tmp_path / "clean",
                 backend=backend, progress=False)
    _assert_same_rows(table, _table(tmp_path / "clean"))


def test_make_backend_without_a_scheduler_is_local():
    with make_backend(3) as backend:
        assert isinstance(backend, LocalBackend) and backend.workers() == 3
