"""The prior's knobs (:class:`PriorConfig`, validated on construction) and its output (:class:`PriorBatch`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import torch

from ..errors import InvalidInputError
from ..model.config import F_MAX, dataclass_from_dict

ACTIVATIONS = ("tanh", "identity", "relu")
FEATURE_COUNTS = ("uniform", "log-uniform")


@dataclass(frozen=True)
class PriorConfig:
    """Every knob of the prior. Defaults follow the TabPFN v1 prior (Hollmann et al. 2023) that the EquiTabPFN paper trains on.

    Per batch: K = 2 with probability ``p_binary``, else uniform in {2..max_classes}; the
    split point is uniform in [ceil(min_train_fraction * rows), floor(max_train_fraction * rows)].
    Per dataset: features used uniform in {1..f_max}, or with ``feature_counts="log-uniform"``
    ``floor(exp(U(0, ln(f_max + 1))))`` (as many datasets with 1-9 features as with 10-100).
    ``*_range`` fields are ``(low, high)`` log-uniform ranges. Layer count, hidden width and
    cause count follow TabPFN's "meta gamma": ``min + round(Gamma(a, mean / a))`` with
    ``a = exp(U(0, ln max_alpha))`` and ``mean ~ U(0, max_mean)``, clipped at the max.
    """

    rows: int = 1152
    min_train_fraction: float = 0.1
    max_train_fraction: float = 0.9
    f_max: int = F_MAX
    feature_counts: str = "uniform"  # one of FEATURE_COUNTS
    max_classes: int = 10
    p_binary: float = 0.5
    gp_fraction: float = 0.04
    # categorical features: per batch, then a per-dataset share U(0, 1) of the features
    categorical_batch_prob: float = 0.2
    categorical_mean_levels: float = 10.0  # levels ~ max(2, round(Exponential(mean)))
    categorical_max_levels: int = 20
    # missing values (completely at random): per dataset, rate ~ U(0, nan_max_fraction)
    nan_prob: float = 0.0
    nan_max_fraction: float = 0.5
    # MLP-SCM structure
    mlp_layers_max_alpha: float = 2.0
    mlp_layers_max_mean: float = 3.0
    mlp_min_layers: int = 2
    mlp_max_layers: int = 10
    mlp_width_max_alpha: float = 3.0
    mlp_width_max_mean: float = 100.0
    mlp_min_width: int = 4
    mlp_max_width: int = 256
    mlp_causes_max_alpha: float = 3.0
    mlp_causes_max_mean: float = 7.0
    mlp_min_causes: int = 2
    mlp_max_causes: int = 64
    activations: tuple[str, ...] = ACTIVATIONS
    # MLP-SCM weights and noise
    weight_std_range: tuple[float, float] = (0.01, 12.0)
    noise_std_range: tuple[float, float] = (1e-4, 0.5)
    per_node_noise_prob: float = 0.5  # noise std per node = noise_std * |N(0, 1)|
    dropout_scale: float = 0.6  # dropout prob = dropout_scale * Beta(a, b)
    dropout_beta_range: tuple[float, float] = (0.1, 5.0)  # a, b ~ U(range)
    blockwise_dropout_prob: float = 0.5
    causal_prob: float = 0.5
    y_is_effect_prob: float = 0.5  # causal mode: target is the last node, else a random one
    # Gaussian process
    gp_lengthscale_range: tuple[float, float] = (0.1, 10.0)
    gp_noise_std_range: tuple[float, float] = (1e-4, 0.3)
    # random axis-aligned trees as the target (0: the v1 prior); depth and count per batch
    tree_fraction: float = 0.0
    tree_max_depth: int = 4
    tree_max_trees: int = 4
    # outlying cells: with probability ``outlier_prob`` a dataset has a share
    # U(0, outlier_max_fraction) of its used cells moved by +-s column standard deviations,
    # s log-uniform in ``outlier_scale_range``, after its target was computed
    outlier_prob: float = 0.0
    outlier_max_fraction: float = 0.05
    outlier_scale_range: tuple[float, float] = (2.0, 10.0)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
        _check(self)

    def to_dict(self) -> dict:
        """Plain JSON-friendly values (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> PriorConfig:
        return dataclass_from_dict(cls, data)


class PriorBatch(NamedTuple):
    """One batch of synthetic datasets; rows ``[:n_train]`` are train rows, the rest test."""

    x: torch.Tensor  # (B, R, f_max) float32, normalised, zero beyond n_features
    y: torch.Tensor  # (B, R) int64 in [0, n_classes)
    n_train: int
    n_classes: int
    n_features: torch.Tensor  # (B,) int64 in [1, f_max]
    loss_mask: torch.Tensor  # (B,) bool; False: a test class is absent from train (or overflow)

    def to(self, device: str | torch.device) -> PriorBatch:
        """The batch with its tensors on ``device``."""
        return self._replace(**{name: getattr(self, name).to(device) for name in ("x", "y", "n_features", "loss_mask")})


def split_bounds(config: PriorConfig) -> tuple[int, int]:
    """Smallest and largest train-row count (inclusive) the split point is drawn from."""
    low = max(1, math.ceil(config.min_train_fraction * config.rows))
    high = min(config.rows - 1, math.floor(config.max_train_fraction * config.rows))
    return low, high


def _is_range(value) -> bool:
    return (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            and 0.0 < value[0] <= value[1] and math.isfinite(value[1]))


def _are_activations(value) -> bool:
    return isinstance(value, tuple) and bool(value) and len(set(value)) == len(value) and set(value) <= set(ACTIVATIONS)


#: What fields must be beyond their type: (fields, test, the requirement as the error states it).
_BOUNDS = (
    (("p_binary", "gp_fraction", "categorical_batch_prob", "nan_prob", "per_node_noise_prob", "blockwise_dropout_prob",
      "causal_prob", "y_is_effect_prob", "tree_fraction", "outlier_prob"), lambda v: 0.0 <= v <= 1.0,
     "is a probability in [0, 1]"),
    (("weight_std_range", "noise_std_range", "dropout_beta_range", "gp_lengthscale_range", "gp_noise_std_range",
      "outlier_scale_range"), _is_range, "must be a (low, high) pair with 0 < low <= high"),
    (("mlp_layers_max_alpha", "mlp_width_max_alpha", "mlp_causes_max_alpha"), lambda v: v >= 1.0, "must be >= 1"),
    (("mlp_layers_max_mean", "mlp_width_max_mean", "mlp_causes_max_mean"), lambda v: v >= 0.0, "must be >= 0"),
    (("mlp_min_layers", "max_classes", "categorical_max_levels"), lambda v: v >= 2, "must be >= 2"),
    (("feature_counts",), FEATURE_COUNTS.__contains__, f"must be one of {list(FEATURE_COUNTS)}"),
    (("categorical_mean_levels",), lambda v: v > 0, "must be > 0"),
    (("nan_max_fraction", "outlier_max_fraction"), lambda v: 0.0 < v <= 1.0, "must be in (0, 1]"),
    (("dropout_scale",), lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
    (("activations",), _are_activations, f"must be distinct names among {ACTIVATIONS}"),
)


def _check(config: PriorConfig) -> None:
    for f in fields(config):
        value = getattr(config, f.name)
        if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise InvalidInputError(f"`{f.name}` must be a positive integer, got {value!r}")
        if f.type == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                  or not math.isfinite(value)):
            raise InvalidInputError(f"`{f.name}` must be a finite number, got {value!r}")
    for names, within, bound in _BOUNDS:
        for name in names:
            if not within(getattr(config, name)):
                raise InvalidInputError(f"`{name}` {bound}, got {getattr(config, name)!r}")
    for low, high in (("mlp_min_layers", "mlp_max_layers"), ("mlp_min_width", "mlp_max_width"),
                      ("mlp_min_causes", "mlp_max_causes")):
        if getattr(config, low) > getattr(config, high):
            raise InvalidInputError(
                f"`{low}` ({getattr(config, low)}) must be <= `{high}` ({getattr(config, high)})"
            )
    if not 0.0 < config.min_train_fraction <= config.max_train_fraction < 1.0:
        raise InvalidInputError(
            "PriorConfig needs 0 < `min_train_fraction` <= `max_train_fraction` < 1, got "
            f"{config.min_train_fraction!r} and {config.max_train_fraction!r}"
        )
    if config.rows <= config.max_classes:
        raise InvalidInputError(f"`rows` ({config.rows}) must exceed `max_classes` ({config.max_classes})")
    low, high = split_bounds(config)
    if low > high:
        raise InvalidInputError(
            f"PriorConfig train fractions [{config.min_train_fraction}, {config.max_train_fraction}] "
            f"leave no split point with at least one train and one test row among {config.rows} rows"
        )
