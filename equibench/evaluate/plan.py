"""What a run will do: every task of the suite loaded once (:class:`TaskInfo`), the run's cells
and their estimated cost, and the lines that name missing tasks with the step that brings them."""

from __future__ import annotations

from dataclasses import dataclass

from ..baselines.registry import METHODS
from ..baselines.settings import Settings
from ..errors import InvalidInputError, TaskUnavailableError
from ..tasks.openml import TaskNotCachedError, is_cached
from ..tasks.suites import Suite, load_task
from ..tasks.user_data import PREFIX as FILE_PREFIX
from .cells import Cell
from .config import EvaluateConfig


@dataclass
class TaskInfo:
    n_folds: int
    n_rows: int = 0
    n_classes: int = 0
    error: str | None = None  # why a task the cache holds could not be loaded (damaged files): its cells fail
    missing: TaskNotCachedError | None = None  # why the task is not here at all: its cells are not run


def task_infos(suite: Suite, openml_cache: str | None, source: str | None = None) -> dict[str, TaskInfo]:
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
        except TaskUnavailableError as error:
            message = str(error) if openml_cache is None or source is None else str(error).replace(openml_cache, source)
            infos[task_id] = TaskInfo(n_folds=0, error=message)
        else:
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
                                    f"({', '.join(map(str, folds))}); choose `folds` among them")
        for fold in folds:
            for name in config.methods:
                cells.extend(Cell(suite.name, task_id, fold, name, variant) for variant in variants[name])
    return cells


def estimated_cost(cell: Cell, info: TaskInfo) -> float:
    """Relative run time of a cell: the train rows its settings process (x ensemble members,
    up to a context cap) x n_classes x the method's measured cost per unit."""
    n_train = info.n_rows * max(1, info.n_folds - 2) / max(1, info.n_folds)
    return METHODS[cell.method].cost * cell.settings.work(n_train) * max(1, info.n_classes)


def missing_groups(config: EvaluateConfig, suite: Suite, infos: dict[str, TaskInfo],
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
        where = f"the OpenML cache {cache!r}" if given is not None else f"openml's own cache {cache!r} (no `openml_cache` given)"
        listed = "" if len(task_ids) == len(suite.task_ids) else ": " + ", ".join(task_ids[:10]) + (
            f" and {len(task_ids) - 10} more" if len(task_ids) > 10 else "")
        lines.append(f"{len(task_ids)} of {len(suite.task_ids)} {suite.name} tasks are not in {where} and {cause}"
                     f"{listed}")
    if not any(info.missing.unreachable for info in infos.values() if info.missing is not None):
        return lines, None
    holds_some = given is not None and any(info.missing is None for task_id, info in infos.items()
                                           if not task_id.startswith(("demo-", FILE_PREFIX)))
    fetch = f"download_tasks(task_ids=select_tasks(suite={config.suite!r}), cache={given if holds_some else 'DIR'!r})"
    return lines, (f"where a network is, fetch what the cache lacks with `{fetch}` (it keeps what is there), or point "
                   "`openml_cache` at a cache that holds them; then run again (finished cells are kept)" if holds_some else
                   f"point `openml_cache` at your OpenML cache folder (DIR), or fill one where a network is with `{fetch}`; "
                   "then run again with `openml_cache` DIR")

