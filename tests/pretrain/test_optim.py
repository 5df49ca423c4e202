"""Learning-rate schedules and the schedule-free evaluation weights."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from equibench.model import build_model, size_config
from equibench.pretrain.loss import batch_loss
from equibench.pretrain.optim import (
    build_optimizer,
    cosine_schedule,
    decay_start,
    evaluation_weights,
    wsd_factor,
)
from equibench.prior import sample_batch

from .common import PRIOR, tiny_config


def closed_form_cosine(step: int, warmup_steps: int, total_steps: int) -> float:
    """The cosine schedule's factor as equibench computed it before torch did (a LambdaLR)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def _cosine_lrs(warmup_steps: int, total_steps: int, steps: int, lr: float = 1e-3) -> list[float]:
    """The learning rate of each of the first ``steps`` steps under :func:`cosine_schedule`."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    scheduler, lrs = cosine_schedule(optimizer, warmup_steps, total_steps), []
    with warnings.catch_warnings():  # no optimizer steps: the rates alone
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(steps):
            lrs.append(scheduler.get_last_lr()[0])
            scheduler.step()
    return lrs


@pytest.mark.parametrize("warmup_steps, total_steps", [
    (10, 110), (0, 50), (1, 5), (2, 6), (4, 5), (5, 5), (8, 5), (50, 65316),  # the last: a recipe's horizon
])
def test_torchs_cosine_schedule_gives_the_closed_form_learning_rates(warmup_steps, total_steps):
    """LinearLR then CosineAnnealingLR compute each rate from the last: over a recipe's 65,316
    steps they stay within 1e-10 (relative) of the closed form (3.1e-11 measured)."""
    lrs = _cosine_lrs(warmup_steps, total_steps, total_steps)
    for step, lr in enumerate(lrs):
        assert math.isclose(lr, 1e-3 * closed_form_cosine(step, warmup_steps, total_steps), rel_tol=1e-10,
                            abs_tol=1e-20), step
    if warmup_steps == 10:
        assert lrs[0] == pytest.approx(1e-4) and lrs[9] == lrs[10] == pytest.approx(1e-3)
        assert lrs[60] == pytest.approx(5e-4) and all(a >= b for a, b in zip(lrs[10:], lrs[11:])) and lrs[-1] < 1e-5


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
