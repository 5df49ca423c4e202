"""Tests of the feature post-processing (equibench.prior.features): normalisation, missing values, categoricals."""

from __future__ import annotations

import torch

from equibench.normalize import OUTLIER_Z
from equibench.prior import PriorConfig


def test_train_rows_normalised_and_padding_zero(draw):
    for seed in range(6):
        batch = draw(batch_size=16, seed=seed)
        assert bool(torch.isfinite(batch.x).all())
        for i in range(16):
            n_features = int(batch.n_features[i])
            assert bool((batch.x[i, :, n_features:] == 0).all())
            # undo the f_max / n_features rescaling to get the z-scores back
            z = batch.x[i, :batch.n_train, :n_features] * n_features / PriorConfig().f_max
            assert float(z.mean(dim=0).abs().max()) < 0.5
            assert float(z.std(dim=0, unbiased=False).max()) < 2.0
            # squashing bounds |z| by OUTLIER_Z + log1p(|z| - OUTLIER_Z) for any float32 input
            assert float(z.abs().max()) < OUTLIER_Z + 30


def test_no_nan_by_default_and_nan_when_injection_enabled(draw):
    for seed in range(4):
        assert not bool(torch.isnan(draw(seed=seed).x).any())
    config = PriorConfig(rows=96, nan_prob=1.0)
    batch = draw(config, batch_size=16)
    nan = torch.isnan(batch.x)
    assert bool(nan.any())
    used = torch.arange(config.f_max)[None] < batch.n_features[:, None]  # (B, F)
    assert not bool((nan & ~used[:, None, :]).any()), "padding must stay zero, never NaN"
    assert bool((batch.x[~nan] == batch.x[~nan]).all())


def test_categorical_batches_have_few_levels(draw):
    config = PriorConfig(rows=200, categorical_batch_prob=1.0, categorical_max_levels=6)
    batch = draw(config, batch_size=16)
    n_categorical = 0
    for i in range(16):
        for j in range(int(batch.n_features[i])):
            n_categorical += len(torch.unique(batch.x[i, :, j])) <= config.categorical_max_levels
    assert n_categorical > 0
