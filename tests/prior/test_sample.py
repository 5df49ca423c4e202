"""Tests of sample_batch (equibench.prior.sample): shapes, distributions, seeding, components."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from equibench.prior import PriorBatch, PriorConfig, sample_batch
from equibench.prior.sample import feature_counts

SMALL = PriorConfig(rows=96)  # the draw fixture's default


def check_batch(batch: PriorBatch, config: PriorConfig, batch_size: int) -> None:
    rows, f_max = config.rows, config.f_max
    assert batch.x.shape == (batch_size, rows, f_max) and batch.x.dtype == torch.float32
    assert batch.y.shape == (batch_size, rows) and batch.y.dtype == torch.int64
    assert batch.n_features.shape == (batch_size,) and batch.n_features.dtype == torch.int64
    assert batch.loss_mask.shape == (batch_size,) and batch.loss_mask.dtype == torch.bool
    assert isinstance(batch.n_train, int) and isinstance(batch.n_classes, int)
    assert math.ceil(config.min_train_fraction * rows) <= batch.n_train <= math.floor(config.max_train_fraction * rows)
    assert 2 <= batch.n_classes <= config.max_classes
    assert int(batch.y.min()) >= 0 and int(batch.y.max()) < batch.n_classes
    assert int(batch.n_features.min()) >= 1 and int(batch.n_features.max()) <= f_max
    # the K-1 cuts sit at distinct ranks, so every class has rows in every dataset
    counts = torch.nn.functional.one_hot(batch.y, batch.n_classes).sum(dim=1)
    assert bool((counts > 0).all())


def test_shapes_dtypes_and_ranges(draw):
    for seed in range(4):
        check_batch(draw(seed=seed), SMALL, 8)
    config = PriorConfig(rows=11, f_max=3)  # smallest rows for 10 classes, tiny f_max
    for seed in range(8):
        check_batch(draw(config, batch_size=5, seed=seed), config, 5)
    check_batch(draw(batch_size=1), SMALL, 1)


def test_class_count_distribution(draw):
    config = PriorConfig(rows=16, f_max=4)
    ks = [draw(config, batch_size=1, seed=seed).n_classes for seed in range(400)]
    expected = 0.5 + 0.5 / 9
    assert abs(sum(k == 2 for k in ks) / len(ks) - expected) < 0.08
    assert set(ks) == set(range(2, 11))


def test_feature_count_distribution_covers_one_to_f_max(draw):
    batch = draw(PriorConfig(rows=12), batch_size=3000)
    counts = torch.bincount(batch.n_features, minlength=101)
    assert int(counts[0]) == 0 and bool((counts[1:] > 0).all())
    assert abs(float(batch.n_features.float().mean()) - 50.5) < 2.5


def test_log_uniform_feature_counts_give_small_tables_half_the_datasets():
    config = PriorConfig(rows=12, feature_counts="log-uniform")
    counts = feature_counts(config, 20_000, np.random.default_rng(0))
    assert counts.min() == 1 and counts.max() <= config.f_max and counts.dtype == np.int64
    assert abs(float((counts <= 9).mean()) - np.log(10) / np.log(101)) < 0.015  # 1-9 as often as 10-100
    assert abs(float((counts == 1).mean()) - np.log(2) / np.log(101)) < 0.01
    uniform = feature_counts(PriorConfig(rows=12), 5, np.random.default_rng(1))
    assert np.array_equal(uniform, np.random.default_rng(1).integers(1, 101, size=5))  # the v1 draw, unchanged


def test_same_seed_same_batch_and_different_seed_different_batch(draw):
    first, second, other = draw(seed=7), draw(seed=7), draw(seed=8)
    for a, b in zip(first, second):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert not torch.equal(first.x, other.x)
    # a generator that keeps going gives new batches
    generator = torch.Generator().manual_seed(7)
    assert not torch.equal(sample_batch(SMALL, 8, generator).x, sample_batch(SMALL, 8, generator).x)


@pytest.mark.parametrize("changes", [dict(gp_fraction=1.0), dict(causal_prob=1.0), dict(causal_prob=0.0),
                                     dict(activations=("relu",)), dict(blockwise_dropout_prob=1.0),
                                     dict(tree_fraction=1.0), dict(outlier_prob=1.0)])
def test_each_prior_component_alone(changes, draw):
    config = PriorConfig(rows=64, **changes)
    for seed in range(3):
        batch = draw(config, seed=seed)
        check_batch(batch, config, 8)
        assert bool(torch.isfinite(batch.x).all())


def test_batch_size_validation(draw):
    with pytest.raises(ValueError, match="batch_size"):
        draw(batch_size=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batch(draw):
    batch = draw(device="cuda")
    assert batch.x.device.type == "cuda" and batch.y.device.type == "cuda"
    check_batch(PriorBatch(*(t.cpu() if isinstance(t, torch.Tensor) else t for t in batch)), SMALL, 8)
    again = draw(device="cuda")
    assert torch.equal(batch.x, again.x)
