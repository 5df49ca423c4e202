"""Synthetic classification prior for pretraining (the TabPFN v1 / MotherNet prior).

A batch holds B datasets of R rows that share one class count K and one train/test split
point. Each dataset independently (probability ``1 - gp_fraction``) comes from a random MLP
structural causal model, otherwise from a Gaussian process with an RBF kernel:

* MLP-SCM: layer count and hidden width are drawn once per batch (so the batch runs as
  batched matmuls); weight std, noise std, weight sparsity (Bernoulli dropout or
  block-diagonal), activation, number of causes and causal/direct mode are drawn per
  dataset. Random causes go through the net with Gaussian noise after every hidden layer.
  Causal mode reads the features and the target from random hidden nodes; direct mode uses
  the causes as features and a scalar output head as target.
* GP: features uniform in [0, 1]; target drawn from an RBF-kernel GP (Cholesky in float64)
  whose length scale is relative to ``sqrt(n_features)``.

With probability ``tree_fraction`` a dataset's target is then replaced by a sum of random
axis-aligned decision trees over its own features (splits at feature values of random rows,
Gaussian leaf values, a little noise): the threshold structure that real tables often have
and smooth MLP/GP functions lack (TabICL and TabPFN v2 add tree-based SCMs for this).

The continuous target is cut into K classes at K-1 distinct random ranks (every class gets
rows) and the class ids are randomly permuted. With probability ``categorical_batch_prob`` a
batch turns a random share of each dataset's features into categoricals; optionally values go
missing completely at random. Features are then normalised with the train rows' statistics
(``equibench.normalize``), rescaled by ``f_max / n_features`` and zero padded to ``f_max``.

Per-batch scalars come from a numpy generator and the large tensors from a torch generator
on ``device``, both seeded from the caller's generator: the same seed gives the same batch.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

import numpy as np
import torch

from .model.config import F_MAX, dataclass_from_dict
from .normalize import apply_normalization, fit_normalization, rescale_by_used_features

_ACTIVATIONS = ("tanh", "identity", "relu")
_GP_JITTERS = (1e-6, 1e-5, 1e-4, 1e-3)
_MLP_CHUNKS = 2


@dataclass(frozen=True)
class PriorConfig:
    """Every knob of the prior. Defaults follow the TabPFN v1 prior (SPEC §3).

    Per batch: K = 2 with probability ``p_binary``, else uniform in {2..max_classes}; the
    split point is uniform in [ceil(min_train_fraction * rows), floor(max_train_fraction * rows)].
    Per dataset: features used uniform in {1..f_max}. ``*_range`` fields are ``(low, high)`` log-uniform ranges. Layer count, hidden width and
    cause count follow TabPFN's "meta gamma": ``min + round(Gamma(a, mean / a))`` with
    ``a = exp(U(0, ln max_alpha))`` and ``mean ~ U(0, max_mean)``, clipped at the max.
    """

    rows: int = 1152
    min_train_fraction: float = 0.1
    max_train_fraction: float = 0.9
    f_max: int = F_MAX
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
    activations: tuple[str, ...] = _ACTIVATIONS
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

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"PriorConfig.{f.name} must be a positive integer, got {value!r}")
            if f.type == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                      or not math.isfinite(value)):
                raise ValueError(f"PriorConfig.{f.name} must be a finite number, got {value!r}")
        for name in (
            "p_binary", "gp_fraction", "categorical_batch_prob", "nan_prob", "per_node_noise_prob",
            "blockwise_dropout_prob", "causal_prob", "y_is_effect_prob", "tree_fraction",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"PriorConfig.{name} is a probability in [0, 1], got {getattr(self, name)!r}")
        for name in ("weight_std_range", "noise_std_range", "dropout_beta_range",
                     "gp_lengthscale_range", "gp_noise_std_range"):
            value = getattr(self, name)
            if (not isinstance(value, tuple) or len(value) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
                    or not 0.0 < value[0] <= value[1] or not math.isfinite(value[1])):
                raise ValueError(
                    f"PriorConfig.{name} must be a (low, high) pair with 0 < low <= high, got {value!r}"
                )
        for name in ("mlp_layers_max_alpha", "mlp_width_max_alpha", "mlp_causes_max_alpha"):
            if not getattr(self, name) >= 1.0:
                raise ValueError(f"PriorConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("mlp_layers_max_mean", "mlp_width_max_mean", "mlp_causes_max_mean"):
            if not getattr(self, name) >= 0.0:
                raise ValueError(f"PriorConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        for low, high in (("mlp_min_layers", "mlp_max_layers"), ("mlp_min_width", "mlp_max_width"),
                          ("mlp_min_causes", "mlp_max_causes")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"PriorConfig.{low} ({getattr(self, low)}) must be <= {high} ({getattr(self, high)})"
                )
        if self.mlp_min_layers < 2:
            raise ValueError(f"PriorConfig.mlp_min_layers must be >= 2, got {self.mlp_min_layers}")
        if self.max_classes < 2:
            raise ValueError(f"PriorConfig.max_classes must be >= 2, got {self.max_classes}")
        if self.categorical_max_levels < 2:
            raise ValueError(
                f"PriorConfig.categorical_max_levels must be >= 2, got {self.categorical_max_levels}"
            )
        if not self.categorical_mean_levels > 0:
            raise ValueError(
                f"PriorConfig.categorical_mean_levels must be > 0, got {self.categorical_mean_levels!r}"
            )
        if not 0.0 < self.nan_max_fraction <= 1.0:
            raise ValueError(f"PriorConfig.nan_max_fraction must be in (0, 1], got {self.nan_max_fraction!r}")
        if not 0.0 <= self.dropout_scale < 1.0:
            raise ValueError(f"PriorConfig.dropout_scale must be in [0, 1), got {self.dropout_scale!r}")
        if not 0.0 < self.min_train_fraction <= self.max_train_fraction < 1.0:
            raise ValueError(
                "PriorConfig needs 0 < min_train_fraction <= max_train_fraction < 1, got "
                f"{self.min_train_fraction!r} and {self.max_train_fraction!r}"
            )
        if self.rows <= self.max_classes:
            raise ValueError(
                f"PriorConfig.rows ({self.rows}) must exceed max_classes ({self.max_classes})"
            )
        low, high = _split_bounds(self)
        if low > high:
            raise ValueError(
                f"PriorConfig train fractions [{self.min_train_fraction}, {self.max_train_fraction}] "
                f"leave no split point with at least one train and one test row among {self.rows} rows"
            )
        acts = self.activations
        if (not isinstance(acts, tuple) or not acts or len(set(acts)) != len(acts)
                or not set(acts) <= set(_ACTIVATIONS)):
            raise ValueError(
                f"PriorConfig.activations must be distinct names among {_ACTIVATIONS}, got {acts!r}"
            )

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


def _split_bounds(config: PriorConfig) -> tuple[int, int]:
    low = max(1, math.ceil(config.min_train_fraction * config.rows))
    high = min(config.rows - 1, math.floor(config.max_train_fraction * config.rows))
    return low, high


def _meta_gamma(rng: np.random.Generator, max_alpha: float, max_mean: float, size=None):
    shape = np.exp(rng.uniform(0.0, math.log(max_alpha), size))
    mean = rng.uniform(0.0, max_mean, size)
    return rng.gamma(shape, mean / shape)


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float], size: int) -> np.ndarray:
    return np.exp(rng.uniform(math.log(bounds[0]), math.log(bounds[1]), size))


class _Net(NamedTuple):
    """Per-dataset draws of one group of MLP-SCM datasets."""

    weight_std: torch.Tensor  # (b,)
    noise_std: torch.Tensor  # (b,)
    dropout: torch.Tensor  # (b,)
    per_node_noise: torch.Tensor  # (b,) bool
    blockwise: np.ndarray  # (b,) bool
    activations: list[tuple[str, int, int]]  # (name, first, stop): datasets grouped by activation


def _draw_net(config: PriorConfig, b: int, rng: np.random.Generator, device: torch.device) -> _Net:
    lo, hi = config.dropout_beta_range
    dropout = config.dropout_scale * rng.beta(rng.uniform(lo, hi, b), rng.uniform(lo, hi, b))
    kinds = np.sort(rng.integers(len(config.activations), size=b))
    edges = np.searchsorted(kinds, np.arange(len(config.activations) + 1))

    def tensor(values: np.ndarray, dtype=torch.float32) -> torch.Tensor:
        return torch.as_tensor(values, dtype=dtype, device=device)

    return _Net(
        weight_std=tensor(_log_uniform(rng, config.weight_std_range, b)),
        noise_std=tensor(_log_uniform(rng, config.noise_std_range, b)),
        dropout=tensor(dropout),
        per_node_noise=tensor(rng.random(b) < config.per_node_noise_prob, torch.bool),
        blockwise=rng.random(b) < config.blockwise_dropout_prob,
        activations=[(name, int(edges[i]), int(edges[i + 1])) for i, name in enumerate(config.activations)],
    )


def _random_linear(
    net: _Net, in_active: np.ndarray, out_active: np.ndarray, d_in: int, d_out: int, sparsify: bool,
    rng: np.random.Generator, gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sparse weights per dataset; outputs beyond ``out_active`` stay zero.

    Block-wise datasets get a block-diagonal weight matrix, the others Bernoulli dropout
    (only when ``sparsify``); weights are scaled up by ``1 / sqrt(kept share)``.
    """
    # in_active, out_active: (b,) -> weight (b, d_in, d_out), bias (b, 1, d_out)
    device = net.weight_std.device
    b = len(in_active)
    max_blocks = np.ceil(np.sqrt(np.minimum(in_active, out_active))).astype(np.int64)
    n_blocks = np.where(net.blockwise, rng.integers(1, max_blocks + 1), 1)
    in_block, out_block = in_active // n_blocks, out_active // n_blocks
    block_keep = n_blocks * in_block * out_block / (in_active * out_active)

    def block_ids(size: np.ndarray, d: int, outside: int) -> torch.Tensor:
        # unit j of dataset i is in block j // size[i]; ``outside`` past the last block
        ids = torch.arange(d, device=device)[None] // torch.as_tensor(size, device=device)[:, None]
        return ids.masked_fill(ids >= torch.as_tensor(n_blocks, device=device)[:, None], outside)

    out_ids = block_ids(out_block, d_out, -1)
    mask = block_ids(in_block, d_in, -2)[:, :, None] == out_ids[:, None, :]  # (b, d_in, d_out)
    keep = torch.as_tensor(block_keep, dtype=torch.float32, device=device)
    if sparsify:
        drop = torch.where(torch.as_tensor(net.blockwise, device=device), 0.0, net.dropout)
        mask &= torch.rand(b, d_in, d_out, generator=gen, device=device) >= drop[:, None, None]
        keep = keep * (1.0 - drop)
    scale = torch.where(mask, (net.weight_std / keep.sqrt())[:, None, None], 0.0)
    weight = torch.randn(b, d_in, d_out, generator=gen, device=device).mul_(scale)
    bias = torch.rand(b, 1, d_out, generator=gen, device=device).mul_(2).sub_(1)
    out_units = torch.arange(d_out, device=device)[None] < torch.as_tensor(out_active, device=device)[:, None]
    bias_scale = out_units / torch.as_tensor(in_active, dtype=torch.float32, device=device).sqrt()[:, None]
    return weight, bias.mul_(bias_scale[:, None, :])


def _hidden_layer(
    net: _Net, h: torch.Tensor, in_widths: np.ndarray, out_widths: np.ndarray, d_out: int,
    rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """activation -> sparse linear -> Gaussian noise; dataset i uses its first
    ``in_widths[i]`` inputs and ``out_widths[i]`` outputs."""
    # h: (b, R, d_in) pre-activation, overwritten -> (b, R, d_out)
    b, rows, d_in = h.shape
    for name, first, stop in net.activations:
        if name == "tanh":
            h[first:stop].tanh_()
        elif name == "relu":
            h[first:stop].clamp_(min=0.0)
    weight, bias = _random_linear(net, in_widths, out_widths, d_in, d_out, True, rng, gen)
    out = torch.baddbmm(bias, h, weight)
    active = torch.arange(d_out, device=h.device)[None] < torch.as_tensor(out_widths, device=h.device)[:, None]
    node_std = torch.where(
        net.per_node_noise[:, None], torch.randn(b, d_out, generator=gen, device=h.device).abs(), 1.0)
    noise_std = net.noise_std[:, None] * node_std * active  # (b, d_out)
    return out.addcmul_(torch.randn(b, rows, d_out, generator=gen, device=h.device), noise_std[:, None, :])


def _mlp_structure(config: PriorConfig, rng: np.random.Generator) -> tuple[int, int]:
    """Layer count and hidden width, shared by all MLP-SCM datasets of a batch."""
    n_layers = config.mlp_min_layers + round(
        _meta_gamma(rng, config.mlp_layers_max_alpha, config.mlp_layers_max_mean))
    width = config.mlp_min_width + round(_meta_gamma(rng, config.mlp_width_max_alpha, config.mlp_width_max_mean))
    return int(min(n_layers, config.mlp_max_layers)), int(min(width, config.mlp_max_width))


def _sample_mlp(
    config: PriorConfig, n_features: np.ndarray, causal: bool, structure: tuple[int, int],
    rng: np.random.Generator, gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Datasets from random MLP structural causal models, all in causal or all in direct mode.

    Direct mode: the causes are the features and a scalar head on the last layer the target.
    Causal mode: target and features are distinct random nodes of hidden layers 1..L-1 (with
    probability ``y_is_effect_prob`` the target is the last node), and each hidden layer has
    at least ``2 * n_features + 1`` units.
    """
    # n_features: (b,) -> x (b, R, f_max) zero beyond n_features, y (b, R)
    device = gen.device
    b, rows = len(n_features), config.rows
    n_layers, width = structure
    if causal:
        n_causes = np.minimum(config.mlp_max_causes, config.mlp_min_causes + np.round(
            _meta_gamma(rng, config.mlp_causes_max_alpha, config.mlp_causes_max_mean, b))).astype(np.int64)
        widths = np.maximum(width, 2 * n_features + 1)
    else:
        n_causes, widths = n_features, np.full(b, width)
    net = _draw_net(config, b, rng, device)
    d_in, d_hidden = int(n_causes.max()), int(widths.max())
    widths_t = torch.as_tensor(widths, device=device)
    used = torch.arange(config.f_max, device=device)[None] < torch.as_tensor(n_features, device=device)[:, None]

    # causes: per-cause mean N(0, 1) and std |N(0, 1) * mean|
    cause_mean = torch.randn(b, 1, d_in, generator=gen, device=device)
    cause_std = (torch.randn(b, 1, d_in, generator=gen, device=device) * cause_mean).abs()
    cause_active = torch.arange(d_in, device=device)[None] < torch.as_tensor(n_causes, device=device)[:, None]
    causes = torch.randn(b, rows, d_in, generator=gen, device=device).mul_(cause_std).add_(cause_mean)
    causes.mul_(cause_active[:, None, :])  # (b, R, C)

    weight, bias = _random_linear(net, n_causes, widths, d_in, d_hidden, False, rng, gen)
    h = torch.baddbmm(bias, causes, weight)  # (b, R, W)
    if not causal:
        for _ in range(n_layers - 1):
            h = _hidden_layer(net, h, widths, widths, d_hidden, rng, gen)
        y = _hidden_layer(net, h, widths, np.ones(b, dtype=np.int64), 1, rng, gen)[..., 0]
        return torch.nn.functional.pad(causes, (0, config.f_max - d_in)), y

    # distinct random nodes: the first is the target, the next n_features the features;
    # the very last node (reserved for "y is effect") is never picked
    n_pick = int(n_features.max()) + 1
    scores = torch.rand(b, n_layers - 1, d_hidden, generator=gen, device=device)
    scores = scores.masked_fill(torch.arange(d_hidden, device=device) >= widths_t[:, None, None], -1.0)
    scores[torch.arange(b, device=device), -1, widths_t - 1] = -1.0
    picked = scores.flatten(1).topk(n_pick, dim=1).indices  # (b, n_pick)
    picked_layer, picked_unit = picked // d_hidden, picked % d_hidden
    nodes = torch.zeros(b, rows, n_pick, device=device)
    for index in range(n_layers - 1):
        h = _hidden_layer(net, h, widths, widths, d_hidden, rng, gen)
        values = h.gather(2, picked_unit[:, None, :].expand(b, rows, n_pick))
        nodes = torch.where((picked_layer == index)[:, None, :], values, nodes)
    effect = h.gather(2, (widths_t - 1)[:, None, None].expand(b, rows, 1))[..., 0]  # (b, R)
    y_is_effect = torch.as_tensor(rng.random(b) < config.y_is_effect_prob, device=device)
    x = torch.nn.functional.pad(nodes[..., 1:], (0, config.f_max - (n_pick - 1)))
    return x * used[:, None, :], torch.where(y_is_effect[:, None], effect, nodes[..., 0])


def _sample_gp(
    config: PriorConfig, n_features: np.ndarray, rng: np.random.Generator, gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Datasets from a Gaussian process with an RBF kernel on uniform features.

    The squared distance is divided by ``n_features``, so the length scale does not depend
    on the dimension; the Cholesky factor is computed in float64 with growing jitter.
    """
    # n_features: (g,) -> x (g, R, f_max), y (g, R); y is NaN where Cholesky failed
    device = gen.device
    g, rows = len(n_features), config.rows
    used = torch.as_tensor(n_features, device=device)
    x = torch.rand(g, rows, config.f_max, generator=gen, device=device)
    x = x * (torch.arange(config.f_max, device=device) < used[:, None])[:, None, :]
    lengthscale = torch.as_tensor(_log_uniform(rng, config.gp_lengthscale_range, g), device=device)
    noise = torch.as_tensor(_log_uniform(rng, config.gp_noise_std_range, g), device=device)
    xd = x.double()
    sq_norm = xd.square().sum(dim=2)
    sq_dist = torch.baddbmm(sq_norm[:, :, None] + sq_norm[:, None, :], xd, xd.transpose(1, 2), alpha=-2.0)
    kernel = sq_dist.clamp_(min=0.0).div_((-2 * lengthscale.square() * used)[:, None, None]).exp_()  # (g, R, R)
    diagonal = kernel.diagonal(dim1=1, dim2=2)
    diagonal.add_(noise.square()[:, None])
    added = 0.0
    for jitter in _GP_JITTERS:
        diagonal.add_(jitter - added)
        added = jitter
        chol, info = torch.linalg.cholesky_ex(kernel)
        if not bool((info != 0).any()):
            break
    z = torch.randn(g, rows, 1, generator=gen, device=device, dtype=torch.float64)
    y = (chol @ z)[..., 0].float()
    return x, y.masked_fill((info != 0)[:, None], math.nan)


def _tree_targets(
    x: torch.Tensor, n_features: torch.Tensor, config: PriorConfig, rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """Sum of random axis-aligned trees of one depth: node splits on a random used feature at
    that feature's value in a random row; leaves hold N(0, 1) values; plus Gaussian noise of a
    log-uniform share (``noise_std_range``) of the target's spread."""
    # x: (b, R, F) finite raw features, n_features: (b,) -> (b, R)
    device = x.device
    b, rows, _ = x.shape
    depth = int(rng.integers(1, config.tree_max_depth + 1))
    n_trees = int(rng.integers(1, config.tree_max_trees + 1))
    n_nodes = 2**depth - 1
    feature = (torch.rand(b, n_trees, n_nodes, generator=gen, device=device) * n_features[:, None, None]).long()
    split_row = torch.randint(0, rows, (b, n_trees, n_nodes), generator=gen, device=device)
    datasets = torch.arange(b, device=device)[:, None, None]
    threshold = x[datasets, split_row, feature]  # (b, T, nodes)
    columns = x[:, None].expand(b, n_trees, rows, x.shape[2])  # (b, T, R, F), a view
    node = torch.zeros(b, n_trees, rows, dtype=torch.int64, device=device)
    for _ in range(depth):
        value = columns.gather(3, feature.gather(2, node)[..., None])[..., 0]  # (b, T, R)
        node = 2 * node + 1 + (value > threshold.gather(2, node)).long()
    leaves = torch.randn(b, n_trees, 2**depth, generator=gen, device=device)
    y = leaves.gather(2, node - n_nodes).sum(dim=1)  # (b, R)
    noise = torch.as_tensor(_log_uniform(rng, config.noise_std_range, b), dtype=y.dtype, device=device)
    spread = y.std(dim=1, keepdim=True).clamp(min=1e-6)
    return y + torch.randn(b, rows, generator=gen, device=device) * noise[:, None] * spread


def _categorize_(
    x: torch.Tensor, used: torch.Tensor, config: PriorConfig, rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """Turn a random share of each dataset's features into categoricals: cut at random row
    values into a few levels and give the levels a random order."""
    # x: (B, R, F), used: (B, F) bool -> x
    device = x.device
    batch, rows, f = x.shape
    share = torch.as_tensor(rng.random(batch), device=device, dtype=torch.float32)
    convert = (torch.rand(batch, f, generator=gen, device=device) < share[:, None]) & used  # (B, F)
    levels_np = np.round(rng.exponential(config.categorical_mean_levels, (batch, f)))
    levels = torch.as_tensor(np.clip(levels_np, 2, config.categorical_max_levels).astype(np.int64), device=device)
    n_cuts = config.categorical_max_levels - 1
    columns = x.transpose(1, 2).contiguous()  # (B, F, R)
    cut_rows = torch.randint(0, rows, (batch, f, n_cuts), generator=gen, device=device)
    cuts = columns.gather(2, cut_rows)
    cuts = cuts.masked_fill(torch.arange(n_cuts, device=device) >= (levels - 1)[..., None], math.inf)
    level = torch.searchsorted(cuts.sort(dim=2).values, columns)  # (B, F, R) in [0, levels)
    order_scores = torch.rand(batch, f, config.categorical_max_levels, generator=gen, device=device)
    order_scores = order_scores.masked_fill(
        torch.arange(config.categorical_max_levels, device=device) >= levels[..., None], math.inf)
    code = order_scores.argsort(dim=2).gather(2, level).to(x.dtype)
    return torch.where(convert[:, None, :], code.transpose(1, 2), x)


def _assign_classes(y_cont: torch.Tensor, n_classes: int, gen: torch.Generator) -> torch.Tensor:
    """Cut the target at ``n_classes - 1`` distinct random ranks and permute the class ids."""
    # y_cont: (B, R) -> y: (B, R) int64
    device = y_cont.device
    batch, rows = y_cont.shape
    shuffle = torch.rand(batch, rows, generator=gen, device=device).argsort(dim=1)  # random tie-break
    order = shuffle.gather(1, y_cont.gather(1, shuffle).argsort(dim=1, stable=True))
    positions = torch.arange(rows, device=device).expand(batch, rows)
    rank = torch.empty_like(order).scatter_(1, order, positions)
    cuts = torch.rand(batch, rows - 1, generator=gen, device=device).topk(n_classes - 1, dim=1).indices + 1
    ordered = torch.searchsorted(cuts.sort(dim=1).values, rank, right=True)
    permutation = torch.rand(batch, n_classes, generator=gen, device=device).argsort(dim=1)
    return permutation.gather(1, ordered)


def _classes_seen_in_train(y: torch.Tensor, n_train: int, n_classes: int) -> torch.Tensor:
    """True for datasets whose test classes all occur among their train rows."""
    # y: (B, R) -> (B,) bool
    ones = torch.ones_like(y)
    train = torch.zeros(y.shape[0], n_classes, dtype=y.dtype, device=y.device).scatter_add_(
        1, y[:, :n_train], ones[:, :n_train])
    test = torch.zeros_like(train).scatter_add_(1, y[:, n_train:], ones[:, n_train:])
    return ~((test > 0) & (train == 0)).any(dim=1)


def _chunks_by_features(slots: np.ndarray, n_features: np.ndarray) -> list[np.ndarray]:
    """Split datasets into ``_MLP_CHUNKS`` groups of similar feature counts, so that the
    padded width of each batched MLP (at least ``2 * n_features + 1`` in causal mode) wastes
    little work."""
    return np.array_split(slots[np.argsort(n_features[slots], kind="stable")], _MLP_CHUNKS)


@torch.no_grad()
def sample_batch(
    config: PriorConfig, batch_size: int, generator: torch.Generator, device: str | torch.device = "cpu",
) -> PriorBatch:
    """Sample ``batch_size`` datasets of ``config.rows`` rows on ``device``.

    The MLP/GP choice is made per dataset. Datasets whose MLP overflowed to non-finite values
    are zeroed and masked out of the loss, like those with a test class unseen in train.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    device = torch.device(device)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(rng.integers(2**62)))
    rows, f_max = config.rows, config.f_max

    n_classes = 2 if rng.random() < config.p_binary else int(rng.integers(2, config.max_classes + 1))
    n_train = int(rng.integers(*_split_bounds(config), endpoint=True))
    n_features_np = rng.integers(1, f_max + 1, size=batch_size)
    is_gp = rng.random(batch_size) < config.gp_fraction
    is_causal = rng.random(batch_size) < config.causal_prob
    structure = _mlp_structure(config, rng)
    groups = [(functools.partial(_sample_mlp, causal=causal, structure=structure), chunk)
              for causal in (True, False)
              for chunk in _chunks_by_features(np.flatnonzero(~is_gp & (is_causal == causal)), n_features_np)]
    groups.append((_sample_gp, np.flatnonzero(is_gp)))

    x = torch.empty(batch_size, rows, f_max, device=device)
    y_cont = torch.empty(batch_size, rows, device=device)
    for sampler, slots in groups:
        if len(slots):
            slots = rng.permutation(slots)  # the MLP groups datasets by activation: decorrelate
            index = torch.as_tensor(slots, device=device)
            x_part, y_part = sampler(config, n_features_np[slots], rng=rng, gen=gen)
            x.index_copy_(0, index, x_part)
            y_cont.index_copy_(0, index, y_part)

    n_features = torch.as_tensor(n_features_np, dtype=torch.int64, device=device)
    used = torch.arange(f_max, device=device)[None] < n_features[:, None]  # (B, F)
    finite = torch.isfinite(x).flatten(1).all(dim=1) & torch.isfinite(y_cont).all(dim=1)
    if not bool(finite.all()):
        x = torch.where(finite[:, None, None], x, 0.0)
        y_cont = torch.where(finite[:, None], y_cont, 0.0)
    if config.tree_fraction > 0:
        trees = torch.as_tensor(np.flatnonzero(rng.random(batch_size) < config.tree_fraction), device=device)
        if len(trees):
            y_cont[trees] = _tree_targets(x[trees], n_features[trees], config, rng, gen)
    # z-scores do not depend on a column's scale; bringing |x| <= 1 keeps float32 squares finite
    x = x / x.abs().amax(dim=1, keepdim=True).clamp(min=torch.finfo(x.dtype).tiny)

    if rng.random() < config.categorical_batch_prob:
        x = _categorize_(x, used, config, rng, gen)
    if config.nan_prob > 0:
        rate = rng.uniform(0.0, config.nan_max_fraction, batch_size) * (rng.random(batch_size) < config.nan_prob)
        rate_t = torch.as_tensor(rate, dtype=torch.float32, device=device)
        missing = (torch.rand(x.shape, generator=gen, device=device) < rate_t[:, None, None]) & used[:, None, :]
        x = x.masked_fill(missing, math.nan)

    mean, std = fit_normalization(x[:, :n_train])
    x = rescale_by_used_features(apply_normalization(x, mean, std), n_features, f_max)
    x = torch.where(used[:, None, :], x, 0.0)

    y = _assign_classes(y_cont, n_classes, gen)
    loss_mask = _classes_seen_in_train(y, n_train, n_classes) & finite
    return PriorBatch(x=x, y=y, n_train=n_train, n_classes=n_classes, n_features=n_features, loss_mask=loss_mask)
