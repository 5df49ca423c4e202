"""The subsampled context above max_train_rows: stratified, every class present."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from equibench import EquiTabPFNClassifier
from equibench.preprocessing import CONTEXT_CLASS_FLOOR, stratified_subsample


def _imbalanced_labels(n=20_000, seed=0):
    rng = np.random.RandomState(seed)
    p = np.array([0.70, 0.22, 0.05, 0.02, 0.008, 0.002])
    return rng.choice(len(p), size=n, p=p)


@pytest.mark.parametrize("n_rows", [3000, 1000, 257])
def test_stratified_subsample_keeps_the_class_proportions(n_rows):
    y = _imbalanced_labels()
    rows = stratified_subsample(y, n_rows, np.random.RandomState(0))
    assert len(rows) == n_rows and len(np.unique(rows)) == n_rows and np.all(np.diff(rows) > 0)
    counts, table = np.bincount(y[rows], minlength=6), np.bincount(y, minlength=6)
    assert counts.min() >= min(CONTEXT_CLASS_FLOOR, table.min())  # every class present, at the floor
    # each class within the floor's effect of its share of the table (the floor takes at most
    # floor x classes rows away from the proportional shares)
    expected = n_rows * table / len(y)
    assert np.all(np.abs(counts - expected) <= CONTEXT_CLASS_FLOOR * len(table) * table / len(y) + CONTEXT_CLASS_FLOOR + 1)


def test_stratified_subsample_edge_cases():
    rng = np.random.RandomState(0)
    y = np.repeat(np.arange(50), 3)
    assert np.array_equal(stratified_subsample(y, 150, rng), np.arange(150))  # all rows: nothing to drop
    few = stratified_subsample(y, 20, rng)  # fewer rows than classes: one row each of 20 classes
    assert len(few) == 20 and len(np.unique(y[few])) == 20
    tight = stratified_subsample(np.r_[np.zeros(1000), np.arange(1, 41)].astype(int), 80, rng)  # 41 classes, 80 rows
    assert len(tight) == 80 and len(np.unique(tight)) == 80
    assert np.array_equal(stratified_subsample(y, 30, np.random.RandomState(3)),
                          stratified_subsample(y, 30, np.random.RandomState(3)))


def test_a_stratified_context_beats_the_class_balanced_one_on_an_imbalanced_table():
    """The old rule (the same quota for every class) shifted predictions toward the rare classes,
    below the majority-class rate; the stratified context keeps the table's prior."""
    rng = np.random.RandomState(0)
    n_classes = 6
    y = rng.choice(n_classes, size=1600, p=[0.6, 0.3] + [0.025] * 4)
    X = rng.normal(size=(n_classes, 4))[y] + rng.normal(size=(1600, 4))
    X_train, y_train, X_test, y_test = X[:1200], y[:1200], X[1200:], y[1200:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stratified = EquiTabPFNClassifier(n_estimators=1, max_train_rows=120, context="subsample", device="cpu").fit(X_train, y_train)
    quota = 120 // n_classes
    balanced_rows = np.sort(np.concatenate([rng.choice(np.flatnonzero(y_train == c), quota, replace=False)
                                            for c in range(n_classes)]))
    balanced = EquiTabPFNClassifier(n_estimators=1, device="cpu").fit(X_train[balanced_rows], y_train[balanced_rows])
    accuracy_stratified = np.mean(stratified.predict(X_test) == y_test)
    accuracy_balanced = np.mean(balanced.predict(X_test) == y_test)
    majority = np.mean(y_test == 0)
    assert accuracy_stratified >= majority > accuracy_balanced + 0.1
