"""`equibench evaluate`: every method on every task and fold of a suite, resumable.

A *cell* is (task, fold, method, variant) (see cells). Workers run cells and return a row and
the test probabilities; only this process writes the results store (see results_store). Cells
run through a backend (see backends): this process, local worker processes or a Dask cluster.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .atomic_files import atomic_write_text
from .backends import CellBackend, LocalBackend
from .baselines.registry import METHODS, method_spec
from .cells import Cell, CellContext, CellOutcome, failed_row
from .machine import cpu_name
from .model import default_checkpoint, read_card
from .outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from .results_store import ResultsStore
from .suites import Suite, load_suite, load_task

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class EvaluateConfig:
    suite: str  # built-in name or suite file
    methods: tuple[str, ...] = tuple(METHODS)
    folds: tuple[int, ...] | None = None  # None: every fold of each task
    ensembles: tuple[int, ...] = (1,)  # ensemble sizes of the PFN methods (variants n1, n4, ...)
    seed: int = 0
    openml_cache: str | None = None  # falls back to OPENML_CACHE_DIR
    tabpfn_weights: str | None = None  # falls back to EQUIBENCH_TABPFN_WEIGHTS
    equitabpfn_checkpoint: str = "default"
    tabpfn_star_checkpoint: str = "default"
    max_train_rows: int = 3000  # PFN context cap (class-balanced subsample)
    device: str = "cpu"
    threads_per_cell: int = 1  # torch and BLAS threads of every cell, whatever the backend

    def __post_init__(self) -> None:
        if not self.methods:
            raise ValueError("no methods selected; choose from " + ", ".join(METHODS))
        for name in self.methods:
            method_spec(name)
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods listed more than once: {sorted(m for m in set(self.methods) if self.methods.count(m) > 1)}")
        if self.folds is not None and (not self.folds or min(self.folds) < 0):
            raise ValueError(f"folds must be non-negative fold numbers, got {list(self.folds)}")
        if not self.ensembles or min(self.ensembles) < 1:
            raise ValueError(f"ensemble sizes must be positive integers, got {list(self.ensembles)}")
        if self.max_train_rows < 1:
            raise ValueError(f"max_train_rows must be positive, got {self.max_train_rows}")
        if self.threads_per_cell < 1:
            raise ValueError(f"--threads-per-cell must be at least 1, got {self.threads_per_cell}")

    def resolved_openml_cache(self) -> str | None:
        return self.openml_cache or os.environ.get("OPENML_CACHE_DIR") or None

    def resolved_tabpfn_weights(self) -> str | None:
        return self.tabpfn_weights or os.environ.get("EQUIBENCH_TABPFN_WEIGHTS") or None


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _method_settings(config: EvaluateConfig) -> dict:
    checkpoints = {"equitabpfn": config.equitabpfn_checkpoint, "tabpfn-star": config.tabpfn_star_checkpoint}
    settings = {}
    for name in ("equitabpfn", "tabpfn-star"):
        chosen = checkpoints[name]
        path = default_checkpoint(name) if chosen == "default" else Path(chosen)
        settings[name] = {"checkpoint": str(path), "max_train_rows": config.max_train_rows, "device": config.device}
    for name in ("tabpfn-v1", "tabpfn-v2"):
        settings[name] = {"tabpfn_weights": config.resolved_tabpfn_weights(), "device": config.device}
    return settings


def _fingerprint(config: EvaluateConfig, method_settings: dict) -> dict:
    """What makes a cell's numbers: the seed, the threads per cell (the order of floating-point
    reductions), and per method the settings that change them (the PFN checkpoints' content,
    the context cap, the TabPFN weights)."""
    methods = {name: {} for name in METHODS}
    for name in ("equitabpfn", "tabpfn-star"):
        path = Path(method_settings[name]["checkpoint"])
        option = f"--{name}-checkpoint"
        if not {"equitabpfn": config.equitabpfn_checkpoint, "tabpfn-star": config.tabpfn_star_checkpoint}[name].strip():
            raise ValueError(f"{option} is empty; pass `default` or a checkpoint file written by `equibench pretrain`")
        if path.is_dir():
            raise ValueError(f"{option} {str(path)!r} is a folder; pass the checkpoint file inside it (a pretraining "
                             "output folder holds model.pt)")
        if not path.is_file():
            raise ValueError(f"{name} checkpoint {str(path)!r} does not exist; pass a file written by `equibench pretrain`")
        if read_card(path).arch != name:
            raise ValueError(f"checkpoint {str(path)!r} holds a {read_card(path).arch} model, not {name}; pass a {name} checkpoint")
        methods[name] = {"checkpoint_sha256": _file_digest(path), "max_train_rows": config.max_train_rows}
    for name in ("tabpfn-v1", "tabpfn-v2"):
        methods[name] = {"tabpfn_weights": config.resolved_tabpfn_weights()}
    return {"seed": config.seed, "threads_per_cell": config.threads_per_cell, "methods": methods}


def _stale_methods(saved: dict, current: dict, stored_methods: set[str]) -> list[str]:
    """Methods with stored cells whose settings changed since they were made."""
    return sorted(
        name for name in stored_methods if saved["methods"].get(name, {}) != current["methods"].get(name, {})
    )


def _versions() -> dict:
    versions = {"python": platform.python_version()}
    for package in ("equibench", "torch", "numpy", "pandas", "scikit-learn", "openml", "xgboost-cpu", "xgboost",
                    "rtdl-revisiting-models", "pytorch-tabnet", "tabpfn"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _git_sha() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


@dataclass
class TaskInfo:
    n_folds: int
    n_rows: int = 0
    n_classes: int = 0
    error: str | None = None  # why the task could not be loaded


def _task_infos(suite: Suite, openml_cache: str | None) -> dict[str, TaskInfo]:
    """Load every task once: checks availability and fills openml's cache before workers read it."""
    from .openml_data import TaskUnavailableError

    infos = {}
    for task_id in suite.task_ids:
        try:
            task = load_task(task_id, openml_cache, suite.files)
        except TaskUnavailableError as error:
            infos[task_id] = TaskInfo(n_folds=0, error=str(error))
            continue
        infos[task_id] = TaskInfo(n_folds=task.n_folds, n_rows=len(task.y), n_classes=len(task.classes))
    return infos


def plan_cells(config: EvaluateConfig, suite: Suite, infos: dict[str, TaskInfo]) -> list[Cell]:
    """Every cell of the run, task by task (so workers reuse a task's preprocessed folds)."""
    cells = []
    for task_id in suite.task_ids:
        info = infos[task_id]
        folds = config.folds if config.folds is not None else range(info.n_folds or 10)
        if info.error is None and any(fold >= info.n_folds for fold in folds):
            raise ValueError(f"task {task_id} has folds 0..{info.n_folds - 1}; --folds asks for {list(folds)}")
        for fold in folds:
            for name in config.methods:
                for variant in METHODS[name].variants(list(config.ensembles)):
                    cells.append(Cell(suite.name, task_id, fold, name, variant))
    return cells


def estimated_cost(cell: Cell, info: TaskInfo, max_train_rows: int) -> float:
    """Relative run time of a cell: n_train x n_classes x the method's measured cost per unit."""
    spec = METHODS[cell.method]
    n_train = info.n_rows * max(1, info.n_folds - 2) / max(1, info.n_folds)
    members = 1
    if spec.ensembles:
        n_train = min(n_train, max_train_rows)
        members = int(cell.variant.removeprefix("n"))
    return spec.cost * n_train * max(1, info.n_classes) * members


@dataclass
class EvaluateSummary:
    out_dir: Path
    cells: list[Cell]
    pending: list[Cell]
    counts: Counter  # status -> cells written by this invocation
    task_errors: dict[str, str]  # task id -> why it could not be loaded
    damaged: dict[str, str] = dataclasses.field(default_factory=dict)  # cell key -> why its stored files are unusable


def _prepare(config: EvaluateConfig, out_dir: Path, store: ResultsStore, rerun_changed: bool, work_cache: Path):
    suite = load_suite(config.suite)
    method_settings = _method_settings(config)
    fingerprint = _fingerprint(config, method_settings)
    fingerprint["tables"] = {spec.task_id: spec.sha256 for spec in suite.files}
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        saved = read_manifest(manifest_path)["settings"]
        changed = sorted(k for k, v in saved.get("tables", {}).items() if fingerprint["tables"].get(k, v) != v)
        if changed:
            raise ValueError(
                f"{str(out_dir)!r} holds results of {', '.join(changed)} made from table files whose content has "
                "changed since; pass a new --out directory (or restore the files) to keep results consistent"
            )
        if saved["seed"] != fingerprint["seed"]:
            raise ValueError(
                f"{str(out_dir)!r} holds results made with --seed {saved['seed']}; rerun with it to resume, "
                "or pass a new --out directory"
            )
        stored = {row["method"] for row in store.rows()}
        stale = _stale_methods(saved, fingerprint, stored)
        if stored and saved.get("threads_per_cell") != fingerprint["threads_per_cell"]:
            if not rerun_changed:
                raise ValueError(_threads_refusal(out_dir, saved.get("threads_per_cell"), config.threads_per_cell))
            stale = sorted(stored)  # every stored cell's numbers depend on its threads
        if stale and not rerun_changed:
            raise ValueError(
                f"{str(out_dir)!r} holds results of {', '.join(stale)} made with different settings (another "
                "checkpoint, context cap or weights); pass --rerun-changed to replace them, the original options "
                "to resume, or a new --out directory"
            )
        for name in stale:
            store.forget_method(name)
    working = None
    if suite.needs_openml:
        source = config.resolved_openml_cache()
        if source is not None:
            from .openml_data import working_cache

            working = str(working_cache(source, work_cache))
    infos = _task_infos(suite, working)
    return suite, CellContext(working, config.seed, method_settings, config.threads_per_cell, file_tasks=suite.files), fingerprint, infos


def _threads_refusal(out_dir: Path, before: int | None, now: int) -> str:
    """Why a run whose stored cells ran on ``before`` threads (None: not recorded) cannot resume on ``now``."""
    if before is None:
        return (f"{str(out_dir)!r} holds results made before threads per cell were recorded; pass --rerun-changed "
                f"to rerun them all with --threads-per-cell {now}, or a new --out directory")
    return (f"{str(out_dir)!r} holds results made with --threads-per-cell {before} (threads change the numbers); "
            f"rerun with it to resume, pass --rerun-changed to rerun them all with --threads-per-cell {now}, "
            "or a new --out directory")


def _warn_of_cache_gaps(config: EvaluateConfig, console: Console) -> None:
    """Name the OpenML tasks the given cache lacks before any task loads or cell runs."""
    from .cache_check import missing_tasks_message

    message = missing_tasks_message(load_suite(config.suite), config.resolved_openml_cache())
    if message:
        console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)


def check_out_dir(out_dir: Path) -> None:
    """A ValueError when ``out_dir`` exists but is not a folder."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {str(out_dir)!r} is an existing file, not a folder; pass a folder path")


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
    ``rerun_changed``, those of methods whose settings changed are replaced, all of them when
    the threads per cell changed). Cells run on ``backend`` (default: one at a time in this
    process), each on ``config.threads_per_cell`` threads; with several workers, the longest
    (by :func:`estimated_cost`) go first so the tail of the run is short.

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
            suite, _, _, infos = _prepare(config, out_dir, store, False, Path(scratch) / "openml-cache")
            return _summary(config, out_dir, store, suite, infos)
    created = not out_dir.exists()
    with locked_folder(out_dir) as lock:
        try:
            store = ResultsStore(out_dir)
            store.remove_stray_temporaries()
            suite, context, fingerprint, infos = _prepare(config, out_dir, store, rerun_changed,
                                                          out_dir / "openml-cache")
            summary = _summary(config, out_dir, store, suite, infos)
        except BaseException:
            if created:  # rejected before any work: leave no folder behind
                _empty_rejected(out_dir)
                lock.remove_folder = True
            raise
        _run_cells(config, store, suite, context, fingerprint, infos, summary, backend, progress, console)
        return summary


def _empty_rejected(out_dir: Path) -> None:
    """Empty the folder a rejected run created: it holds only what that run copied."""
    for child in out_dir.iterdir():
        if child.name not in (LOCK_FILE, HOLDER_FILE):
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _summary(config: EvaluateConfig, out_dir: Path, store: ResultsStore, suite: Suite, infos: dict) -> EvaluateSummary:
    cells = plan_cells(config, suite, infos)
    finished = store.finished_keys()
    pending = [cell for cell in cells if cell.key not in finished]
    task_errors = {task_id: info.error for task_id, info in infos.items() if info.error}
    damaged = {key: reason for key, reason in store.damaged.items() if key in {cell.key for cell in cells}}
    return EvaluateSummary(out_dir, cells, pending, Counter(), task_errors, damaged)


def _run_cells(config, store, suite, context, fingerprint, infos, summary, backend, progress, console) -> None:
    """Run the summary's pending cells, storing each as it finishes. An interruption
    (Ctrl-C, SIGTERM) keeps every stored cell and marks the invocation interrupted."""
    out_dir = summary.out_dir
    invocation = _start_manifest(out_dir, config, fingerprint, len(summary.cells), len(summary.pending))
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
        runnable.sort(key=lambda cell: -estimated_cost(cell, infos[cell.task_id], config.max_train_rows))
    columns = [
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]}  skipped {task.fields[skipped]}  [red]failed {task.fields[failed]}[/red]"
                   "  workers {task.fields[workers]}"),
        TimeElapsedColumn(), TimeRemainingColumn(),
    ]
    try:
        with Progress(*columns, console=console, disable=not progress) as bar:
            task = bar.add_task(f"evaluate {suite.name}", total=len(runnable), ok=0, skipped=0, failed=0,
                                workers=backend.workers())
            for cell, outcome in _run(runnable, context, backend):
                store.write(cell.key, outcome.row, outcome.proba, outcome.arrays, outcome.traceback)
                summary.counts[outcome.row["status"]] += 1
                bar.update(task, advance=1, workers=backend.workers(),
                           **{s: summary.counts[s] for s in ("ok", "skipped", "failed")})
                store.write_table_if_due()
    except BaseException:
        store.write_table()
        _finish_manifest(out_dir, invocation, summary.counts, interrupted=True)
        raise
    store.write_table()
    _finish_manifest(out_dir, invocation, summary.counts)


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


def read_manifest(path: Path) -> dict:
    """manifest.json, checked: a ValueError names the file and what to do when it is damaged."""
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest, dict) or not isinstance(manifest.get("invocations"), list):
            raise ValueError("no `invocations` list")
        settings = manifest.get("settings")
        if not isinstance(settings, dict) or "seed" not in settings or not isinstance(settings.get("methods"), dict):
            raise ValueError("no `settings` with `seed` and `methods`")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(
            f"{str(path)!r} is damaged ({error}); move it aside (the stored cells are kept, only the run history "
            "and the settings check are lost) or pass a new --out directory"
        ) from None
    return manifest


def _start_manifest(out_dir: Path, config: EvaluateConfig, fingerprint: dict, n_cells: int, n_pending: int) -> int:
    path = out_dir / MANIFEST
    manifest = read_manifest(path) if path.exists() else {"invocations": []}
    manifest["settings"] = fingerprint
    manifest["invocations"].append({
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": dataclasses.asdict(config),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cells": n_cells, "pending": n_pending,
        "versions": _versions(), "git_sha": _git_sha(),
        "machine": {"cpu": cpu_name(), "cpu_count": os.cpu_count(), "platform": platform.platform()},
    })
    _write_json(path, manifest)
    return len(manifest["invocations"]) - 1


def _finish_manifest(out_dir: Path, index: int, counts: Counter, interrupted: bool = False) -> None:
    path = out_dir / MANIFEST
    manifest = read_manifest(path)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest["invocations"][index].update(
        {"interrupted" if interrupted else "finished": stamp, "written": dict(counts)}
    )
    _write_json(path, manifest)


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
