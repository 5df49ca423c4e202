"""Tests of the tree targets (equibench.prior.trees)."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.tree import DecisionTreeRegressor

from equibench.prior import PriorConfig
from equibench.prior.trees import tree_targets


def test_tree_targets_are_axis_aligned_trees_over_the_used_features():
    config = PriorConfig(rows=64, tree_max_depth=2, tree_max_trees=1, noise_std_range=(1e-9, 1e-9))
    x = torch.randn(2, 64, 6, generator=torch.Generator().manual_seed(0))
    n_features = torch.tensor([6, 3])

    def targets(x):
        return tree_targets(x, n_features, config, np.random.default_rng(0), torch.Generator().manual_seed(1))

    y = targets(x)
    for dataset in range(2):
        assert len(torch.unique(y[dataset].round(decimals=5))) <= 4  # one tree of depth <= 2: <= 4 leaves
        used = x[dataset, :, : int(n_features[dataset])].numpy()
        fit = DecisionTreeRegressor(max_depth=4).fit(used, y[dataset].numpy())
        assert fit.score(used, y[dataset].numpy()) > 0.999  # axis-aligned: a greedy small tree recovers it
    unused_changed = x.clone()
    unused_changed[1, :, 3:] = 100.0  # dataset 1 uses 3 features: the others never matter
    assert torch.equal(targets(unused_changed)[1], y[1])


def test_tree_fraction_zero_keeps_the_v1_prior_and_one_changes_every_target(draw):
    v1, explicit_zero = draw(PriorConfig(rows=96), seed=3), draw(PriorConfig(rows=96, tree_fraction=0.0), seed=3)
    assert torch.equal(v1.x, explicit_zero.x) and torch.equal(v1.y, explicit_zero.y)
    trees, again = draw(PriorConfig(rows=96, tree_fraction=1.0), seed=3), draw(PriorConfig(rows=96, tree_fraction=1.0), seed=3)
    assert torch.equal(trees.y, again.y)  # seeded
    assert not torch.equal(trees.y, v1.y)
