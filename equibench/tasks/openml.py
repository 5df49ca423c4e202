"""OpenML tasks through the ``openml`` package, offline against a cache in openml's layout.

A source cache may be read-only (openml writes pickles into its cache and deletes entries
it cannot complete), so it is copied into a writable working cache first and the source is
never modified.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..atomic_files import atomic_write
from ..errors import InvalidInputError, TaskUnavailableError, first_line
from .cache_check import (
    DATASET_FILES,
    TASK_FILES,
    TaskCheck,
    cached_task_ids,
    check_task,
    dataset_file,
    server_dir,
    task_file,
)
from .cache_manifest import Manifest
from .task import Task


class TaskNotCachedError(TaskUnavailableError):
    """An OpenML task that is not in the cache, and that the OpenML server did not give
    (unreachable, or no such task): *missing* here, as opposed to a cached task whose files
    are damaged. ``cache`` is the cache that lacks it, ``cause`` why the server did not
    give it (the same for every task when the server is unreachable)."""

    def __init__(self, task_id: int | str, cache: str, cause: str, unreachable: bool):
        self.task_id, self.cache, self.cause, self.unreachable = str(task_id), cache, cause, unreachable
        super().__init__(task_id, cache, cause, unreachable)

    def __str__(self) -> str:
        return (f"OpenML task {self.task_id} is not in the cache {self.cache!r} and {self.cause}. Point "
                "`openml_cache` (or OPENML_CACHE_DIR) at a cache that holds it.")


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
        # a resumed run copies nothing again; a file missing, or torn by a killed copy, is copied
        if path.is_file() and not (target.is_file() and target.stat().st_size == path.stat().st_size):
            atomic_write(target, lambda tmp, path=path: shutil.copyfile(path, tmp))
    return work_dir


def load_cached_tasks(source: str | os.PathLike, task_ids=None) -> dict[int, Task]:
    """The tasks ``task_ids`` (default: every task, in numeric order) of the OpenML cache at
    ``source``, by task id, loaded through a temporary writable copy (``source`` is only read)."""
    with tempfile.TemporaryDirectory(prefix="equibench-openml-") as work_dir:
        cache = working_cache(source, work_dir)
        chosen = cached_task_ids(cache) if task_ids is None else task_ids
        return {int(task_id): load_task(int(task_id), cache) for task_id in chosen}


def openml_root(cache_dir: str | os.PathLike | None) -> Path:
    """The root cache directory openml reads for ``cache_dir`` (None: openml's own default)."""
    if cache_dir is not None:
        return Path(cache_dir)
    import openml

    return Path(openml.config.get_config_as_dict()["cachedir"])


def is_cached(task_id: int | str, cache_dir: str | os.PathLike | None) -> bool:
    """Whether the cache (None: openml's own) has the task's description: the first file
    openml looks for, so a task without it is fetched from the server or is missing."""
    return (server_dir(openml_root(cache_dir)) / task_file(task_id, "task.xml")).is_file()


def load_task(task_id: int, cache_dir: str | os.PathLike | None) -> Task:
    """Load a classification task and its 10 folds from the openml cache in ``cache_dir``
    (None: openml's own default cache, downloading what is missing when online).

    A :class:`TaskNotCachedError` when the cache does not hold the task and the server does
    not give it; a :class:`TaskUnavailableError` naming the file when the cache holds it but
    it cannot be loaded (a damaged or incomplete file)."""
    os.environ.setdefault("OPENML_SKIP_PARQUET", "true")
    import openml

    if cache_dir is not None:
        openml.config.set_root_cache_directory(str(cache_dir))
    root = openml_root(cache_dir)
    before = check_task(server_dir(root), task_id, deep=False) if is_cached(task_id, root) else None
    openml.config.set_retry_policy("human", n_retries=1)  # offline is the common case: fail fast
    with _kept_files(root, before) as kept:  # openml removes a task's folder when loading it fails
        try:
            task = openml.tasks.get_task(task_id, download_splits=True, download_data=False)
            dataset = task.get_dataset()
            X, y, categorical, _ = dataset.get_data(target=task.target_name)
        except Exception as error:  # openml raises connection, cache and server errors alike
            if before is None:
                unreachable = isinstance(error, OSError)  # requests' connection errors and timeouts are OSErrors
                cause = (f"the OpenML server could not be reached ({type(error).__name__})" if unreachable
                         else f"the OpenML server did not give it ({first_line(error, 200)})")
                raise TaskNotCachedError(task_id, str(root), cause, unreachable) from error
            raise TaskUnavailableError(_damage(task_id, root, kept, before, error)) from error
        test_folds = np.full(len(X), -1)
        n_folds = task.get_split_dimensions()[1]
        splits = [task.get_train_test_split_indices(fold=fold, repeat=0)[1] for fold in range(n_folds)]
        beyond = max((int(test.max()) for test in splits if len(test)), default=-1)
        if beyond >= len(X):  # the data file lost rows (a truncated dataset.arff) that the folds still name
            unsplit = ValueError(f"its folds name row {beyond}, but the dataset holds only {len(X)} rows (the data "
                                 "file is truncated?)")
        else:
            for fold, test in enumerate(splits):
                test_folds[test] = fold
            unsplit = ValueError(f"{int((test_folds < 0).sum())} rows are in no test fold")
        if beyond >= len(X) or (test_folds < 0).any():
            if before is None:  # fetched from the server just now
                raise InvalidInputError(f"task {task_id}: {unsplit}")
            raise TaskUnavailableError(_damage(task_id, root, kept, before, unsplit))
    return Task(
        task_id=str(task_id), name=dataset.name, X=X.reset_index(drop=True), y=np.asarray(y),
        categorical=np.asarray(categorical, dtype=bool), test_folds=test_folds,
    )


@contextmanager
def _kept_files(root: Path, check: TaskCheck | None):
    """A folder in the server layout holding hard links to (or copies of) the files of a
    task that ``check`` found in the cache ``root``, for the block's duration (None when
    there is no such task, or ``root`` is read-only): openml deletes a task's files when it
    cannot load them, and the full check that names the damaged file runs afterwards."""
    if check is None:
        yield None
        return
    try:
        folder = tempfile.TemporaryDirectory(prefix=".equibench-kept-", dir=root)  # same disk: links, not copies
    except OSError:
        yield None
        return
    with folder:
        kept = Path(folder.name)
        for name in check.files:
            source = server_dir(root) / name
            if source.is_file():
                (kept / name).parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(source, kept / name)
                except OSError:
                    shutil.copyfile(source, kept / name)
        yield kept


def _damage(task_id, root: Path, kept: Path | None, before: TaskCheck, error: BaseException) -> str:
    """Why a task the cache ``root`` holds could not be loaded, naming the file: what the quick
    check found before openml ran, else what a full check of its ``kept`` files finds (those
    in ``root`` without them), else openml's own error."""
    try:
        manifest = Manifest.load(root)
    except InvalidInputError:  # a damaged download record: check the files by themselves
        manifest = None
    check = before if not before.ok else check_task(kept or server_dir(root), task_id, deep=True, manifest=manifest)
    problems = [f"{server_dir(root) / name} is missing" for name in check.missing]
    for problem in check.problems:
        name = problem.split(" ", 1)[0]
        if check.dataset_id is not None and name in DATASET_FILES:
            problem = f"{server_dir(root) / dataset_file(check.dataset_id, name)}{problem[len(name):]}"
        elif name in TASK_FILES:
            problem = f"{server_dir(root) / task_file(task_id, name)}{problem[len(name):]}"
        elif name.startswith(("tasks/", "datasets/")):  # a file the download record names
            problem = f"{server_dir(root) / name}{problem[len(name):]}"
        problems.append(problem)
    found = "; ".join(problems) or f"openml cannot load it ({first_line(error, 200)})"
    return (f"OpenML task {task_id} is in the cache {str(root)!r} but is damaged or incomplete: {found}. Check the "
            f"cache with `check_cache(cache={str(root)!r}, task_ids=[{str(task_id)!r}])` and fetch the task "
            "again where a network is")
