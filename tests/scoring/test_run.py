"""Scoring a checkpoint: on its own threads, with a progress bar, on tiny data; bad input; one
real OpenML task."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
import torch
from rich.console import Console
from shared_cache import SHARED_CACHE, needs_shared_cache
from sklearn.datasets import load_iris, load_wine

from equibench.errors import CheckpointError, InvalidInputError
from equibench.scoring import load_tasks, score_checkpoint

needs_cache = needs_shared_cache("59", "7")


def _subset(loader, per_class: int, threads: list | None = None):
    """A scikit-learn loader reduced to its first ``per_class`` rows of each class; it appends
    torch's thread count at each call to ``threads``."""
    def load(return_X_y=True):
        if threads is not None:
            threads.append(torch.get_num_threads())
        X, y = loader(return_X_y=True)
        keep = np.concatenate([np.flatnonzero(y == label)[:per_class] for label in np.unique(y)])
        return X[keep], y[keep]
    return load


#: Two small bundled datasets: scored in seconds by the tiny checkpoints.
TINY_DATASETS = {"iris": _subset(load_iris, 10), "wine": _subset(load_wine, 10)}


@pytest.mark.parametrize("checkpoint", ["tiny_equi_path", "tiny_star_path"])
def test_a_checkpoint_is_scored_on_its_own_threads(checkpoint, request, monkeypatch):
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    path = request.getfixturevalue(checkpoint)
    threads, stream = [], io.StringIO()
    datasets = {name: _subset(loader, 10, threads) for name, loader in (("iris", load_iris), ("wine", load_wine))}
    outside = torch.get_num_threads()
    card = score_checkpoint(path, datasets=datasets, n_estimators=1, device="cpu", threads=1, progress=True,
                            console=Console(file=stream))
    assert torch.get_num_threads() == outside and threads == [1, 1]
    model = "EquiTabPFN" if "equi" in checkpoint else "TabPFN*"
    assert card.model == model and card.folds is None and card.settings["n_estimators"] == 1
    assert len(card.scores) == 2 * 2 * 5 and set(card.scores.method) == {model, "LogisticRegression"}
    assert card.scores.accuracy.between(0, 1).all()
    assert [c.name for c in card.measured] == ["iris", "wine"]
    assert card.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and card.checkpoint == str(path)
    assert card.date and card.machine and card.seconds > 0 and card.command is None
    lines = stream.getvalue().splitlines()  # not a terminal: a plain line per fold
    assert lines[0] == "score: 0/10 done, elapsed 0:00:00, ETA ?"  # at the start
    assert "score iris fold 0: 0/10 done" in lines[1] and any("10/10 done" in line for line in lines)
    # the frame's numbers are the table's
    lr = card.scores[(card.scores.task == "iris") & (card.scores.method == "LogisticRegression")].accuracy.mean()
    assert card.bundled_table().loc["iris", "LogisticRegression"] == pytest.approx(lr)


def test_bad_input_is_a_clear_error(tmp_path, tiny_equi_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        score_checkpoint(tmp_path / "missing.pt", datasets=TINY_DATASETS)
    (tmp_path / "notes.pt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        score_checkpoint(tmp_path / "notes.pt", datasets=TINY_DATASETS)
    with pytest.raises(InvalidInputError, match="`threads` must be a positive number"):
        score_checkpoint(tiny_equi_path, threads=0)
    with pytest.raises(InvalidInputError, match="`folds` must be in 0..9"):
        score_checkpoint(tiny_equi_path, openml_cache=tmp_path, folds=[10])
    with pytest.raises(InvalidInputError, match="is not a folder"):
        score_checkpoint(tiny_equi_path, openml_cache=tmp_path / "nothing")
    with pytest.raises(InvalidInputError, match="is not an OpenML cache"):
        score_checkpoint(tiny_equi_path, openml_cache=tmp_path)
    (tmp_path / "org" / "openml" / "www" / "tasks").mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="holds no task"):
        load_tasks(tmp_path)


@needs_cache
def test_a_real_openml_task_and_fold_is_scored(tiny_star_path):
    with pytest.raises(InvalidInputError, match="has no task 1"):
        load_tasks(SHARED_CACHE, ["59", "1"])
    # iris (3 classes, against KNN) and audiology (24 classes: TabPFN* in an ECOC ensemble, against LinearModel)
    card = score_checkpoint(tiny_star_path, SHARED_CACHE, folds=[3], datasets=TINY_DATASETS, task_ids=["59", "7"],
                            n_estimators=1, device="cpu")
    openml = card.scores[card.scores.group != "bundled"]
    assert set(zip(openml.group, openml.task, openml.method)) == {
        ("<=10", "59", "TabPFN*"), ("<=10", "59", "KNN"), (">10", "7", "TabPFN*"), (">10", "7", "LinearModel")}
    assert (openml.fold == 3).all() and openml.accuracy.between(0, 1).all()
    knn = openml[openml.method == "KNN"].accuracy.item()
    assert knn > 0.8  # iris: 15 test rows, KNN on standardised features
    assert all(c.measured is not None for c in card.criteria) and card.folds == (3,) and not card.complete
    assert "### > 10-class tasks of the OpenML cache (mean accuracy over fold 3)" in card.to_markdown()
