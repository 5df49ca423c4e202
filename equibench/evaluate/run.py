"""`equibench evaluate`: every method on every task and fold of a suite, resumable.

A *cell* is (task, fold, method, settings), stored under its settings' variant (see cells
and baselines.settings). Workers run cells and return a row and
the test probabilities; only this process writes the results store (see results_store). Cells
run through a backend (see backends): this process, local worker processes or a Dask cluster.
A run loads its suite once, plans its cells (see config and plan), shows its progress (see
progress) and returns its summary (see summary).
"""

from __future__ import annotations

import concurrent.futures as futures
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ..baselines.settings import Settings
from ..errors import InvalidInputError
from ..outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from ..progress import plain_every_s
from ..tasks.openml import working_cache
from ..tasks.suites import Suite, load_suite
from ..tasks.user_data import frame_suite
from .backends import CellBackend, LocalBackend
from .cells import Cell, CellContext, CellOutcome, failed_row
from .config import EvaluateConfig, prepared_settings, run_fingerprint
from .plan import TaskInfo, estimated_cost, missing_groups, plan_cells, task_infos, warn_of_cache_gaps
from .progress import CellsProgress, CellsWork, progress_columns, running_text
from .results_store import ResultsStore
from .run_manifest import (
    MANIFEST,
    finish_invocation,
    methods_to_rerun,
    read_manifest,
    recorded_settings,
    start_invocation,
)
from .summary import EvaluateSummary, check_something_loads, stored_rows


def evaluate(
    config: EvaluateConfig,
    out_dir: str | os.PathLike,
    backend: CellBackend | None = None,
    dry_run: bool = False,
    progress: bool = True,
    console: Console | None = None,
    rerun_changed: bool = False,
) -> EvaluateSummary:
    """Run the pending cells of ``config`` into ``out_dir`` (finished ones are kept; with
    ``rerun_changed``, those of the run's methods whose settings or threads per cell changed
    are replaced; the cells of methods outside the run are never touched). Cells run on
    ``backend`` (default: one at a time in this process), each on ``config.threads_per_cell``
    threads; with several workers, the longest (by :func:`estimated_cost`) go first so the
    tail of the run is short.

    The folder is locked for the run (a second run on it is refused, naming the first); a
    dry run only reads it. A folder this call created is removed again when the settings are
    rejected before any cell ran."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInputError(f"`out_dir` {str(out_dir)!r} is an existing file, not a folder; pass a folder path")
    if progress:
        plain_every_s()  # a bad EQUIBENCH_PROGRESS_EVERY_S is refused before the folder is touched
    console = console or Console(stderr=True)
    suite = load_suite(config.suite)
    warn_of_cache_gaps(config, suite, console)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="equibench-dry-run-") as scratch:
            store = ResultsStore(out_dir)
            run = _prepare(config, suite, out_dir, store, False, Path(scratch) / "openml-cache")
            summary = _summary(config, out_dir, store, run)
            summary.rows = stored_rows(store, summary.cells)
            return summary
    created = not out_dir.exists()
    with locked_folder(out_dir) as lock:
        try:
            store = ResultsStore(out_dir)
            store.remove_stray_temporaries()
            run = _prepare(config, suite, out_dir, store, rerun_changed, out_dir / "openml-cache")
            summary = _summary(config, out_dir, store, run)
            check_something_loads(summary)
        except BaseException:
            if created:  # rejected before any work: leave no folder behind
                _empty_rejected(out_dir)
                lock.remove_folder = True
            raise
        try:
            _run_cells(config, store, run, summary, backend, progress, console)
        finally:
            summary.rows = stored_rows(store, summary.cells)
        return summary


def evaluate_frame(frame, target: str, out: str | os.PathLike, *, name: str = "frame",
                   fold_column: str | None = None, backend: CellBackend | None = None, progress: bool = False,
                   **options) -> EvaluateSummary:
    """Evaluate methods on a data frame (pandas, polars, ...) with the same protocol, results
    store and report as ``equibench evaluate``.

    The frame is stored as ``out/data/<name>.parquet`` and a suite file ``out/suite.yaml``
    naming it is written, so the run can be resumed (call again) and reported
    (``equibench report --results out``). ``fold_column`` names a column of test folds;
    ``options`` go to :class:`EvaluateConfig` (``methods``, ``folds``, ``ensembles``,
    ``seed``, ``device``, ...; ``methods="knn"`` and ``folds=0`` are one method, one fold).
    A frame with a column name twice, missing labels, labels of several types or one class
    is refused; an object column of mixed types is stored as the classifiers read it.

    Returns an :class:`EvaluateSummary`: its repr is one line (cells, ok/skipped/failed,
    methods, folder); ``summary.methods()`` gives per method the counts and mean accuracy,
    ``summary.table()`` every row::

        >>> summary = equibench.evaluate_frame(df, target="outcome", out="runs/patients", methods=("knn",))
        >>> summary
        <EvaluateSummary frame: 10 cells (ok=10, skipped=0, failed=0); this call wrote ok=10; methods knn; in 'runs/patients'>
        >>> summary.methods()["knn"]["accuracy"]  # the mean over its ok cells
    """
    suite = frame_suite(frame, target, Path(out), name, fold_column)
    return evaluate(EvaluateConfig(suite=str(suite), **options), out, backend=backend, progress=progress)


@dataclass
class _Run:
    """What a run was prepared with (see :func:`_prepare`)."""

    suite: Suite
    context: CellContext
    fingerprint: dict
    infos: dict[str, TaskInfo]
    settings: dict[str, Settings]  # method -> prepared settings


def _prepare(config: EvaluateConfig, suite: Suite, out_dir: Path, store: ResultsStore, rerun_changed: bool,
             work_cache: Path) -> _Run:
    """Resolve the settings, check them against the stored cells (replacing those of changed
    methods when ``rerun_changed``) and load every task of ``suite`` once."""
    settings = prepared_settings(config)
    fingerprint = run_fingerprint(config, settings, suite)
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        saved = read_manifest(manifest_path)["settings"]
        stored = {row["method"] for row in store.rows()}
        for name in methods_to_rerun(out_dir, saved, fingerprint, stored, config.methods, rerun_changed):
            store.forget_method(name)
        fingerprint = recorded_settings(saved, fingerprint, stored - set(config.methods))
    working = source = None
    if suite.needs_openml:
        source = config.resolved_openml_cache()
        if source is not None:
            working = str(working_cache(source, work_cache))
    context = CellContext(working, config.seed, config.threads_per_cell, file_tasks=suite.files)
    return _Run(suite, context, fingerprint, task_infos(suite, working, source), settings)


def _summary(config: EvaluateConfig, out_dir: Path, store: ResultsStore, run: _Run) -> EvaluateSummary:
    """The run as planned, before any cell runs: its cells, those pending, and its missing and
    damaged tasks and cells."""
    cells = plan_cells(config, run.suite, run.infos, run.settings)
    finished = store.finished_keys()
    pending = [cell for cell in cells if cell.key not in finished]
    task_errors = {task_id: info.error for task_id, info in run.infos.items() if info.error}
    damaged = {key: reason for key, reason in store.damaged.items() if key in {cell.key for cell in cells}}
    pending_tasks = {cell.task_id for cell in pending}
    missing = {task_id: str(info.missing) for task_id, info in run.infos.items()
               if info.missing is not None and task_id in pending_tasks}
    groups, next_step = missing_groups(config, run.suite, run.infos, pending_tasks)
    return EvaluateSummary(out_dir, cells, pending, Counter(), task_errors, damaged, missing=missing,
                           suite=run.suite.name, next_step=next_step, missing_groups=groups)


def _empty_rejected(out_dir: Path) -> None:
    """Empty the folder a rejected run created: it holds only what that run copied."""
    for child in out_dir.iterdir():
        if child.name not in (LOCK_FILE, HOLDER_FILE):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _run_cells(config: EvaluateConfig, store: ResultsStore, run: _Run, summary: EvaluateSummary,
               backend: CellBackend | None, progress: bool, console: Console) -> None:
    """Run the summary's pending cells, storing each as it finishes. An interruption
    (Ctrl-C, SIGTERM) keeps every stored cell and marks the invocation interrupted."""
    out_dir = summary.out_dir
    invocation = start_invocation(out_dir, config, run.fingerprint, len(summary.cells), len(summary.pending))
    runnable = []
    stored = {row["key"] for row in store.rows() if "key" in row}
    for cell in summary.pending:
        if cell.task_id in summary.missing:  # not here at all: no row, named once per cause
            if cell.key in stored:  # a failed row of an earlier run (its reason only): missing now
                store.forget(cell.key)
            continue
        error = summary.task_errors.get(cell.task_id)
        if error is None:
            runnable.append(cell)
            continue
        store.write(cell.key, failed_row(cell, config.seed, error))
        summary.counts["failed"] += 1
    store.write_table()
    backend = backend or LocalBackend()
    costs = {cell: estimated_cost(cell, run.infos[cell.task_id]) for cell in runnable}
    if backend.workers() > 1:
        runnable.sort(key=lambda cell: -costs[cell])
    work = CellsWork(costs, backend.workers())  # the time left comes from it: this run's cells only
    running: dict[str, Cell] = {}  # submitted and not finished, in submission order
    try:
        with CellsProgress(*progress_columns(console), console=console, disable=not progress or not runnable) as bar:
            task = bar.add_task(f"evaluate {run.suite.name}", total=len(runnable), ok=0, skipped=0, failed=0,
                                workers=backend.workers(), running="", work=work)

            def started(cell: Cell) -> None:
                running[cell.key] = cell
                work.running(list(running.values()), backend.workers())
                bar.update(task, running=running_text(running, backend.workers()))
                if backend.workers() == 1:
                    bar.refresh()  # this process runs the cell now: show it before it starts

            for cell, outcome in _run(runnable, run.context, backend, started):
                running.pop(cell.key, None)
                store.write(cell.key, outcome.row, outcome.proba, outcome.arrays, outcome.traceback)
                summary.counts[outcome.row["status"]] += 1
                work.finish(cell, outcome.row["status"])
                work.running(list(running.values()), backend.workers())
                bar.update(task, advance=1, workers=backend.workers(), running=running_text(running, backend.workers()),
                           **{s: summary.counts[s] for s in ("ok", "skipped", "failed")})
                store.write_table_if_due()
    except BaseException:
        store.write_table()
        finish_invocation(out_dir, invocation, summary.counts, interrupted=True, missing=sorted(summary.missing))
        raise
    store.write_table()
    finish_invocation(out_dir, invocation, summary.counts, missing=sorted(summary.missing))


def _run(cells: list[Cell], context: CellContext, backend: CellBackend, started: Callable[[Cell], None]):
    """Yield (cell, outcome) as cells finish, submitting them in order and keeping
    ``backend.capacity()`` in flight (``started(cell)`` is called just before each submission).
    A cell whose worker died is resubmitted or becomes a failed row, as the backend says; the
    run goes on."""
    backend.begin(cells)
    queue = list(reversed(cells))
    in_flight: dict[futures.Future, Cell] = {}
    while queue or in_flight:
        while queue and len(in_flight) < backend.capacity():
            cell = queue.pop()
            started(cell)
            in_flight[backend.submit(cell, context)] = cell
        done, _ = futures.wait(in_flight, return_when=futures.FIRST_COMPLETED)
        lost = False
        for future, cell in [(future, in_flight.pop(future)) for future in done]:
            try:
                outcome = future.result()
            except Exception as error:  # noqa: BLE001 - run_cell never raises: the worker was lost
                reason = backend.on_lost(cell, error)
                if reason is None:
                    queue.append(cell)
                    continue
                outcome = CellOutcome(failed_row(cell, context.seed, reason))
                lost = True
            yield cell, outcome
        if lost and backend.recover():  # the other in-flight cells were lost with it: submit them again
            queue.extend(reversed(list(in_flight.values())))
            in_flight.clear()
