"""The quality bar's scoring core: criteria arithmetic at the thresholds, the scorecard's
tables and JSON, one checkpoint scored on tiny data, bad input, and one real OpenML task."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import load_iris, load_wine

from equibench.errors import CheckpointError, InvalidInputError
from equibench.pretrain import Criterion, Scorecard, evaluate_criteria, score_checkpoint
from equibench.pretrain.scorecard import COLUMNS, load_tasks

# The shared read-only cache beside the checkout, or wherever EQUIBENCH_TEST_OPENML_CACHE points.
SHARED_CACHE = Path(
    os.environ.get("EQUIBENCH_TEST_OPENML_CACHE", Path(__file__).resolve().parents[3] / "shared" / "data" / "openml-cache")
)
needs_cache = pytest.mark.skipif(not (SHARED_CACHE / "org").is_dir(), reason="the shared OpenML cache is not present")


def _subset(loader, per_class: int):
    """A scikit-learn loader reduced to its first ``per_class`` rows of each class."""
    def load(return_X_y=True):
        X, y = loader(return_X_y=True)
        keep = np.concatenate([np.flatnonzero(y == label)[:per_class] for label in np.unique(y)])
        return X[keep], y[keep]
    return load


#: Two small bundled datasets: scored in seconds by the tiny checkpoints.
TINY_DATASETS = {"iris": _subset(load_iris, 10), "wine": _subset(load_wine, 10)}


def frame(bundled=None, small=None, large=None, model="EquiTabPFN") -> pd.DataFrame:
    """A score frame from {name: (model accuracy, reference accuracy)} per group, one fold each."""
    rows = []
    for group, reference, entries in (("bundled", "LogisticRegression", bundled), ("<=10", "KNN", small),
                                      (">10", "LinearModel", large)):
        for name, (ours, theirs) in (entries or {}).items():
            rows += [(group, name, name, 0, model, ours), (group, name, name, 0, reference, theirs)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def by_name(criteria) -> dict[str, Criterion]:
    return {criterion.name: criterion for criterion in criteria}


@pytest.mark.parametrize("ours, theirs, met", [
    (0.95, 0.96, True),  # exactly one point below: the boundary is met
    (0.949, 0.96, False),
    (0.97, 0.96, True),
    (0.10, 0.30, False),
])
def test_bundled_criterion_allows_one_point_below_logistic_regression(ours, theirs, met):
    criterion = by_name(evaluate_criteria(frame(bundled={"iris": (ours, theirs)}), "EquiTabPFN"))["iris"]
    assert criterion.met is met and criterion.threshold == -1.0 and criterion.reference == "LogisticRegression"
    assert criterion.measured == pytest.approx(100 * (ours - theirs))


@pytest.mark.parametrize("ours, median_met, mean_met", [
    ([0.82, 0.90, 0.70], True, True),  # median exactly +2 points: met
    ([0.8199, 0.90, 0.70], False, True),  # median just below +2
    ([0.82, 0.86, 0.60], True, False),  # mean exactly equal: "> 0" is not met
    ([0.82, 0.86, 0.6001], True, True),  # mean just above
])
def test_small_task_criteria_at_their_thresholds(ours, median_met, mean_met):
    knn = [0.80, 0.88, 0.60]
    scores = frame(small={f"t{i}": (o, k) for i, (o, k) in enumerate(zip(ours, knn))})
    criteria = by_name(evaluate_criteria(scores, "EquiTabPFN"))
    assert criteria["<=10-class median"].met is median_met and criteria["<=10-class median"].threshold == 2.0
    assert criteria["<=10-class mean"].met is mean_met and criteria["<=10-class mean"].strict
    assert criteria["<=10-class median"].measured == pytest.approx(100 * (np.median(ours) - np.median(knn)))
    assert criteria["<=10-class mean"].measured == pytest.approx(100 * (np.mean(ours) - np.mean(knn)))


@pytest.mark.parametrize("ours, met", [(0.70, True), (0.6999, False), (0.75, True)])
def test_large_task_mean_may_equal_linear_model(ours, met):
    scores = frame(large={"a": (ours, 0.65), "b": (0.80, 0.85)})
    criterion = by_name(evaluate_criteria(scores, "EquiTabPFN"))[">10-class mean"]
    assert criterion.met is met and not criterion.strict and criterion.reference == "LinearModel"


def test_fold_means_come_before_the_margins():
    rows = [("bundled", "iris", "iris", fold, method, accuracy)
            for fold, (ours, theirs) in enumerate([(1.0, 0.9), (0.8, 1.0)])
            for method, accuracy in (("EquiTabPFN", ours), ("LogisticRegression", theirs))]
    criterion = evaluate_criteria(pd.DataFrame(rows, columns=list(COLUMNS)), "EquiTabPFN")[0]
    assert criterion.measured == pytest.approx(-5.0) and criterion.met is False


def test_unscored_parts_are_not_measured_and_the_verdict_says_so():
    scores = frame(bundled={"iris": (0.96, 0.96)})
    criteria = evaluate_criteria(scores, "EquiTabPFN")
    assert [c.name for c in criteria] == ["iris", "<=10-class median", "<=10-class mean", ">10-class mean"]
    assert all(c.measured is None and c.met is None and "no OpenML cache" in c.note for c in criteria[1:])
    card = Scorecard(checkpoint="m.pt", arch="equitabpfn", scores=scores, criteria=criteria)
    assert card.met and not card.complete
    assert "1 of 1 measured criteria met; 3 not measured" in card.verdict()
    text = card.to_markdown()
    assert "criteria were not measured" in text and "EquiTabPFN <=10-class median: not measured" in text
    # a cache without > 10-class tasks leaves only that criterion unmeasured
    only_small = evaluate_criteria(frame(bundled={"iris": (0.96, 0.96)}, small={"t": (0.9, 0.8)}), "EquiTabPFN")
    assert [c.name for c in only_small if c.measured is None] == [">10-class mean"]
    assert "no task of > 10 classes" in only_small[-1].note


def _card(ours=0.9) -> Scorecard:
    scores = frame(bundled={"iris": (0.96, 0.96), "wine": (0.9, 0.98)}, small={"4": (ours, 0.8), "11": (0.95, 0.7)},
                   large={"7": (0.8, 0.75)}, model="TabPFN*")
    return Scorecard(checkpoint="t.pt", arch="tabpfn-star", scores=scores, criteria=evaluate_criteria(scores, "TabPFN*"),
                     folds=(0,), openml_cache="cache", threads=1, settings={"n_estimators": 4, "feature_transforms": ("none",)})


def test_scorecard_json_shape_and_markdown():
    card = _card()
    data = json.loads(json.dumps(card.to_dict()))
    assert data["model"] == "TabPFN*" and data["arch"] == "tabpfn-star" and data["met"] is False
    assert data["complete"] is False  # fold 0 only
    assert [c["name"] for c in data["criteria"]] == ["iris", "wine", "<=10-class median", "<=10-class mean",
                                                     ">10-class mean"]
    assert {c["name"]: c["met"] for c in data["criteria"]}["wine"] is False
    assert set(data["criteria"][0]) >= {"name", "reference", "measured", "comparison", "threshold", "met"}
    assert data["bundled"]["wine"] == {"TabPFN*": 0.9, "LogisticRegression": 0.98}
    assert data["openml"]["<=10"]["summary"]["KNN"] == {"median": 0.75, "mean": 0.75}
    assert data["openml"][">10"]["tasks"] == [{"task": "7", "dataset": "7", "TabPFN*": 0.8, "LinearModel": 0.75}]
    assert len(data["scores"]) == 10 and set(data["scores"][0]) == set(COLUMNS)
    assert data["settings"] == {"n_estimators": 4, "feature_transforms": ["none"]} and data["folds"] == [0]
    text = card.to_markdown()
    assert "| wine | 90.0 | 98.0 | -8.0 |" in text
    assert "### <= 10-class tasks of the OpenML cache (mean accuracy over fold 0)" in text
    assert "| 11 | 11 | 95.0 | 70.0 |" in text and "| TabPFN* | 92.5 | 92.5 |" in text
    assert "- TabPFN* wine: -8.00 points vs LogisticRegression (bar >= -1.0): NOT met" in text
    assert "- TabPFN* <=10-class mean: +17.50 points vs KNN (bar > 0.0): met" in text
    assert "does NOT meet the bar: 4 of 5 measured criteria met (OpenML on fold 0 only" in text


@pytest.mark.parametrize("checkpoint", ["tiny_equi_path", "tiny_star_path"])
def test_a_checkpoint_is_scored_on_its_own_threads(checkpoint, request):
    path = request.getfixturevalue(checkpoint)
    calls = []
    outside = torch.get_num_threads()
    card = score_checkpoint(path, datasets=TINY_DATASETS, n_estimators=1, device="cpu", threads=1,
                            progress=lambda done, total, what: calls.append((done, total, what, torch.get_num_threads())))
    assert torch.get_num_threads() == outside
    model = "EquiTabPFN" if "equi" in checkpoint else "TabPFN*"
    assert card.model == model and card.folds is None and card.settings["n_estimators"] == 1
    assert len(card.scores) == 2 * 2 * 5 and set(card.scores.method) == {model, "LogisticRegression"}
    assert card.scores.accuracy.between(0, 1).all()
    assert [c.name for c in card.measured] == ["iris", "wine"]
    assert [done for done, *_ in calls] == list(range(11)) and {total for _, total, *_ in calls} == {10}
    assert calls[0][2] == "iris fold 0" and all(threads == 1 for *_, threads in calls[:-1])
    # the frame's numbers are the table's
    lr = card.scores[(card.scores.task == "iris") & (card.scores.method == "LogisticRegression")].accuracy.mean()
    assert card.bundled_table().loc["iris", "LogisticRegression"] == pytest.approx(lr)


def test_bad_input_is_a_clear_error(tmp_path, tiny_equi_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        score_checkpoint(tmp_path / "missing.pt", datasets=TINY_DATASETS)
    (tmp_path / "notes.pt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        score_checkpoint(tmp_path / "notes.pt", datasets=TINY_DATASETS)
    with pytest.raises(InvalidInputError, match="threads must be a positive number"):
        score_checkpoint(tiny_equi_path, threads=0)
    with pytest.raises(InvalidInputError, match="folds must be in 0..9"):
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
