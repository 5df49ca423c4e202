"""OpenML task loading from an offline cache, fold semantics, and the read-only source."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_cache import SHARED_CACHE, needs_shared_cache

from equibench.tasks.openml import TaskUnavailableError, load_cached_tasks, load_task, working_cache
from equibench.tasks.task import Task

needs_cache = needs_shared_cache("59", "11", "7")


def _task(n_rows=50, n_folds=10):
    return Task(
        task_id="1", name="toy", X=pd.DataFrame({"a": np.arange(n_rows)}), y=np.arange(n_rows) % 2,
        categorical=np.array([False]), test_folds=np.arange(n_rows) % n_folds,
    )


def test_fold_semantics():
    task = _task()
    tested = np.zeros(50, dtype=int)
    for fold in range(10):
        train, validation, test = task.split(fold)
        assert set(test) == set(np.flatnonzero(task.test_folds == fold))
        assert set(validation) == set(np.flatnonzero(task.test_folds == (fold + 1) % 10))
        assert not set(train) & set(validation) and not set(train) & set(test) and not set(validation) & set(test)
        assert len(train) + len(validation) + len(test) == 50
        tested[test] += 1
    assert (tested == 1).all()
    with pytest.raises(ValueError, match="folds 0..9"):
        task.split(10)


def test_not_a_cache_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not an OpenML cache"):
        working_cache(tmp_path / "nothing", tmp_path / "work")


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@needs_cache
def test_loads_a_cached_task_without_touching_the_source(tmp_path):
    before = _digest(SHARED_CACHE / "org/openml/www/tasks/59")
    cache = working_cache(SHARED_CACHE, tmp_path / "work")
    task = load_task(59, cache)
    assert task.name == "iris" and task.X.shape == (150, 4) and task.n_folds == 10
    assert sorted(np.unique(task.y)) == ["Iris-setosa", "Iris-versicolor", "Iris-virginica"]
    assert _digest(SHARED_CACHE / "org/openml/www/tasks/59") == before


@needs_cache
def test_loads_every_cached_task_through_a_copy_it_removes(tmp_path, monkeypatch):
    partial = working_cache(SHARED_CACHE, tmp_path / "partial")
    for folder in (partial / "org/openml/www/tasks").iterdir():
        if folder.name not in ("59", "11"):
            shutil.rmtree(folder)
    before = _digest(partial)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    tasks = load_cached_tasks(partial)
    assert list(tasks) == [11, 59] and tasks[59].name == "iris" and tasks[11].name == "balance-scale"
    assert _digest(partial) == before and not any((tmp_path / "temp").iterdir())


@needs_cache
def test_loading_every_cached_task_leaves_a_users_files_beside_its_copy(tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    (temp / "equibench-openml-mine").mkdir(parents=True)  # a user's folder with the copy's prefix
    (temp / "equibench-openml-mine" / "notes.txt").write_text("keep")
    (temp / "report.csv").write_text("keep")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert 59 in load_cached_tasks(SHARED_CACHE)
    assert sorted(p.relative_to(temp).as_posix() for p in temp.rglob("*")) == [
        "equibench-openml-mine", "equibench-openml-mine/notes.txt", "report.csv"]
    assert (temp / "report.csv").read_text() == (temp / "equibench-openml-mine" / "notes.txt").read_text() == "keep"


@needs_cache
def test_uncached_task_names_the_task_and_the_offline_option(tmp_path):
    cache = working_cache(SHARED_CACHE, tmp_path / "work")
    with pytest.raises(TaskUnavailableError, match=r"task 999999 .*openml_cache"):
        load_task(999999, cache)


@needs_cache
def test_a_data_file_cut_at_a_line_is_a_damaged_task_naming_the_file(tmp_path):
    """A dataset.arff that lost its last rows (cut at a line end, so it still parses) while the
    folds name them: the task is damaged, named with its file, not an IndexError."""
    source = tmp_path / "source"
    shutil.copytree(SHARED_CACHE / "org" / "openml" / "www" / "tasks" / "7", source / "org/openml/www/tasks/7")
    shutil.copytree(SHARED_CACHE / "org" / "openml" / "www" / "datasets" / "7", source / "org/openml/www/datasets/7")
    data = source / "org" / "openml" / "www" / "datasets" / "7" / "dataset.arff"
    lines = data.read_text().splitlines(keepends=True)
    data.write_text("".join(lines[:200]))
    work = working_cache(source, tmp_path / "work")
    with pytest.raises(TaskUnavailableError, match=r"datasets/7/dataset.arff has \d+ rows") as caught:
        load_task(7, work)
    assert "fetch the task again" in str(caught.value)
