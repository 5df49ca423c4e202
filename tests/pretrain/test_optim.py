"""Learning-rate schedules and the schedule-free evaluation weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from equibench.model import build_model, size_config
from equibench.pretrain.loss import batch_loss
from equibench.pretrain.optim import build_optimizer, decay_start, evaluation_weights, lr_factor, wsd_factor
from equibench.prior import sample_batch

from .common import PRIOR, tiny_config


def test_learning_rate_schedule():
    factors = [lr_factor(step, 10, 110) for step in range(110)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0) and factors[60] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:])) and factors[-1] < 0.01


def test_warmup_stable_decay_schedule():
    factors = [wsd_factor(step, 10, 110, 0.2) for step in range(110)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert decay_start(110, 0.2) == 88 and set(factors[10:88]) == {1.0}
    assert all(a > b for a, b in zip(factors[88:], factors[89:])) and factors[-1] == 0.0
    assert factors[88] == pytest.approx(1 - np.sqrt(1 / 22))  # the 1 - sqrt cool-down


def test_schedule_free_evaluation_weights_restore_the_training_weights_exactly():
    torch.manual_seed(0)
    model = build_model("equitabpfn", size_config("tiny"))
    optimizer, _ = build_optimizer(model, tiny_config(schedule="schedule-free", lr=1e-2), torch.device("cpu"))
    batch = sample_batch(PRIOR, 8, torch.Generator().manual_seed(3))
    for _ in range(3):
        optimizer.zero_grad()
        batch_loss(model, batch).backward()
        optimizer.step()
    training = [p.detach().clone() for p in model.parameters()]
    with evaluation_weights(model, optimizer):
        averaged = [p.detach().clone() for p in model.parameters()]
    assert any(not torch.equal(a, t) for a, t in zip(averaged, training))  # the average differs
    assert all(torch.equal(p, t) for p, t in zip(model.parameters(), training))  # restored bit for bit
