"""The 9-point toy: its problem and the panels of an equivariant and a non-equivariant model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from equibench.baselines.settings import MethodOptions
from equibench.equivariance.toy import (
    TOY_ORDERINGS,
    differs_from_identity,
    method_toy,
    toy_predictions,
    toy_problem,
)
from equibench.model import load_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = (DATA / "tiny-equitabpfn.pt", DATA / "tiny-tabpfn-star.pt")


def test_toy_problem_is_one_class_per_grid_point():
    x_train, y_train, mesh = toy_problem(5)
    assert x_train.shape == (9, 2) and list(y_train) == list(range(9)) and mesh.shape == (25, 2)
    assert {tuple(point) for point in x_train} == {(x, y) for x in range(3) for y in range(3)}
    assert list(x_train[5]) == [2.0, 1.0]  # class 3 * row + column: row 1, column 2


def test_nine_point_toy_panels_agree_only_for_equitabpfn():
    orderings = list(TOY_ORDERINGS.values())
    equi, star = (load_checkpoint(path)[0] for path in TINY)
    assert np.array_equal(toy_predictions(equi, 12, orderings[0]), toy_predictions(equi, 12, orderings[2]))
    assert not np.array_equal(toy_predictions(star, 12, orderings[0]), toy_predictions(star, 12, orderings[2]))


def test_differs_from_identity_in_percent():
    identity = np.zeros((2, 2), dtype=int)
    one_changed = identity.copy()
    one_changed[1, 0] = 3
    assert differs_from_identity({"m": [identity, one_changed, identity]}) == {"m": [0.0, 25.0, 0.0]}


def test_registry_methods_join_the_toy_or_are_named_with_why(monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    predictions, skipped = method_toy(("decision-tree", "tabpfn-v1"), MethodOptions(), grid=5)
    assert list(predictions) == ["DecisionTree"] and [panel.shape for panel in predictions["DecisionTree"]] == [(5, 5)] * 3
    assert list(skipped) == ["TabPFNv1 (ECOC >10)"] and skipped["TabPFNv1 (ECOC >10)"].startswith("no weights")
    for panel in predictions["DecisionTree"]:  # mesh points 1..3 per side are the training points: their own class
        assert panel[1:4, 1:4].ravel().tolist() == list(range(9))
