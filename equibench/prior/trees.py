"""Targets from random axis-aligned decision trees (the threshold structure of real tables)."""

from __future__ import annotations

import numpy as np
import torch

from .config import PriorConfig
from .draws import log_uniform


def tree_targets(
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
    noise = torch.as_tensor(log_uniform(rng, config.noise_std_range, b), dtype=y.dtype, device=device)
    spread = y.std(dim=1, keepdim=True).clamp(min=1e-6)
    return y + torch.randn(b, rows, generator=gen, device=device) * noise[:, None] * spread
