"""Random MLP structural causal models (MLP-SCM), the prior's main source of datasets.

Layer count and hidden width are drawn once per batch (so a group of datasets runs as
batched matmuls); weight std, noise std, weight sparsity (Bernoulli dropout or
block-diagonal), activation, number of causes and causal/direct mode are drawn per dataset.
Random causes go through the net with Gaussian noise after every hidden layer; where the
features and the target are read in each mode: :func:`sample_mlp`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .config import PriorConfig
from .draws import log_uniform, meta_gamma

_MLP_CHUNKS = 2


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
        weight_std=tensor(log_uniform(rng, config.weight_std_range, b)),
        noise_std=tensor(log_uniform(rng, config.noise_std_range, b)),
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


def mlp_structure(config: PriorConfig, rng: np.random.Generator) -> tuple[int, int]:
    """Layer count and hidden width, shared by all MLP-SCM datasets of a batch."""
    n_layers = config.mlp_min_layers + round(
        meta_gamma(rng, config.mlp_layers_max_alpha, config.mlp_layers_max_mean))
    width = config.mlp_min_width + round(meta_gamma(rng, config.mlp_width_max_alpha, config.mlp_width_max_mean))
    return int(min(n_layers, config.mlp_max_layers)), int(min(width, config.mlp_max_width))


def sample_mlp(
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
            meta_gamma(rng, config.mlp_causes_max_alpha, config.mlp_causes_max_mean, b))).astype(np.int64)
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


def chunks_by_features(slots: np.ndarray, n_features: np.ndarray) -> list[np.ndarray]:
    """Split datasets into ``_MLP_CHUNKS`` groups of similar feature counts, so that the
    padded width of each batched MLP (at least ``2 * n_features + 1`` in causal mode) wastes
    little work."""
    return np.array_split(slots[np.argsort(n_features[slots], kind="stable")], _MLP_CHUNKS)
