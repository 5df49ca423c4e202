"""Tests of PriorConfig (equibench.prior.config): serialisation and validation."""

from __future__ import annotations

import json

import pytest

from equibench.prior import PriorConfig


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
    (dict(outlier_prob=1.5), "outlier_prob"),
    (dict(feature_counts="normal"), "feature_counts"),
    (dict(outlier_max_fraction=0.0), "outlier_max_fraction"),
    (dict(outlier_scale_range=(10.0, 2.0)), "outlier_scale_range"),
])
def test_config_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        PriorConfig(**changes)
