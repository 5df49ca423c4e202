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
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .backends import CellBackend, LocalBackend
from .baselines.registry import METHODS, method_spec
from .cells import Cell, CellContext, CellOutcome, failed_row
from .machine import cpu_name
from .model import default_checkpoint, read_card
from .results_store import ResultsStore, atomic_write_text
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
    """What makes a cell's numbers: the seed, and per method the settings that change them
    (the PFN checkpoints' content, the context cap, the TabPFN weights)."""
    methods = {name: {} for name in METHODS}
    for name in ("equitabpfn", "tabpfn-star"):
        path = Path(method_settings[name]["checkpoint"])
        if not path.is_file():
            raise ValueError(f"{name} checkpoint {str(path)!r} does not exist; pass a file written by `equibench pretrain`")
        if read_card(path).arch != name:
            raise ValueError(f"checkpoint {str(path)!r} holds a {read_card(path).arch} model, not {name}; pass a {name} checkpoint")
        methods[name] = {"checkpoint_sha256": _file_digest(path), "max_train_rows": config.max_train_rows}
    for name in ("tabpfn-v1", "tabpfn-v2"):
        methods[name] = {"tabpfn_weights": config.resolved_tabpfn_weights()}
    return {"seed": config.seed, "methods": methods}


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


def _prepare(config: EvaluateConfig, out_dir: Path, store: ResultsStore, rerun_changed: bool):
    suite = load_suite(config.suite)
    method_settings = _method_settings(config)
    fingerprint = _fingerprint(config, method_settings)
    fingerprint["tables"] = {spec.task_id: spec.sha256 for spec in suite.files}
    manifest_path = out_dir / MANIFEST
    if manifest_path.exists():
        saved = json.loads(manifest_path.read_text())["settings"]
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
        stale = _stale_methods(saved, fingerprint, {row["method"] for row in store.rows()})
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

            working = str(working_cache(source, out_dir / "openml-cache"))
    infos = _task_infos(suite, working)
    return suite, CellContext(working, config.seed, method_settings, file_tasks=suite.files), fingerprint, infos


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
    ``rerun_changed``, those of methods whose settings changed are replaced). Cells run on
    ``backend`` (default: one at a time in this process); with several workers, the longest
    (by :func:`estimated_cost`) go first so the tail of the run is short."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    console = console or Console(stderr=True)
    store = ResultsStore(out_dir)
    suite, context, fingerprint, infos = _prepare(config, out_dir, store, rerun_changed and not dry_run)
    cells = plan_cells(config, suite, infos)
    finished = store.finished_keys()
    pending = [cell for cell in cells if cell.key not in finished]
    task_errors = {task_id: info.error for task_id, info in infos.items() if info.error}
    summary = EvaluateSummary(out_dir, cells, pending, Counter(), task_errors)
    if dry_run:
        return summary
    invocation = _start_manifest(out_dir, config, fingerprint, len(cells), len(pending))

    runnable = []
    for cell in pending:
        error = task_errors.get(cell.task_id)
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
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task(f"evaluate {suite.name}", total=len(runnable), ok=0, skipped=0, failed=0,
                            workers=backend.workers())
        for cell, outcome in _run(runnable, context, backend):
            store.write(cell.key, outcome.row, outcome.proba, outcome.arrays, outcome.traceback)
            summary.counts[outcome.row["status"]] += 1
            bar.update(task, advance=1, workers=backend.workers(),
                       **{s: summary.counts[s] for s in ("ok", "skipped", "failed")})
            store.write_table_if_due()
    store.write_table()
    _finish_manifest(out_dir, invocation, summary.counts)
    return summary


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


def _start_manifest(out_dir: Path, config: EvaluateConfig, fingerprint: dict, n_cells: int, n_pending: int) -> int:
    path = out_dir / MANIFEST
    manifest = json.loads(path.read_text()) if path.exists() else {"invocations": []}
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


def _finish_manifest(out_dir: Path, index: int, counts: Counter) -> None:
    path = out_dir / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["invocations"][index].update(
        finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), written=dict(counts)
    )
    _write_json(path, manifest)


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
