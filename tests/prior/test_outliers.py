"""Tests of the outlying cells of the prior (equibench.prior.features, ``outlier_prob``)."""

from __future__ import annotations

import numpy as np
import torch

from equibench.prior import PriorConfig
from equibench.prior.features import _move_outliers


def _moved(x, used, config, seed=0):
    return _move_outliers(x, used, config, np.random.default_rng(seed), torch.Generator().manual_seed(seed))


def test_outliers_move_used_cells_by_the_drawn_multiple_of_their_column_std():
    x = torch.randn(3, 400, 5, generator=torch.Generator().manual_seed(1))
    used = torch.tensor([[True] * 5, [True, True, False, False, False], [True] * 5])
    config = PriorConfig(rows=400, outlier_prob=1.0, outlier_max_fraction=0.5, outlier_scale_range=(4.0, 4.0))
    out = _moved(x, used, config)
    changed = out != x
    assert not changed[1, :, 2:].any()  # padding columns stay as they were
    shift = (out - x) / (4.0 * x.std(dim=1, keepdim=True))
    assert torch.allclose(shift[changed].abs(), torch.ones(()), atol=1e-5)  # +-4 column standard deviations
    share = changed.float().sum(dim=(1, 2)) / (used.sum(dim=1) * 400)
    assert bool((share > 0).all()) and bool((share < 0.55).all())  # U(0, 0.5) of the used cells
    assert torch.equal(out, _moved(x, used, config))  # seeded


def test_outlier_prob_zero_moves_nothing_and_keeps_the_v1_prior(draw):
    x = torch.randn(2, 50, 4, generator=torch.Generator().manual_seed(2))
    used = torch.ones(2, 4, dtype=torch.bool)
    assert torch.equal(_moved(x, used, PriorConfig(rows=50, outlier_prob=0.0)), x)
    v1, explicit_zero = draw(PriorConfig(rows=96), seed=4), draw(PriorConfig(rows=96, outlier_prob=0.0), seed=4)
    assert torch.equal(v1.x, explicit_zero.x) and torch.equal(v1.y, explicit_zero.y)
    with_outliers, again = (draw(PriorConfig(rows=96, outlier_prob=1.0), seed=4) for _ in range(2))
    assert torch.equal(with_outliers.x, again.x) and not torch.equal(with_outliers.x, v1.x)
