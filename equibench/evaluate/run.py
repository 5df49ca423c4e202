"""`equibench evaluate`: every method on every task and fold of a suite, resumable.

A *cell* is (task, fold, method, settings), stored under its settings' variant (see cells
and baselines.settings). Workers run cells and return a row and
the test probabilities; only this process writes the results store (see results_store). Cells
run through a backend (see backends): this process, local worker processes or a Dask cluster.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import numbers
import os
import shlex
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ..baselines.registry import METHODS, method_spec
from ..baselines.settings import MethodOptions, Settings
from ..errors import InvalidInputError, TaskUnavailableError
from ..outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from ..progress import Progress
from ..tasks.cache_check import cache_gap_messages
from ..tasks.openml import TaskNotCachedError, is_cached, working_cache
from ..tasks.suites import Suite, load_suite, load_task
from ..tasks.user_data import PREFIX as FILE_PREFIX
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
        object.__setattr__(self, "methods", _as_tuple(self.methods, "methods", str))
        object.__setattr__(self, "ensembles", _as_tuple(self.ensembles, "ensembles", numbers.Integral))
        object.__setattr__(self, "contexts", _as_tuple(self.contexts, "contexts", str))
        if self.folds is not None:
            object.__setattr__(self, "folds", _as_tuple(self.folds, "folds", numbers.Integral))
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


def _as_tuple(value, name: str, kind: type) -> tuple:
    """``value`` as a tuple of ``kind`` values: one value (``methods="knn"``, ``folds=0``) is a
    tuple of one; anything else than such values is refused, naming ``name``."""
    values = (value,) if isinstance(value, kind) else tuple(value) if isinstance(value, (list, tuple, range)) else None
    if values is None or not all(isinstance(item, kind) and not isinstance(item, bool) for item in values):
        what = "a method name" if kind is str else "an integer"
        raise InvalidInputError(f"{name} must be {what} or a list of them, got {value!r}")
    return tuple(int(item) for item in values) if kind is not str else values


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
            "tables": {spec.task_id: spec.sha256 for spec in suite.files},
            "suite": {"name": suite.name, "tasks": list(suite.task_ids)}}


@dataclass
class TaskInfo:
    n_folds: int
    n_rows: int = 0
    n_classes: int = 0
    error: str | None = None  # why a task the cache holds could not be loaded (damaged files): its cells fail
    missing: TaskNotCachedError | None = None  # why the task is not here at all: its cells are not run


def _task_infos(suite: Suite, openml_cache: str | None, source: str | None = None) -> dict[str, TaskInfo]:
    """Load every task once: checks availability and fills openml's cache before workers read it.

    A task the cache lacks and the server does not give is *missing*; once the server was
    found unreachable, the other uncached tasks are missing without asking it again. Messages
    name ``source`` (the cache the user gave) rather than ``openml_cache``, its working copy."""
    infos = {}
    unreachable: TaskNotCachedError | None = None
    for task_id in suite.task_ids:
        openml_task = not task_id.startswith(("demo-", FILE_PREFIX))
        try:
            if openml_task and unreachable is not None and not is_cached(task_id, openml_cache):
                raise TaskNotCachedError(task_id, unreachable.cache, unreachable.cause, unreachable=True)
            task = load_task(task_id, openml_cache, suite.files)
        except TaskNotCachedError as error:
            if source is not None:
                error.cache = source
            infos[task_id] = TaskInfo(n_folds=0, missing=error)
            unreachable = error if error.unreachable else unreachable
            continue
        except TaskUnavailableError as error:
            message = str(error) if openml_cache is None or source is None else str(error).replace(openml_cache, source)
            infos[task_id] = TaskInfo(n_folds=0, error=message)
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
        if info.error is None and info.missing is None and any(fold >= info.n_folds for fold in folds):
            raise InvalidInputError(f"task {task_id} has folds 0..{info.n_folds - 1}, not all of the folds asked for "
                                    f"({', '.join(map(str, folds))}); choose folds among them")
        for fold in folds:
            for name in config.methods:
                cells.extend(Cell(suite.name, task_id, fold, name, variant) for variant in variants[name])
    return cells


def estimated_cost(cell: Cell, info: TaskInfo) -> float:
    """Relative run time of a cell: the train rows its settings process (x ensemble members,
    up to a context cap) x n_classes x the method's measured cost per unit."""
    n_train = info.n_rows * max(1, info.n_folds - 2) / max(1, info.n_folds)
    return METHODS[cell.method].cost * cell.settings.work(n_train) * max(1, info.n_classes)


@dataclass(repr=False)
class EvaluateSummary:
    """What :func:`evaluate` (or :func:`evaluate_frame`) planned and did in ``out_dir``.

    Attributes:
        out_dir: the results folder (``results.csv``, ``cells/``, ``probas/``, ``manifest.json``).
        suite: the suite's name.
        cells: every cell of the run's selection (tasks x folds x methods x variants).
        pending: the cells that were not finished when the call began: those it ran (or, dry,
            would run), and those of missing tasks, which it could not.
        counts: status (``ok``, ``skipped``, ``failed``) -> cells written by this call.
        missing: task id -> why the task is not here at all (not in the OpenML cache, and
            the server could not give it): its cells were not run and no row was written.
        task_errors: task id -> why a task the cache holds could not be loaded (a damaged
            file, named): its cells were written as failed rows.
        damaged: cell key -> why its stored files were unusable (the cell was run again).
        rows: cell key -> the stored row of each cell of ``cells`` that has one, after the call.
        next_step: what brings the missing tasks (None when none is missing), as a command.

    :meth:`methods` gives per method the ok/skipped/failed counts and the mean accuracy,
    :meth:`table` the rows as a pandas frame; ``repr`` is a one-line summary."""

    out_dir: Path
    cells: list[Cell]
    pending: list[Cell]
    counts: Counter  # status -> cells written by this invocation
    task_errors: dict[str, str]  # task id -> why a task the cache holds could not be loaded (failed rows)
    damaged: dict[str, str] = dataclasses.field(default_factory=dict)  # cell key -> why its stored files are unusable
    missing: dict[str, str] = dataclasses.field(default_factory=dict)  # task id -> why it is not here (no rows)
    rows: dict[str, dict] = dataclasses.field(default_factory=dict)  # cell key -> stored row, after the call
    suite: str = ""
    next_step: str | None = None  # what brings the missing tasks, when some are
    missing_groups: list[str] = dataclasses.field(default_factory=list)  # one line per cause of missing tasks

    @property
    def missing_cells(self) -> list[Cell]:
        """The pending cells not run because their task is missing."""
        return [cell for cell in self.pending if cell.task_id in self.missing]

    def methods(self) -> dict[str, dict]:
        """Per method (``method variant`` where a method has several variants), in run order:
        ``ok``, ``skipped``, ``failed``, ``missing`` (cells of missing tasks without a row),
        ``pending`` (not run yet: a dry or interrupted call) and ``accuracy`` (mean over the
        ok cells, None without any)."""
        variants = Counter(method for method, _ in {(cell.method, cell.variant) for cell in self.cells})
        several = {method for method, count in variants.items() if count > 1}
        stats: dict[str, dict] = {}
        for cell in self.cells:
            name = f"{cell.method} {cell.variant}" if cell.method in several else cell.method
            entry = stats.setdefault(name, {"ok": 0, "skipped": 0, "failed": 0, "missing": 0, "pending": 0,
                                            "accuracy": []})
            row = self.rows.get(cell.key)
            status = row["status"] if row is not None and row["status"] in ("ok", "skipped") else (
                "missing" if cell.task_id in self.missing else row["status"] if row is not None else "pending")
            entry[status] += 1
            if status == "ok" and row.get("accuracy") is not None:
                entry["accuracy"].append(float(row["accuracy"]))
        for entry in stats.values():
            values = entry["accuracy"]
            entry["accuracy"] = sum(values) / len(values) if values else None
        return stats

    def skipped_reasons(self) -> list[tuple[list[str], int, str]]:
        """(methods, cells, reason) for each distinct reason of the skipped cells, most cells first."""
        return self.reasons("skipped")

    def reasons(self, status: str) -> list[tuple[list[str], int, str]]:
        """(methods, cells, reason) for each distinct reason of the stored cells of ``status``
        (``skipped`` or ``failed``), most cells first."""
        groups: dict[str, tuple[dict, list]] = {}
        for cell in self.cells:
            row = self.rows.get(cell.key)
            if row is not None and row["status"] == status:
                methods, cells = groups.setdefault(str(row.get("reason", "")), ({}, []))
                methods[cell.method] = None
                cells.append(cell)
        return sorted(((list(methods), len(cells), reason) for reason, (methods, cells) in groups.items()),
                      key=lambda group: -group[1])

    def table(self):
        """The stored rows of the run's cells as a pandas frame (the columns of results.csv)."""
        from .results_store import results_table

        return results_table(list(self.rows.values()))

    def __repr__(self) -> str:
        written = ", ".join(f"{status}={n}" for status, n in sorted(self.counts.items())) or "nothing"
        statuses = Counter(row["status"] for row in self.rows.values())
        stored = ", ".join(f"{status}={statuses[status]}" for status in ("ok", "skipped", "failed"))
        methods = list(dict.fromkeys(cell.method for cell in self.cells))
        missing = f", missing tasks={len(self.missing)}" if self.missing else ""
        return (f"<EvaluateSummary {self.suite or 'run'!s}: {len(self.cells)} cells ({stored}{missing}); "
                f"this call wrote {written}; methods {', '.join(methods)}; in {str(self.out_dir)!r}>")


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
    working = source = None
    if suite.needs_openml:
        source = config.resolved_openml_cache()
        if source is not None:
            working = str(working_cache(source, work_cache))
    context = CellContext(working, config.seed, config.threads_per_cell, file_tasks=suite.files)
    return _Run(suite, context, fingerprint, _task_infos(suite, working, source), settings)


def _missing_groups(config: EvaluateConfig, suite: Suite, infos: dict[str, TaskInfo],
                    pending_tasks: set[str]) -> tuple[list[str], str | None]:
    """One line per cause of the missing tasks that have cells to run, and the one next step
    that brings them (None when they are not missing for want of a cache or a network)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for task_id in suite.task_ids:
        missing = infos[task_id].missing
        if missing is not None and task_id in pending_tasks:
            groups.setdefault((missing.cache, missing.cause), []).append(task_id)
    if not groups:
        return [], None
    given = config.resolved_openml_cache()
    lines = []
    for (cache, cause), task_ids in groups.items():
        where = f"the OpenML cache {cache!r}" if given is not None else f"openml's own cache {cache!r} (no openml_cache given)"
        listed = "" if len(task_ids) == len(suite.task_ids) else ": " + ", ".join(task_ids[:10]) + (
            f" and {len(task_ids) - 10} more" if len(task_ids) > 10 else "")
        lines.append(f"{len(task_ids)} of {len(suite.task_ids)} {suite.name} tasks are not in {where} and {cause}"
                     f"{listed}")
    if not any(info.missing.unreachable for info in infos.values() if info.missing is not None):
        return lines, None
    suite_arg = shlex.quote(config.suite)
    holds_some = given is not None and any(info.missing is None for task_id, info in infos.items()
                                           if not task_id.startswith(("demo-", FILE_PREFIX)))
    if holds_some:
        step = (f"where a network is, fetch what the cache lacks with `equibench download --suite {suite_arg} --cache "
                f"{shlex.quote(given)}` (it keeps what is there), or point openml_cache at a cache that holds them; "
                "then rerun this command (finished cells are kept)")
    else:
        step = (f"point openml_cache at your OpenML cache folder (DIR), or fill one where a network is with "
                f"`equibench download --suite {suite_arg} --cache DIR`; then rerun this command with openml_cache DIR")
    return lines, step


def _warn_of_cache_gaps(config: EvaluateConfig, console: Console) -> None:
    """Name the OpenML tasks the given cache lacks (unless it holds none: then the run's end, or
    its refusal, says so once) and those it holds damaged files of, before any task loads or
    cell runs."""
    for message in cache_gap_messages(load_suite(config.suite), config.resolved_openml_cache(), when_some_held=True):
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
            summary = _summary(config, out_dir, store, _prepare(config, out_dir, store, False, Path(scratch) / "openml-cache"))
            summary.rows = _stored_rows(store, summary.cells)
            return summary
    created = not out_dir.exists()
    with locked_folder(out_dir) as lock:
        try:
            store = ResultsStore(out_dir)
            store.remove_stray_temporaries()
            run = _prepare(config, out_dir, store, rerun_changed, out_dir / "openml-cache")
            summary = _summary(config, out_dir, store, run)
            _check_something_loads(summary)
        except BaseException:
            if created:  # rejected before any work: leave no folder behind
                _empty_rejected(out_dir)
                lock.remove_folder = True
            raise
        try:
            _run_cells(config, store, run, summary, backend, progress, console)
        finally:
            summary.rows = _stored_rows(store, summary.cells)
        return summary


def _stored_rows(store: ResultsStore, cells: list[Cell]) -> dict[str, dict]:
    rows = {row["key"]: row for row in store.rows() if "key" in row}
    return {cell.key: rows[cell.key] for cell in cells if cell.key in rows}


def _check_something_loads(summary: EvaluateSummary) -> None:
    """An InvalidInputError when cells are to run but every one of them belongs to a missing
    task: nothing could be done, the command must point at the data."""
    if summary.pending and len(summary.missing_cells) == len(summary.pending):
        raise InvalidInputError(
            "nothing can run: " + "; ".join(summary.missing_groups)
            + (f". Next: {summary.next_step}" if summary.next_step else "")
        )


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
    pending_tasks = {cell.task_id for cell in pending}
    missing = {task_id: str(info.missing) for task_id, info in run.infos.items()
               if info.missing is not None and task_id in pending_tasks}
    groups, next_step = _missing_groups(config, run.suite, run.infos, pending_tasks)
    return EvaluateSummary(out_dir, cells, pending, Counter(), task_errors, damaged, missing=missing,
                           suite=run.suite.name, next_step=next_step, missing_groups=groups)


class CellsRemainingColumn(TimeRemainingColumn):
    """rich's time-remaining column, estimated from the mean time per finished cell since the
    run began: rich's own estimate uses the progress of the last 30 s only, so cells slower
    than that would never give one. Shown from the first finished cell on."""

    def render(self, task) -> Text:
        if task.finished or not task.completed or task.total is None or task.elapsed is None:
            return super().render(task)
        seconds = int(task.elapsed / task.completed * (task.total - task.completed))
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"{hours:d}:{minutes:02d}:{seconds:02d}", style="progress.remaining")


def _progress_columns(console: Console) -> tuple:
    """The bar fills a terminal's width (40 characters when piped)."""
    return (
        TextColumn("[bold]{task.description}"), BarColumn(bar_width=None if console.is_terminal else 40),
        MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]} skipped {task.fields[skipped]} [red]failed {task.fields[failed]}[/red]"),
        TimeElapsedColumn(), TextColumn("ETA"), CellsRemainingColumn(),
    )


class CellsProgress(Progress):
    """The run's bar, and below it the cell running now (``running`` field of the task)."""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            if task.fields.get("running"):
                yield Text.from_markup(task.fields["running"], style="dim")


def _cell_name(cell: Cell) -> str:
    variant = "" if cell.variant == "default" else f" {cell.variant}"
    return f"{cell.task_id} {cell.method}{variant} fold {cell.fold}"


def _running_text(running: dict[str, Cell], workers: int) -> str:
    """The cell in flight longest (with one worker: the one running now), how many others are,
    and on how many workers."""
    if not running:
        return ""
    first = next(iter(running.values()))
    more = f" (+{len(running) - 1} more in flight)" if len(running) > 1 else ""
    return f"running {escape(_cell_name(first))}{more} on {workers} worker{'s' if workers > 1 else ''}"


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
    if backend.workers() > 1:
        runnable.sort(key=lambda cell: -estimated_cost(cell, run.infos[cell.task_id]))
    running: dict[str, Cell] = {}  # in flight, in submission order
    try:
        with CellsProgress(*_progress_columns(console), console=console, disable=not progress or not runnable) as bar:
            task = bar.add_task(f"evaluate {run.suite.name}", total=len(runnable), ok=0, skipped=0, failed=0,
                                workers=backend.workers(), running="")

            def started(cell: Cell) -> None:
                running[cell.key] = cell
                bar.update(task, running=_running_text(running, backend.workers()))
                if backend.workers() == 1:
                    bar.refresh()  # this process runs the cell now: show it before it starts

            for cell, outcome in _run(runnable, run.context, backend, started):
                running.pop(cell.key, None)
                store.write(cell.key, outcome.row, outcome.proba, outcome.arrays, outcome.traceback)
                summary.counts[outcome.row["status"]] += 1
                bar.update(task, advance=1, workers=backend.workers(), running=_running_text(running, backend.workers()),
                           **{s: summary.counts[s] for s in ("ok", "skipped", "failed")})
                store.write_table_if_due()
    except BaseException:
        store.write_table()
        finish_invocation(out_dir, invocation, summary.counts, interrupted=True, missing=sorted(summary.missing))
        raise
    store.write_table()
    finish_invocation(out_dir, invocation, summary.counts, missing=sorted(summary.missing))


def _run(cells: list[Cell], context: CellContext, backend: CellBackend,
         started: Callable[[Cell], None] | None = None):
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
            if started is not None:
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
