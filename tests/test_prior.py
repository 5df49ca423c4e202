"""Tests of the synthetic prior (equibench.prior) and its preview figure."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn.tree import DecisionTreeRegressor

from equibench.normalize import OUTLIER_Z
from equibench.prior import PriorBatch, PriorConfig, _tree_targets, sample_batch
from equibench.prior_preview import preview_prior

SMALL = PriorConfig(rows=96)


def draw(config: PriorConfig = SMALL, batch_size: int = 8, seed: int = 0, device="cpu") -> PriorBatch:
    return sample_batch(config, batch_size, torch.Generator().manual_seed(seed), device=device)


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


def test_shapes_dtypes_and_ranges():
    for seed in range(4):
        check_batch(draw(seed=seed), SMALL, 8)
    config = PriorConfig(rows=11, f_max=3)  # smallest rows for 10 classes, tiny f_max
    for seed in range(8):
        check_batch(draw(config, batch_size=5, seed=seed), config, 5)
    check_batch(draw(batch_size=1), SMALL, 1)


def test_train_rows_normalised_and_padding_zero():
    for seed in range(6):
        batch = draw(batch_size=16, seed=seed)
        assert bool(torch.isfinite(batch.x).all())
        for i in range(16):
            n_features = int(batch.n_features[i])
            assert bool((batch.x[i, :, n_features:] == 0).all())
            # undo the f_max / n_features rescaling to get the z-scores back
            z = batch.x[i, :batch.n_train, :n_features] * n_features / SMALL.f_max
            assert float(z.mean(dim=0).abs().max()) < 0.5
            assert float(z.std(dim=0, unbiased=False).max()) < 2.0
            # squashing bounds |z| by OUTLIER_Z + log1p(|z| - OUTLIER_Z) for any float32 input
            assert float(z.abs().max()) < OUTLIER_Z + 30


def test_class_count_distribution():
    config = PriorConfig(rows=16, f_max=4)
    ks = [draw(config, batch_size=1, seed=seed).n_classes for seed in range(400)]
    expected = 0.5 + 0.5 / 9
    assert abs(sum(k == 2 for k in ks) / len(ks) - expected) < 0.08
    assert set(ks) == set(range(2, 11))


def test_feature_count_distribution_covers_one_to_f_max():
    batch = draw(PriorConfig(rows=12), batch_size=3000)
    counts = torch.bincount(batch.n_features, minlength=101)
    assert int(counts[0]) == 0 and bool((counts[1:] > 0).all())
    assert abs(float(batch.n_features.float().mean()) - 50.5) < 2.5


def test_same_seed_same_batch_and_different_seed_different_batch():
    first, second, other = draw(seed=7), draw(seed=7), draw(seed=8)
    for a, b in zip(first, second):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert not torch.equal(first.x, other.x)
    # a generator that keeps going gives new batches
    generator = torch.Generator().manual_seed(7)
    assert not torch.equal(sample_batch(SMALL, 8, generator).x, sample_batch(SMALL, 8, generator).x)


def test_loss_mask_flags_exactly_the_datasets_with_test_classes_unseen_in_train():
    # few rows, few train rows and many classes: many datasets miss a class in train
    config = PriorConfig(rows=24, p_binary=0.0, min_train_fraction=0.1, max_train_fraction=0.4)
    n_masked = n_kept = 0
    for seed in range(10):
        batch = draw(config, batch_size=16, seed=seed)
        for i in range(16):
            train = set(batch.y[i, :batch.n_train].tolist())
            test = set(batch.y[i, batch.n_train:].tolist())
            unseen = bool(test - train)
            if bool(batch.loss_mask[i]):
                assert not unseen
                n_kept += 1
            else:
                # masked: an unseen test class, or an MLP that overflowed (zeroed features)
                assert unseen or bool((batch.x[i] == 0).all())
                n_masked += 1
    assert n_masked > 0 and n_kept > 0


def test_no_nan_by_default_and_nan_when_injection_enabled():
    for seed in range(4):
        assert not bool(torch.isnan(draw(seed=seed).x).any())
    config = PriorConfig(rows=96, nan_prob=1.0)
    batch = draw(config, batch_size=16)
    nan = torch.isnan(batch.x)
    assert bool(nan.any())
    used = torch.arange(config.f_max)[None] < batch.n_features[:, None]  # (B, F)
    assert not bool((nan & ~used[:, None, :]).any()), "padding must stay zero, never NaN"
    assert bool((batch.x[~nan] == batch.x[~nan]).all())


@pytest.mark.parametrize("changes", [dict(gp_fraction=1.0), dict(causal_prob=1.0), dict(causal_prob=0.0),
                                     dict(activations=("relu",)), dict(blockwise_dropout_prob=1.0),
                                     dict(tree_fraction=1.0)])
def test_each_prior_component_alone(changes):
    config = PriorConfig(rows=64, **changes)
    for seed in range(3):
        batch = draw(config, seed=seed)
        check_batch(batch, config, 8)
        assert bool(torch.isfinite(batch.x).all())


def test_tree_targets_are_axis_aligned_trees_over_the_used_features():
    config = PriorConfig(rows=64, tree_max_depth=2, tree_max_trees=1, noise_std_range=(1e-9, 1e-9))
    x = torch.randn(2, 64, 6, generator=torch.Generator().manual_seed(0))
    n_features = torch.tensor([6, 3])

    def targets(x):
        return _tree_targets(x, n_features, config, np.random.default_rng(0), torch.Generator().manual_seed(1))

    y = targets(x)
    for dataset in range(2):
        assert len(torch.unique(y[dataset].round(decimals=5))) <= 4  # one tree of depth <= 2: <= 4 leaves
        used = x[dataset, :, : int(n_features[dataset])].numpy()
        fit = DecisionTreeRegressor(max_depth=4).fit(used, y[dataset].numpy())
        assert fit.score(used, y[dataset].numpy()) > 0.999  # axis-aligned: a greedy small tree recovers it
    unused_changed = x.clone()
    unused_changed[1, :, 3:] = 100.0  # dataset 1 uses 3 features: the others never matter
    assert torch.equal(targets(unused_changed)[1], y[1])


def test_tree_fraction_zero_keeps_the_v1_prior_and_one_changes_every_target():
    v1, explicit_zero = draw(PriorConfig(rows=96), seed=3), draw(PriorConfig(rows=96, tree_fraction=0.0), seed=3)
    assert torch.equal(v1.x, explicit_zero.x) and torch.equal(v1.y, explicit_zero.y)
    trees, again = draw(PriorConfig(rows=96, tree_fraction=1.0), seed=3), draw(PriorConfig(rows=96, tree_fraction=1.0), seed=3)
    assert torch.equal(trees.y, again.y)  # seeded
    assert not torch.equal(trees.y, v1.y)


def test_categorical_batches_have_few_levels():
    config = PriorConfig(rows=200, categorical_batch_prob=1.0, categorical_max_levels=6)
    batch = draw(config, batch_size=16)
    n_categorical = 0
    for i in range(16):
        for j in range(int(batch.n_features[i])):
            n_categorical += len(torch.unique(batch.x[i, :, j])) <= config.categorical_max_levels
    assert n_categorical > 0


def test_config_to_dict_roundtrip_and_json():
    config = PriorConfig(rows=128, weight_std_range=(0.1, 2.0))
    data = config.to_dict()
    json.dumps(data)
    assert PriorConfig.from_dict(data) == config
    assert data["f_max"] == 100 and data["max_classes"] == 10 and data["rows"] == 128
    with pytest.raises(ValueError, match="unknown PriorConfig fields"):
        PriorConfig.from_dict({**data, "bogus": 1})


@pytest.mark.parametrize("changes, match", [
    (dict(rows=0), "rows"),
    (dict(rows=10), "rows"),
    (dict(f_max=2.5), "f_max"),
    (dict(max_classes=1), "max_classes"),
    (dict(p_binary=1.5), "p_binary"),
    (dict(gp_fraction=-0.1), "gp_fraction"),
    (dict(nan_prob=2), "nan_prob"),
    (dict(tree_fraction=-0.1), "tree_fraction"),
    (dict(tree_max_depth=0), "tree_max_depth"),
    (dict(min_train_fraction=0.0), "min_train_fraction"),
    (dict(min_train_fraction=0.8, max_train_fraction=0.2), "min_train_fraction"),
    (dict(weight_std_range=(12.0, 0.01)), "weight_std_range"),
    (dict(noise_std_range=(0.0, 0.5)), "noise_std_range"),
    (dict(gp_lengthscale_range=(1.0,)), "gp_lengthscale_range"),
    (dict(mlp_min_layers=1), "mlp_min_layers"),
    (dict(mlp_min_width=10, mlp_max_width=5), "mlp_min_width"),
    (dict(mlp_layers_max_alpha=0.5), "mlp_layers_max_alpha"),
    (dict(activations=("tanh", "gelu")), "activations"),
    (dict(activations=()), "activations"),
    (dict(categorical_max_levels=1), "categorical_max_levels"),
    (dict(dropout_scale=1.0), "dropout_scale"),
    (dict(nan_max_fraction=0.0), "nan_max_fraction"),
])
def test_config_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        PriorConfig(**changes)


def test_batch_size_validation():
    with pytest.raises(ValueError, match="batch_size"):
        draw(batch_size=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batch():
    batch = draw(device="cuda")
    assert batch.x.device.type == "cuda" and batch.y.device.type == "cuda"
    check_batch(PriorBatch(*(t.cpu() if isinstance(t, torch.Tensor) else t for t in batch)), SMALL, 8)
    again = draw(device="cuda")
    assert torch.equal(batch.x, again.x)


def test_preview_writes_png(tmp_path):
    path = preview_prior(tmp_path / "sub" / "prior.png", config=PriorConfig(rows=64), seed=1, n_batches=5)
    assert path == tmp_path / "sub" / "prior.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000
