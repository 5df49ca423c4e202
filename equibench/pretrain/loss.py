"""The pretraining loss: cross-entropy on the test rows of prior datasets."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..prior import PriorBatch


def masked_test_loss(logits: torch.Tensor, y_test: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the test rows of the datasets kept by ``loss_mask``."""
    # logits: (B, M, K), y_test: (B, M), loss_mask: (B,) -> scalar
    per_row = F.cross_entropy(logits.float().transpose(1, 2), y_test, reduction="none")  # (B, M)
    per_dataset = per_row.mean(dim=1)
    weights = loss_mask.to(per_dataset.dtype)
    return (per_dataset * weights).sum() / weights.sum().clamp(min=1.0)


def forward_batch(model: nn.Module, batch: PriorBatch) -> torch.Tensor:
    """Logits of the test rows of a prior batch, (B, M, K)."""
    n = batch.n_train
    return model(batch.x[:, :n], batch.y[:, :n], batch.x[:, n:], batch.n_classes)


def batch_loss(model: nn.Module, batch: PriorBatch) -> torch.Tensor:
    """The training loss of ``model`` on a prior batch (a scalar)."""
    return masked_test_loss(forward_batch(model, batch), batch.y[:, batch.n_train:], batch.loss_mask)
