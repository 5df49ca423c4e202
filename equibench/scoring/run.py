"""Scoring one checkpoint: :func:`score_checkpoint`, the library side of ``equibench score``.

Every fold of every bundled dataset and OpenML task is one unit of work: the checkpoint's
classifier (built by :func:`~equibench.classifier.classifier_for`, TabPFN* in an ECOC ensemble
above its class limit, as ``equibench evaluate`` does) and the part's reference model are
fitted on its train rows and scored on its test rows. Every model runs on ``threads`` threads
with torch's deterministic algorithms, as an ``equibench evaluate`` cell does: KNN's answer on
tied distances depends on the thread count.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from sklearn.model_selection import StratifiedKFold

from .._version import __version__
from ..baselines.registry import method_spec
from ..errors import InvalidInputError
from ..machine import cpu_name
from ..progress import Progress
from .bar import (
    BUNDLED_FOLDS,
    BUNDLED_REFERENCE,
    COLUMNS,
    LARGE_REFERENCE,
    MANY_CLASSES,
    OPENML_FOLDS,
    SMALL_REFERENCE,
    evaluate_criteria,
)
from .references import reference_model
from .scorecard import Scorecard, fold_span

#: The classifier parameters a scorecard records (those its scores depend on).
RECORDED_SETTINGS = ("n_estimators", "feature_transforms", "categorical_encodings", "device", "inference_precision",
                     "softmax_temperature", "max_train_rows", "random_state")


def _check_folds(folds) -> tuple[int, ...]:
    try:
        folds = tuple(dict.fromkeys(int(fold) for fold in folds))
    except (TypeError, ValueError):
        raise InvalidInputError(f"`folds` must be integers in 0..{len(OPENML_FOLDS) - 1}, got {folds!r}") from None
    if not folds:
        raise InvalidInputError(f"`folds` is empty; give some of 0..{len(OPENML_FOLDS) - 1}")
    wrong = [fold for fold in folds if fold not in OPENML_FOLDS]
    if wrong:
        raise InvalidInputError(f"`folds` must be in 0..{len(OPENML_FOLDS) - 1} (an OpenML task has 10), got {wrong}")
    return folds


def load_tasks(openml_cache: str | os.PathLike, task_ids: Iterable | None = None) -> dict:
    """The tasks (task id -> :class:`~equibench.tasks.task.Task`) of the OpenML cache folder
    ``openml_cache``, all of them or ``task_ids``, loaded through a temporary writable copy
    (the folder is only read)."""
    from ..tasks.cache_check import cached_task_ids
    from ..tasks.openml import load_cached_tasks

    cache = Path(openml_cache)
    if not cache.is_dir():
        raise InvalidInputError(f"`openml_cache` {str(cache)!r} is not a folder; pass an OpenML cache folder "
                                "(one that `download_tasks` filled)")
    if not (cache / "org").is_dir():
        raise InvalidInputError(f"`openml_cache` {str(cache)!r} is not an OpenML cache (no org/ folder inside); "
                                "point at the folder that contains org/openml/www/...")
    available = cached_task_ids(cache)
    if not available:
        raise InvalidInputError(f"`openml_cache` {str(cache)!r} holds no task; fill it with `download_tasks`")
    chosen = available if task_ids is None else [str(task_id) for task_id in task_ids]
    missing = sorted(set(chosen) - set(available), key=str)
    if missing:
        raise InvalidInputError(f"`openml_cache` {str(cache)!r} has no task {', '.join(missing)}")
    return {str(task_id): task for task_id, task in load_cached_tasks(cache, chosen).items()}


def _task_folds(tasks: Mapping, folds: Iterable[int]) -> dict:
    """{task id: the folds of ``folds`` the task has}, tasks with none left out."""
    chosen = {task_id: [fold for fold in folds if fold < task.n_folds] for task_id, task in tasks.items()}
    return {task_id: task_folds for task_id, task_folds in chosen.items() if task_folds}


def _units(datasets: Mapping[str, Callable], tasks: Mapping, task_folds: Mapping) -> Iterator[tuple]:
    """Each fold to score: (group, task, dataset, fold, reference, n_classes, categorical,
    X_train, y_train, X_test, y_test). Bundled datasets: the folds of a shuffled stratified CV
    (``random_state=0``); OpenML tasks: test = fold i, train = the train and validation parts of
    ``task.split(i)``."""
    splitter = StratifiedKFold(n_splits=BUNDLED_FOLDS, shuffle=True, random_state=0)
    for name, loader in datasets.items():
        X, y = loader(return_X_y=True)
        for fold, (train, test) in enumerate(splitter.split(X, y)):
            yield ("bundled", name, name, fold, BUNDLED_REFERENCE, len(np.unique(y)), None,
                   X[train], y[train], X[test], y[test])
    for task_id, folds in task_folds.items():
        task = tasks[task_id]
        n_classes = len(np.unique(task.y))
        group, reference = (">10", LARGE_REFERENCE) if n_classes > MANY_CLASSES else ("<=10", SMALL_REFERENCE)
        for fold in folds:
            train, validation, test = task.split(fold)
            train = np.concatenate([train, validation])
            yield (group, str(task_id), task.name, fold, reference, n_classes, task.categorical,
                   task.X.iloc[train], task.y[train], task.X.iloc[test], task.y[test])


def _accuracy(model, X_train, y_train, X_test, y_test) -> float:
    model.fit(X_train, y_train)
    return float((model.predict(X_test) == y_test).mean())


def _machine(device) -> str:
    """The CPU and its core count, and the GPU when the classifier ran on one."""
    import torch

    from ..devices import resolve_device

    text = f"{cpu_name()} ({os.cpu_count()} cores)"
    resolved = resolve_device(device)
    return f"{torch.cuda.get_device_name(resolved)}, {text}" if resolved.type == "cuda" else text


def score_checkpoint(
    checkpoint: str | os.PathLike,
    openml_cache: str | os.PathLike | None = None,
    folds: Iterable[int] = OPENML_FOLDS,
    threads: int = 1,
    progress: bool = False,
    console: Console | None = None,
    *,
    datasets: Mapping[str, Callable] | None = None,
    task_ids: Iterable | None = None,
    **classifier_settings,
) -> Scorecard:
    """Measure ``checkpoint`` (a file, or a packaged name such as ``"equitabpfn-small"``) against the quality bar.

    The bundled datasets (``datasets``, name -> scikit-learn loader; default
    :data:`~equibench.pretrain.BUNDLED_DATASETS`) are always scored; the OpenML criteria only
    with ``openml_cache`` (a folder in openml's layout, only read), on its tasks (or
    ``task_ids``) and ``folds``. Every model runs on ``threads`` threads.
    ``classifier_settings`` go to :func:`~equibench.classifier.classifier_for` (default
    ``random_state=0``). With ``progress``, a bar on ``console`` (default: stderr) counts the
    folds once the checkpoint and the tasks have loaded."""
    from ..classifier import classifier_for
    from ..classifier.checkpoints import checkpoint_sha256, resolve_checkpoint
    from ..evaluate.cells import reproducible_cell
    from ..model import load_checkpoint
    from ..pretrain import validation

    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 1:
        raise InvalidInputError(f"`threads` must be a positive number, got {threads!r}")
    folds = _check_folds(folds) if openml_cache is not None else None
    path = resolve_checkpoint(checkpoint)  # a packaged name or a path
    _, card = load_checkpoint(path)  # a clear error for a missing or broken file, before any work
    label = method_spec(card.arch).plain_label
    tasks = {} if openml_cache is None else load_tasks(openml_cache, task_ids)
    task_folds = _task_folds(tasks, folds or ())
    if tasks and not task_folds:
        raise InvalidInputError(f"no task of `openml_cache` has {fold_span(folds)}")
    settings = {"random_state": 0, **classifier_settings}
    datasets = validation.BUNDLED_DATASETS if datasets is None else datasets
    total = BUNDLED_FOLDS * len(datasets) + sum(map(len, task_folds.values()))

    rows = []
    columns = (TextColumn("[bold]score"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console or Console(stderr=True), disable=not progress, name="score") as bar, \
            reproducible_cell(threads):
        job = bar.add_task("", total=total)
        for group, task, dataset, fold, reference, n_classes, categorical, *data in _units(datasets, tasks, task_folds):
            bar.update(job, description=f"{dataset if group == 'bundled' else f'task {task} ({dataset})'} fold {fold}")
            models = {label: classifier_for(path, n_classes=n_classes, **settings),
                      reference: reference_model(reference, categorical)}
            rows += [(group, task, dataset, fold, method, _accuracy(model, *data)) for method, model in models.items()]
            bar.advance(job)
        bar.update(job, description="done")
    scores = pd.DataFrame(rows, columns=list(COLUMNS))
    params = classifier_for(path, n_classes=2, **settings).get_params(deep=False)  # 2 classes: never ECOC-wrapped
    recorded = {name: params[name] for name in RECORDED_SETTINGS if name in params}
    return Scorecard(
        checkpoint=str(checkpoint), arch=card.arch, scores=scores,
        criteria=evaluate_criteria(scores, label, datasets=list(datasets)), folds=folds,
        openml_cache=None if openml_cache is None else str(openml_cache), threads=threads, settings=recorded,
        sha256=checkpoint_sha256(path), date=date, machine=_machine(recorded.get("device", "auto")),
        seconds=time.perf_counter() - started, equibench=__version__,
    )
