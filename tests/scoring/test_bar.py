"""The bar's arithmetic: each criterion at its threshold, fold means before margins, parts not
measured; criteria as data; the reference models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from equibench.errors import InvalidInputError
from equibench.scoring.bar import COLUMNS, Criterion, evaluate_criteria
from equibench.scoring.references import reference_model


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


def test_unscored_parts_are_not_measured():
    criteria = evaluate_criteria(frame(bundled={"iris": (0.96, 0.96)}), "EquiTabPFN")
    assert [c.name for c in criteria] == ["iris", "<=10-class median", "<=10-class mean", ">10-class mean"]
    assert all(c.measured is None and c.met is None and "no OpenML cache" in c.note for c in criteria[1:])
    assert criteria[1].line() == "<=10-class median: not measured (no OpenML cache given)"
    # a cache without > 10-class tasks leaves only that criterion unmeasured
    only_small = evaluate_criteria(frame(bundled={"iris": (0.96, 0.96)}, small={"t": (0.9, 0.8)}), "EquiTabPFN")
    assert [c.name for c in only_small if c.measured is None] == [">10-class mean"]
    assert "no task of > 10 classes" in only_small[-1].note


def test_a_criterion_is_plain_data_and_back():
    criteria = evaluate_criteria(frame(bundled={"iris": (0.96, 0.95)}, small={"t": (0.9, 0.8)}), "EquiTabPFN")
    assert [Criterion.from_dict(criterion.to_dict()) for criterion in criteria] == criteria
    assert criteria[0].line() == "iris: +1.00 points vs LogisticRegression (bar >= -1.0): met"
    assert criteria[2].line() == "<=10-class mean: +10.00 points vs KNN (bar > 0.0): met"


def test_the_reference_models_standardise_and_one_hot_encode():
    knn = reference_model("KNN")
    assert isinstance(knn[-1], KNeighborsClassifier) and knn[-1].n_neighbors == 9
    X = pd.DataFrame({"colour": ["red", "blue", "red", np.nan], "size": [1.0, 2.0, np.nan, 4.0]})
    linear = reference_model("LinearModel", np.array([True, False])).fit(X, [0, 1, 0, 1])
    assert isinstance(linear[-1], LogisticRegression) and linear[:-1].transform(X).shape == (4, 3)
    with pytest.raises(InvalidInputError, match="unknown reference model 'SVM'"):
        reference_model("SVM")
