"""`equibench evaluate`: every method on every task and fold of a suite, resumable.

A *cell* is (task, fold, method, settings), stored under its settings' variant (see cells
and baselines.settings). Workers run cells and return a row and
the test probabilities; only this process writes the results store (see results_store). Cells
run through a backend (see backends): this process, local worker processes or a Dask cluster.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..baselines.registry import METHODS, method_spec
from ..baselines.settings import MethodOptions, Settings
from ..errors import InvalidInputError, TaskUnavailableError
from ..outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from ..tasks.cache_check import missing_tasks_message
from ..tasks.openml import working_cache
from ..tasks.suites import Suite, load_suite, load_task
from ..tasks.user_data import frame_suite
from .backends import CellBackend, LocalBackend
from .cells import Cell, CellContext, CellOutcome, failed_row
from .results_store import ResultsStore
from .run_manifest import (
    MANIFEST,
    finish_invocation,
    methods_to_rerun,
    read_manifest,
    recorded_settings,
    start_invocation,
)


@dataclass(frozen=True)
class EvaluateConfig(MethodOptions):
    """A run: the suite, methods, folds, seed and threads; the methods' options (ensemble
    sizes, checkpoints, weights, context cap, device) are :class:`MethodOptions` fields."""

    suite: str  # built-in name or suite file
    methods: tuple[str, ...] = tuple(METHODS)
    folds: tuple[int, ...] | None = None  # None: every fold of each task
    seed: int = 0
    openml_cache: str | None = None  # falls back to OPENML_CACHE_DIR
    threads_per_cell: int = 1  # torch and BLAS threads of every cell, whatever the backend

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.methods:
            raise InvalidInputError("no methods selected; choose from " + ", ".join(METHODS))
        for name in self.methods:
            method_spec(name)
        if len(set(self.methods)) != len(self.methods):
            raise InvalidInputError(f"methods listed more than once: {sorted(m for m in set(self.methods) if self.methods.count(m) > 1)}")
        if self.folds is not None and (not self.folds or min(self.folds) < 0):
            raise InvalidInputError(f"folds must be non-negative fold numbers, got {list(self.folds)}")
        if self.threads_per_cell < 1:
            raise InvalidInputError(f"threads_per_cell must be at least 1, got {self.threads_per_cell}")

    def resolved_openml_cache(self) -> str | None:
        return self.openml_cache or os.environ.get("OPENML_CACHE_DIR") or None


def prepared_settings(options: MethodOptions) -> dict[str, Settings]:
    """Every registered method's settings for a run, resolved and checked once (see
    ``Method.prepare``): the manifest records them all, so that a later run adding a method
    finds what its cells would be made with."""
    return {name: spec.implementation().prepare(spec.settings.from_options(options)) for name, spec in METHODS.items()}


def _fingerprint(config: EvaluateConfig, settings: dict[str, Settings], suite: Suite) -> dict:
    """What makes a cell's numbers: the seed, per method the settings the run's options set
    (see ``Settings.fingerprint``) and the threads per cell (the order of floating-point
    reductions), and the content of the suite's table files."""
    threads = {"threads_per_cell": config.threads_per_cell}
    return {"seed": config.seed,
            "methods": {name: {**method.fingerprint(), **threads} for name, method in settings.items()},
            "tables": {spec.task_id: spec.sha256 for spec in suite.files}}


@dataclass
class TaskInfo:
    n_folds: int
    n_rows: int = 0
    n_classes: int = 0
    error: str | None = None  # why the task could not be loaded


def _task_infos(suite: Suite, openml_cache: str | None) -> dict[str, TaskInfo]:
    """Load every task once: checks availability and fills openml's cache before workers read it."""
    infos = {}
    for task_id in suite.task_ids:
        try:
            task = load_task(task_id, openml_cache, suite.files)
        except TaskUnavailableError as error:
            infos[task_id] = TaskInfo(n_folds=0, error=str(error))
            continue
        infos[task_id] = TaskInfo(n_folds=task.n_folds, n_rows=len(task.y), n_classes=len(task.classes))
    return infos


def plan_cells(config: EvaluateConfig, suite: Suite, infos: dict[str, TaskInfo],
               settings: dict[str, Settings]) -> list[Cell]:
    """Every cell of the run, task by task (so workers reuse a task's preprocessed folds), one
    per variant of each method's prepared ``settings``."""
    variants = {name: settings[name].variants(config.ensembles) for name in config.methods}
    cells = []
    for task_id in suite.task_ids:
        info = infos[task_id]
        folds = config.folds if config.folds is not None else range(info.n_folds or 10)
        if info.error is None and any(fold >= info.n_folds for fold in folds):
            raise InvalidInputError(f"task {task_id} has folds 0..{info.n_folds - 1}; folds asks for {list(folds)}")
        for fold in folds:
            for name in config.methods:
                cells.extend(Cell(suite.name, task_id, fold, name, variant) for variant in variants[name])
    return cells


def estimated_cost(cell: Cell, info: TaskInfo) -> float:
    """Relative run time of a cell: the train rows its settings process (x ensemble members,
    up to a context cap) x n_classes x the method's measured cost per unit."""
    n_train = info.n_rows * max(1, info.n_folds - 2) / max(1, info.n_folds)
    return METHODS[cell.method].cost * cell.settings.work(n_train) * max(1, info.n_classes)


@dataclass
class EvaluateSummary:
    out_dir: Path
    cells: list[Cell]
    pending: list[Cell]
    counts: Counter  # status -> cells written by this invocation
    task_errors: dict[str, str]  # task id -> why it could not be loaded
    damaged: dict[str, str] = dataclasses.field(default_factory=dict)  # cell key -> why its stored files are unusable


@dataclass
class _Run:
    """What a run was prepared with (see :func:`_prepare`)."""

    suite: Suite
    context: CellContext
    fingerprint: dict
    infos: dict[str, TaskInfo]
    settings: dict[str, Settings]  # method -> prepared settings


def _prepare(config: EvaluateConfig, out_dir: Path, store: ResultsStore, rerun_changed: bool, work_cache: Path) -> _Run:
    """Resolve the settings, check them against the stored cells (replacing those of changed
    methods when ``rerun_changed``) and load every task once."""
    suite = load_suite(config.suite)
    settings = prepared_settings(config)
    fingerprint = _fingerprint(config, settings, suite)
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        saved = read_manifest(manifest_path)["settings"]
        stored = {row["method"] for row in store.rows()}
        for name in methods_to_rerun(out_dir, saved, fingerprint, stored, config.methods, rerun_changed):
            store.forget_method(name)
        fingerprint = recorded_settings(saved, fingerprint, stored - set(config.methods))
    working = None
    if suite.needs_openml:
        source = config.resolved_openml_cache()
        if source is not None:
            working = str(working_cache(source, work_cache))
    context = CellContext(working, config.seed, config.threads_per_cell, file_tasks=suite.files)
    return _Run(suite, context, fingerprint, _task_infos(suite, working), settings)


def _warn_of_cache_gaps(config: EvaluateConfig, console: Console) -> None:
    """Name the OpenML tasks the given cache lacks before any task loads or cell runs."""
    message = missing_tasks_message(load_suite(config.suite), config.resolved_openml_cache())
    if message:
        console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)


def check_out_dir(out_dir: Path) -> None:
    """An InvalidInputError when ``out_dir`` exists but is not a folder."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInputError(f"out_dir {str(out_dir)!r} is an existing file, not a folder; pass a folder path")


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
    check_out_dir(out_dir)
    console = console or Console(stderr=True)
    _warn_of_cache_gaps(config, console)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="equibench-dry-run-") as scratch:
            store = ResultsStore(out_dir)
            return _summary(config, out_dir, store, _prepare(config, out_dir, store, False, Path(scratch) / "openml-cache"))
    created = not out_dir.exists()
    with locked_folder(out_dir) as lock:
        try:
            store = ResultsStore(out_dir)
            store.remove_stray_temporaries()
            run = _prepare(config, out_dir, store, rerun_changed, out_dir / "openml-cache")
            summary = _summary(config, out_dir, store, run)
        except BaseException:
            if created:  # rejected before any work: leave no folder behind
                _empty_rejected(out_dir)
                lock.remove_folder = True
            raise
        _run_cells(config, store, run, summary, backend, progress, console)
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
    ``seed``, ``device``, ...).
    """
    suite = frame_suite(frame, target, Path(out), name, fold_column)
    return evaluate(EvaluateConfig(suite=str(suite), **options), out, backend=backend, progress=progress)


def _empty_rejected(out_dir: Path) -> None:
    """Empty the folder a rejected run created: it holds only what that run copied."""
    for child in out_dir.iterdir():
        if child.name not in (LOCK_FILE, HOLDER_FILE):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _summary(config: EvaluateConfig, out_dir: Path, store: ResultsStore, run: _Run) -> EvaluateSummary:
    cells = plan_cells(config, run.suite, run.infos, run.settings)
    finished = store.finished_keys()
    pending = [cell for cell in cells if cell.key not in finished]
    task_errors = {task_id: info.error for task_id, info in run.infos.items() if info.error}
    damaged = {key: reason for key, reason in store.damaged.items() if key in {cell.key for cell in cells}}
    return EvaluateSummary(out_dir, cells, pending, Counter(), task_errors, damaged)


def _progress_columns() -> tuple:
    return (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]}  skipped {task.fields[skipped]}  [red]failed {task.fields[failed]}[/red]"
                   "  workers {task.fields[workers]}"),
        TimeElapsedColumn(), TimeRemainingColumn(),
    )


def _run_cells(config: EvaluateConfig, store: ResultsStore, run: _Run, summary: EvaluateSummary,
               backend: CellBackend | None, progress: bool, console: Console) -> None:
    """Run the summary's pending cells, storing each as it finishes. An interruption
    (Ctrl-C, SIGTERM) keeps every stored cell and marks the invocation interrupted."""
    out_dir = summary.out_dir
    invocation = start_invocation(out_dir, config, run.fingerprint, len(summary.cells), len(summary.pending))
    runnable = []
    for cell in summary.pending:
        error = summary.task_errors.get(cell.task_id)
        if error is None:
            runnable.append(cell)
            continue
        store.write(cell.key, failed_row(cell, config.seed, error))
        summary.counts["failed"] += 1
    store.write_table()
    backend = backend or LocalBackend()
    if backend.workers() > 1:
        runnable.sort(key=lambda cell: -estimated_cost(cell, run.infos[cell.task_id]))
    try:
        with Progress(*_progress_columns(), console=console, disable=not progress) as bar:
            task = bar.add_task(f"evaluate {run.suite.name}", total=len(runnable), ok=0, skipped=0, failed=0,
                                workers=backend.workers())
            for cell, outcome in _run(runnable, run.context, backend):
                store.write(cell.key, outcome.row, outcome.proba, outcome.arrays, outcome.traceback)
                summary.counts[outcome.row["status"]] += 1
                bar.update(task, advance=1, workers=backend.workers(),
                           **{s: summary.counts[s] for s in ("ok", "skipped", "failed")})
                store.write_table_if_due()
    except BaseException:
        store.write_table()
        finish_invocation(out_dir, invocation, summary.counts, interrupted=True)
        raise
    store.write_table()
    finish_invocation(out_dir, invocation, summary.counts)


def _run(cells: list[Cell], context: CellContext, backend: CellBackend):
    """Yield (cell, outcome) as cells finish, submitting them in order and keeping
    ``backend.capacity()`` in flight. A cell whose worker died is resubmitted or becomes a failed
    row, as the backend says; the run goes on."""
    backend.begin(cells)
    queue = list(reversed(cells))
    in_flight: dict[futures.Future, Cell] = {}
    while queue or in_flight:
        while queue and len(in_flight) < backend.capacity():
            cell = queue.pop()
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
