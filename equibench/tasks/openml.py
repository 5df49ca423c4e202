"""OpenML tasks through the ``openml`` package, offline against a cache in openml's layout.

A source cache may be read-only (openml writes pickles into its cache and deletes entries
it cannot complete), so it is copied into a writable working cache first and the source is
never modified.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..atomic_files import atomic_write
from ..errors import InvalidInputError, TaskUnavailableError
from .cache_check import cached_task_ids
from .task import Task


def working_cache(source: str | os.PathLike, work_dir: str | os.PathLike) -> Path:
    """Copy the cache at ``source`` into ``work_dir`` (files already there are kept) and
    return ``work_dir``; the source is only read."""
    source, work_dir = Path(source), Path(work_dir)
    if not (source / "org").is_dir():
        raise FileNotFoundError(
            f"{str(source)!r} is not an OpenML cache (no org/ folder inside); point at the "
            "directory that contains org/openml/www/..."
        )
    if source.resolve() == work_dir.resolve():
        return work_dir
    for path in source.rglob("*"):
        target = work_dir / path.relative_to(source)
        if not path.is_file():
            continue
        if target.is_file() and target.stat().st_size == path.stat().st_size:  # a resumed run copies nothing again
            continue
        target.parent.mkdir(parents=True, exist_ok=True)  # missing, or torn by a killed copy: copy it (again)
        atomic_write(target, lambda tmp, path=path: _copy_writable(path, tmp))
    return work_dir


def load_cached_tasks(source: str | os.PathLike) -> dict[int, Task]:
    """Every task of the OpenML cache at ``source``, by task id in numeric order, loaded through
    a temporary writable copy that is removed afterwards (``source`` is only read)."""
    with tempfile.TemporaryDirectory(prefix="equibench-openml-") as work_dir:
        cache = working_cache(source, work_dir)
        return {int(task_id): load_task(int(task_id), cache) for task_id in cached_task_ids(cache)}


def _copy_writable(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    if target.stat().st_size != source.stat().st_size:
        raise OSError(f"copying {str(source)!r} to {str(target)!r} wrote {target.stat().st_size} of "
                      f"{source.stat().st_size} bytes (disk full?)")


def load_task(task_id: int, cache_dir: str | os.PathLike | None) -> Task:
    """Load a classification task and its 10 folds from the openml cache in ``cache_dir``
    (None: openml's own default cache, downloading what is missing when online)."""
    os.environ.setdefault("OPENML_SKIP_PARQUET", "true")
    import openml

    if cache_dir is not None:
        openml.config.set_root_cache_directory(str(cache_dir))
    cache_dir = cache_dir or openml.config.get_cache_directory()
    openml.config.set_retry_policy("human", n_retries=1)  # offline is the common case: fail fast
    try:
        task = openml.tasks.get_task(task_id, download_splits=True, download_data=False)
        dataset = task.get_dataset()
        X, y, categorical, _ = dataset.get_data(target=task.target_name)
    except Exception as error:  # openml raises connection, cache and server errors alike
        raise TaskUnavailableError(
            f"OpenML task {task_id} is not in the cache {str(cache_dir)!r} and the OpenML server "
            f"could not be reached ({type(error).__name__}). Point openml_cache (or "
            "OPENML_CACHE_DIR) at a cache that holds it."
        ) from error
    test_folds = np.full(len(X), -1)
    n_folds = task.get_split_dimensions()[1]
    for fold in range(n_folds):
        _, test = task.get_train_test_split_indices(fold=fold, repeat=0)
        test_folds[test] = fold
    if (test_folds < 0).any():
        raise InvalidInputError(f"task {task_id}: {int((test_folds < 0).sum())} rows are in no test fold")
    return Task(
        task_id=str(task_id), name=dataset.name, X=X.reset_index(drop=True), y=np.asarray(y),
        categorical=np.asarray(categorical, dtype=bool), test_folds=test_folds,
    )
