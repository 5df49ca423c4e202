"""The training loop: optimizer steps on a stream of prior batches, reporting each step to a
callback (logging, validation, checkpoints, the time limit live there)."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import NonFiniteLossError
from ..prior import PriorBatch, PriorConfig, sample_batch
from .config import TrainConfig, prior_at
from .distributed import Distributed
from .loss import batch_loss
from .optim import current_lr
from .prefetch import drawn_ahead


@dataclass
class Counters:
    """What a run has done so far (saved with its state)."""

    step: int = 0
    datasets_seen: int = 0
    wall_time_s: float = 0.0  # training and validation, over all invocations


def prior_batches(prior: PriorConfig, config: TrainConfig, generator: torch.Generator, device,
                  first_step: int) -> Iterator[PriorBatch]:
    """The training stream from ``first_step`` on: ``config.grad_accumulation`` batches per
    step, of that step's prior (rows curriculum), drawn from the CPU ``generator``: on
    ``device`` in this process, or on the CPU by ``config.prior_workers`` worker processes
    (:mod:`.prefetch`; close the iterator to stop them)."""
    priors = (prior_at(step, prior, config.rows_curriculum)  # the prior of each batch
              for step in itertools.count(first_step) for _ in range(config.grad_accumulation))
    if config.prior_workers:
        return drawn_ahead(priors, config.batch_size, generator, device, config.prior_workers)
    return (sample_batch(step_prior, config.batch_size, generator, device) for step_prior in priors)


def train(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler, batches: Iterator[PriorBatch],
          config: TrainConfig, counters: Counters, on_step: Callable[[dict], bool], ddp: Distributed,
          autocast: AbstractContextManager | None = None) -> None:
    """Train ``model`` from ``counters.step`` to ``config.steps`` on ``batches``. After each
    step, ``on_step`` gets its log record and returns whether to stop here. Raises
    NonFiniteLossError (before the optimizer step) when the loss is NaN or infinite."""
    trained = ddp.wrap(model)
    accumulation = config.grad_accumulation
    model.train()
    for step in range(counters.step + 1, config.steps + 1):
        started, cpu_started = time.perf_counter(), time.process_time()
        prior_seconds, step_loss = 0.0, 0.0
        optimizer.zero_grad(set_to_none=True)
        for micro in range(accumulation):
            prior_started = time.perf_counter()
            batch = next(batches)
            prior_seconds += time.perf_counter() - prior_started
            with ddp.no_sync(trained, micro == accumulation - 1), autocast or nullcontext():
                loss = batch_loss(trained, batch)
            (loss / accumulation).backward()
            step_loss += loss.item() / accumulation
        if ddp.any(not math.isfinite(step_loss)):
            raise NonFiniteLossError(
                f"step {step}: the training loss is {step_loss} (diverged); the last checkpoint is kept: "
                f"lower the learning rate (now `lr={config.lr:g}`) and start a new run"
            )
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        lr = current_lr(optimizer, scheduler)
        optimizer.step()
        scheduler.step()
        seconds = time.perf_counter() - started
        step_datasets = config.batch_size * accumulation * ddp.world_size
        counters.step, counters.wall_time_s = step, counters.wall_time_s + seconds
        counters.datasets_seen += step_datasets
        record = {
            "kind": "step", "step": step, "loss": step_loss, "lr": lr, "grad_norm": float(grad_norm),
            "n_classes": batch.n_classes, "rows": batch.x.shape[1], "seconds": seconds,
            "cpu_seconds": time.process_time() - cpu_started, "datasets_per_s": step_datasets / seconds,
            "prior_share": prior_seconds / seconds, "datasets_seen": counters.datasets_seen,
        }
        if on_step(record):
            return
