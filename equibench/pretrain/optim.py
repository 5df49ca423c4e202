"""Optimisers and learning-rate schedules of pretraining.

Three schedules, all after a linear warm-up:

* ``cosine``: cosine decay to 0 at the last step (the paper's); the horizon is fixed. torch's
  ``LinearLR`` then ``CosineAnnealingLR``.
* ``wsd``: warm-up, stable at the peak, then a ``1 - sqrt`` cool-down to 0 over the last
  ``decay_fraction`` of the steps (Hägele et al., 2024). A run may be extended while it has
  not started cooling down. torch has no such cool-down, so a ``LambdaLR`` computes it
  (:func:`wsd_factor`): closed-form, it also follows a horizon changed on resume, where
  ``SequentialLR`` would restore the milestones it saved.
* ``schedule-free``: AdamW without any decay (the ``schedulefree`` package, Defazio et al.,
  2024): the weights used for evaluation are an average the optimiser keeps, so a run can be
  extended at any step.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import schedulefree
import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, LRScheduler, SequentialLR


def decay_start(total_steps: int, decay_fraction: float) -> int:
    """The first step of the ``wsd`` cool-down."""
    return total_steps - round(decay_fraction * total_steps)


def wsd_factor(step: int, warmup_steps: int, total_steps: int, decay_fraction: float) -> float:
    """Linear warm-up, 1 until :func:`decay_start`, then ``1 - sqrt(progress)`` to 0."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    start = decay_start(total_steps, decay_fraction)
    if step < start:
        return 1.0
    return 1.0 - math.sqrt(min(1.0, (step - start + 1) / max(1, total_steps - start)))


def cosine_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int) -> LRScheduler:
    """Linear warm-up to the peak, ``(step + 1) / warmup_steps`` of it, then cosine decay to 0 at
    ``total_steps``."""
    cosine_steps = max(1, total_steps - warmup_steps)
    if not warmup_steps:
        return CosineAnnealingLR(optimizer, cosine_steps)
    warmup = LinearLR(optimizer, start_factor=1 / warmup_steps, total_iters=warmup_steps - 1)
    return SequentialLR(optimizer, [warmup, CosineAnnealingLR(optimizer, cosine_steps)], milestones=[warmup_steps])


def build_optimizer(model: nn.Module, config, device: torch.device):
    """The optimiser and per-step lr scheduler that ``config`` (a ``TrainConfig``) asks for."""
    betas = (0.9, config.adam_beta2)
    if config.schedule == "schedule-free":
        optimizer = schedulefree.AdamWScheduleFree(
            model.parameters(), lr=config.lr, betas=betas, weight_decay=config.weight_decay,
            warmup_steps=config.warmup_steps,
        )
        optimizer.train()
        return optimizer, LambdaLR(optimizer, lambda step: 1.0)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=betas, weight_decay=config.weight_decay,
        fused=device.type == "cuda",
    )
    if config.schedule == "wsd":
        return optimizer, LambdaLR(
            optimizer, lambda step: wsd_factor(step, config.warmup_steps, config.steps, config.decay_fraction))
    return optimizer, cosine_schedule(optimizer, config.warmup_steps, config.steps)


def current_lr(optimizer: torch.optim.Optimizer, scheduler) -> float:
    """The learning rate the next ``optimizer.step()`` uses (schedule-free: with its warm-up)."""
    group = optimizer.param_groups[0]
    if isinstance(optimizer, schedulefree.AdamWScheduleFree):
        return group["lr"] * min(1.0, (group["k"] + 1) / group["warmup_steps"]) if group["warmup_steps"] else group["lr"]
    return scheduler.get_last_lr()[0]


@contextmanager
def evaluation_weights(model: nn.Module, optimizer: torch.optim.Optimizer):
    """Inside, ``model`` holds the weights to evaluate and ship. A schedule-free optimiser
    swaps in its averaged weights; the training weights are restored bit for bit after, so
    evaluating never changes the training trajectory."""
    if not isinstance(optimizer, schedulefree.AdamWScheduleFree):
        yield
        return
    saved = [p.detach().clone() for p in model.parameters()]
    optimizer.eval()
    try:
        yield
    finally:
        optimizer.train()
        with torch.no_grad():
            for parameter, value in zip(model.parameters(), saved):
                parameter.copy_(value)


def extendable_to(config, saved_steps: int, done_steps: int) -> bool:
    """Whether a run saved with ``saved_steps`` total steps (``done_steps`` of them done) may
    continue with ``config.steps`` total steps without changing a learning rate it used."""
    if config.schedule == "schedule-free":
        return True
    if config.schedule == "wsd":
        first_decay = min(decay_start(saved_steps, config.decay_fraction), decay_start(config.steps, config.decay_fraction))
        return done_steps < first_decay
    return False
