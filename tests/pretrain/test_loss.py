"""The masked test-row loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from equibench.model import build_model, size_config
from equibench.pretrain.loss import batch_loss, masked_test_loss
from equibench.prior import sample_batch

from .common import PRIOR


@pytest.mark.parametrize("arch", ["equitabpfn", pytest.param("tabpfn-star", marks=pytest.mark.slow)])
def test_training_lowers_the_loss_on_a_fixed_batch(arch):
    torch.manual_seed(0)
    model = build_model(arch, size_config("tiny"))
    batch = sample_batch(PRIOR, 8, torch.Generator().manual_seed(3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = batch_loss(model, batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_masked_datasets_do_not_count():
    logits = torch.zeros(2, 3, 4)
    logits[1] = 100 * torch.nn.functional.one_hot(torch.tensor([1, 1, 1]), 4)
    y = torch.tensor([[0, 0, 0], [1, 1, 1]])
    assert masked_test_loss(logits, y, torch.tensor([False, True])).item() == pytest.approx(0.0, abs=1e-6)
    assert masked_test_loss(logits, y, torch.tensor([True, False])).item() == pytest.approx(np.log(4))
