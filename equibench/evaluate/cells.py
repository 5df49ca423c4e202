"""One cell of an evaluation: (task, fold, method, settings), and how a worker runs it.

This is the worker side of `equibench evaluate`: it only computes. A cell's row and test
probabilities go back to the calling process, which alone writes the results store.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import threading
import time
import traceback
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from .._version import __version__
from ..baselines.registry import method_spec
from ..baselines.settings import Settings
from ..classifier.predict_progress import quiet_predictions
from ..errors import MethodUnavailableError, first_line
from ..tasks.suites import load_task
from ..tasks.task import Task
from .metrics import cell_metrics
from .tabzilla import TabZillaPreprocessor


@dataclass(frozen=True)
class Cell:
    suite: str
    task_id: str
    fold: int
    method: str
    settings: Settings  # the method's, prepared for the run (see Method.prepare)

    @property
    def variant(self) -> str:
        return self.settings.variant

    @property
    def key(self) -> str:
        return f"{self.suite}__{self.task_id}__fold{self.fold}__{self.method}__{self.variant}"


@dataclass(frozen=True)
class CellContext:
    """What a worker needs besides the cell: where tasks come from, the seed and the threads."""

    openml_cache: str | None  # the writable working cache
    seed: int
    threads: int = 1  # torch and BLAS/OpenMP threads of every cell (threads_per_cell), whatever the backend
    equibench_version: str = __version__  # the caller's: a worker with another version refuses the cell
    file_tasks: tuple = ()  # the suite's table-file tasks (user_data.FileTask)


@dataclass
class CellOutcome:
    row: dict
    proba: np.ndarray | None = None  # (n_test, K)
    arrays: dict | None = None  # y_true and test row indices
    traceback: str | None = None


def failed_row(cell: Cell, seed: int, reason: str) -> dict:
    """The row of a cell that produced no result, with why."""
    return {
        "suite": cell.suite, "task_id": cell.task_id, "dataset": "", "fold": cell.fold, "method": cell.method,
        "variant": cell.variant, "status": "failed", "reason": reason, "seed": seed,
    }


cached_task = functools.lru_cache(maxsize=4)(load_task)  # a worker runs a task's cells one after another


@functools.lru_cache(maxsize=8)
def _prepared_fold(task: Task, fold: int, seed: int) -> dict:
    """The fold's preprocessed arrays: TabZilla preprocessing fitted on its train part."""
    labels = task.encoded_labels()
    train, validation, test = task.split(fold)
    preprocessor = TabZillaPreprocessor(task.categorical, seed=seed).fit(task.X.iloc[train], labels[train])
    return {
        "X_train": preprocessor.transform(task.X.iloc[train]), "y_train": labels[train],
        "X_val": preprocessor.transform(task.X.iloc[validation]), "y_val": labels[validation],
        "X_test": preprocessor.transform(task.X.iloc[test]), "y_test": labels[test], "test_rows": test,
        "name": task.name, "n_classes": len(task.classes), "n_features": task.X.shape[1],
    }


def run_cell(cell: Cell, context: CellContext, task: Task | None = None) -> CellOutcome:
    """Fit and evaluate one cell on ``context.threads`` threads with deterministic torch (see
    :func:`reproducible_cell`); never raises: failures come back as a failed row, which
    records the threads the cell ran with.

    ``task`` is the cell's task when the caller ships it (a Dask cluster); otherwise the
    worker loads it from ``context.openml_cache``."""
    with reproducible_cell(context.threads), quiet_predictions():  # the run reports the cells' progress
        outcome = _fit_and_score(cell, context, task)
        outcome.row["threads"] = torch.get_num_threads()
    return outcome


def _fit_and_score(cell: Cell, context: CellContext, task: Task | None) -> CellOutcome:
    row = {**failed_row(cell, context.seed, ""), "status": "ok"}
    if context.equibench_version != __version__:  # e.g. a Dask worker that joined with other code
        reason = (f"this worker runs equibench {__version__}, the caller {context.equibench_version}; install the "
                  "same version on every worker and rerun")
        return CellOutcome({**row, "status": "failed", "reason": reason})
    try:
        task = task if task is not None else cached_task(cell.task_id, context.openml_cache, context.file_tasks)
        data = _prepared_fold(task, cell.fold, context.seed)
        row.update(
            dataset=data["name"], n_train=len(data["y_train"]), n_val=len(data["y_val"]), n_test=len(data["y_test"]),
            n_features=data["n_features"], n_features_used=data["X_train"].shape[1], n_classes=data["n_classes"],
        )
        random.seed(context.seed)
        np.random.seed(context.seed)
        torch.manual_seed(context.seed)
        method = method_spec(cell.method).implementation()(data["n_classes"], context.seed, cell.settings)
        started = time.perf_counter()
        method.fit(data["X_train"], data["y_train"], data["X_val"], data["y_val"])
        row["time_fit_s"] = time.perf_counter() - started
        row.update(method.provenance())
        started = time.perf_counter()
        proba = method.predict_proba(data["X_test"])  # (n_test, K)
        row["time_predict_s"] = time.perf_counter() - started
        if diagnostics := method.diagnostics():  # e.g. how a PFN's contexts served the test rows
            row["diagnostics"] = diagnostics
        if not np.isfinite(proba).all():
            raise FloatingPointError(f"{cell.method} predicted non-finite probabilities")
        row.update(cell_metrics(data["y_test"], proba))
        return CellOutcome(row, proba.astype(np.float32), {"y_true": data["y_test"], "test_rows": data["test_rows"]})
    except MethodUnavailableError as error:
        return CellOutcome({**row, "status": "skipped", "reason": str(error)})
    except Exception as error:  # a failing cell is recorded, the run goes on
        reason = first_line(error)[:500]
        return CellOutcome({**row, "status": "failed", "reason": reason}, traceback=traceback.format_exc())


_cells_lock = threading.Lock()
_cells_active = 0  # cells running in this process (a Dask worker may run several, one per thread)
_outside: dict = {}  # the process's settings before its first active cell, restored after its last


@contextlib.contextmanager
def reproducible_cell(threads: int):
    """Run the block like every cell runs, whatever the backend: torch and BLAS/OpenMP
    (numpy, scipy, scikit-learn) on ``threads`` threads, and torch's deterministic
    algorithms (warn-only, so an op without a deterministic kernel still runs; cuDNN
    without autotuning; cuBLAS with a fixed workspace). The thread count fixes the order of
    floating-point reductions, which the neural baselines' trainings amplify.

    Thread settings are per OS thread (OpenMP) and per process (BLAS pools, torch flags):
    each cell applies them in its own thread, and the last cell of the process to finish
    restores what was there before."""
    global _cells_active
    with _cells_lock:
        if _cells_active == 0:
            _outside.update(
                torch_threads=torch.get_num_threads(), blas=threadpool_limits(threads),
                deterministic=torch.are_deterministic_algorithms_enabled(),
                warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
                cudnn=(torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic),
                cublas=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            )
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        else:
            threadpool_limits(threads)  # this thread's OpenMP setting; the BLAS pools are set already
        torch.set_num_threads(threads)
        _cells_active += 1
    try:
        yield
    finally:
        with _cells_lock:
            _cells_active -= 1
            if _cells_active == 0:
                _outside["blas"].restore_original_limits()
                torch.set_num_threads(_outside["torch_threads"])
                torch.use_deterministic_algorithms(_outside["deterministic"], warn_only=_outside["warn_only"])
                torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = _outside["cudnn"]
                if _outside["cublas"] is None:
                    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
                _outside.clear()
