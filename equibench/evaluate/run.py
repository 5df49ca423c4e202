"""`equibench evaluate`: resume a suite's run and run its pending cells (the package's docstring
names the modules it uses). Workers run cells and return a row and the test probabilities; only
this process writes the results store. A *cell* is (task, fold, method, settings), stored under
its settings' variant (see baselines.settings).
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
from rich.markup import escape

from ..errors import InvalidInputError
from ..outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from ..progress import plain_every_s
from ..tasks.cache_check import cache_gap_messages
from ..tasks.openml import working_cache
from ..tasks.suites import Suite, load_suite
from ..tasks.user_data import frame_suite
from .backends import CellBackend, LocalBackend
from .cells import Cell, CellContext, CellOutcome, failed_row
from .config import EvaluateConfig, prepared_settings, run_fingerprint
from .plan import TaskInfo, estimated_cost, missing_groups, plan_cells, task_infos
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
from .summary import EvaluateSummary, stored_rows


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
    # the OpenML tasks the given cache lacks or holds damaged files of, named before any task loads or cell runs
    for message in cache_gap_messages(suite, config.resolved_openml_cache()):
        console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="equibench-dry-run-") as scratch:
            _, summary = _prepare(config, suite, out_dir, ResultsStore(out_dir), False, Path(scratch) / "openml-cache")
            return summary
    created = not out_dir.exists()
    with locked_folder(out_dir) as lock:
        try:
            store = ResultsStore(out_dir)
            store.remove_stray_temporaries()
            run, summary = _prepare(config, suite, out_dir, store, rerun_changed, out_dir / "openml-cache")
            if summary.pending and len(summary.missing_cells) == len(summary.pending):  # their tasks are all missing
                raise InvalidInputError("nothing can run: " + "; ".join(summary.missing_groups)
                                        + (f". Next: {summary.next_step}" if summary.next_step else ""))
        except BaseException:
            if created:  # rejected before any work: leave no folder behind (it holds only what this run copied)
                for child in out_dir.iterdir():
                    if child.name not in (LOCK_FILE, HOLDER_FILE):
                        shutil.rmtree(child) if child.is_dir() else child.unlink()
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
    """What a run's cells are run with (see :func:`_prepare`)."""

    context: CellContext
    fingerprint: dict
    infos: dict[str, TaskInfo]


def _prepare(config: EvaluateConfig, suite: Suite, out_dir: Path, store: ResultsStore, rerun_changed: bool,
             work_cache: Path) -> tuple[_Run, EvaluateSummary]:
    """Resolve the settings, check them against the stored cells (replacing those of changed
    methods when ``rerun_changed``), load every task of ``suite`` once, and plan the run before
    any cell runs: its cells, those pending, and its missing and damaged tasks and cells."""
    settings = prepared_settings(config)
    fingerprint = run_fingerprint(config, settings, suite)
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        saved = read_manifest(manifest_path)["settings"]
        stored = {row["method"] for row in store.rows()}
        for name in methods_to_rerun(out_dir, saved, fingerprint, stored, config.methods, rerun_changed):
            store.forget_method(name)
        fingerprint = recorded_settings(saved, fingerprint, stored - set(config.methods))
    source = config.resolved_openml_cache() if suite.needs_openml else None
    working = None if source is None else str(working_cache(source, work_cache))
    context = CellContext(working, config.seed, config.threads_per_cell, file_tasks=suite.files)
    infos = task_infos(suite, working, source)
    cells = plan_cells(config, suite, infos, settings)
    finished = store.finished_keys()
    pending = [cell for cell in cells if cell.key not in finished]
    task_errors = {task_id: info.error for task_id, info in infos.items() if info.error}
    damaged = {key: reason for key, reason in store.damaged.items() if key in {cell.key for cell in cells}}
    pending_tasks = {cell.task_id for cell in pending}
    missing = {task_id: str(info.missing) for task_id, info in infos.items()
               if info.missing is not None and task_id in pending_tasks}
    groups, next_step = missing_groups(config, suite, infos, pending_tasks)
    summary = EvaluateSummary(out_dir, cells, pending, Counter(), task_errors, damaged, missing=missing,
                              rows=stored_rows(store, cells), suite=suite.name, next_step=next_step,
                              missing_groups=groups)
    return _Run(context, fingerprint, infos), summary


def _run_cells(config: EvaluateConfig, store: ResultsStore, run: _Run, summary: EvaluateSummary,
               backend: CellBackend | None, progress: bool, console: Console) -> None:
    """Run the summary's pending cells, storing each as it finishes. An interruption
    (Ctrl-C, SIGTERM) keeps every stored cell and marks the invocation interrupted."""
    out_dir = summary.out_dir
    invocation = start_invocation(out_dir, config, run.fingerprint, len(summary.cells), len(summary.pending))
    runnable = []
    for cell in summary.pending:
        if cell.task_id in summary.missing:  # not here at all: no row, named once per cause
            if cell.key in summary.rows:  # a failed row of an earlier run (its reason only): missing now
                store.forget(cell.key)
        elif cell.task_id in summary.task_errors:
            store.write(cell.key, failed_row(cell, config.seed, summary.task_errors[cell.task_id]))
            summary.counts["failed"] += 1
        else:
            runnable.append(cell)
    store.write_table()
    backend = backend or LocalBackend()
    costs = {cell: estimated_cost(cell, run.infos[cell.task_id]) for cell in runnable}
    if backend.workers() > 1:
        runnable.sort(key=lambda cell: -costs[cell])
    work = CellsWork(costs, backend.workers())  # the time left comes from it: this run's cells only
    running: dict[str, Cell] = {}  # submitted and not finished, in submission order
    interrupted = True  # until every cell is done: Ctrl-C, SIGTERM or a failure
    try:
        with CellsProgress(*progress_columns(console), console=console, disable=not progress or not runnable) as bar:
            task = bar.add_task(f"evaluate {summary.suite}", total=len(runnable), ok=0, skipped=0, failed=0,
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
        interrupted = False
    finally:
        store.write_table()
        finish_invocation(out_dir, invocation, summary.counts, interrupted, missing=sorted(summary.missing))


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
