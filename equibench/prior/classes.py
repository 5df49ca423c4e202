"""Class assignment from the continuous target, and the classes-seen-in-train loss mask."""

from __future__ import annotations

import torch


def assign_classes(y_cont: torch.Tensor, n_classes: int, gen: torch.Generator) -> torch.Tensor:
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


def classes_seen_in_train(y: torch.Tensor, n_train: int, n_classes: int) -> torch.Tensor:
    """True for datasets whose test classes all occur among their train rows."""
    # y: (B, R) -> (B,) bool
    ones = torch.ones_like(y)
    train = torch.zeros(y.shape[0], n_classes, dtype=y.dtype, device=y.device).scatter_add_(
        1, y[:, :n_train], ones[:, :n_train])
    test = torch.zeros_like(train).scatter_add_(1, y[:, n_train:], ones[:, n_train:])
    return ~((test > 0) & (train == 0)).any(dim=1)
