"""Multi-process data parallelism (launched with ``torchrun``): a no-op for one process."""

from __future__ import annotations

import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn


class Distributed:
    """Rank and world size from torchrun's environment, and the few collectives pretraining uses."""

    def __init__(self, device: torch.device):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.active = self.world_size > 1
        if self.active and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        if self.active and device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        self.device = device  # this process's device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module to train: ``model`` itself, or its DistributedDataParallel wrapper."""
        return nn.parallel.DistributedDataParallel(model) if self.active else model

    def no_sync(self, trained: nn.Module, last_micro_batch: bool):
        """Skip the gradient all-reduce on every micro-batch but the step's last."""
        return trained.no_sync() if self.active and not last_micro_batch else nullcontext()

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any process (every process gets the same answer)."""
        if not self.active:
            return flag
        tensor = torch.tensor(float(flag), device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return bool(tensor.item())

    def gather(self, value) -> list:
        """``value`` of every process, by rank."""
        if not self.active:
            return [value]
        values = [None] * self.world_size
        dist.all_gather_object(values, value)
        return values

    def close(self) -> None:
        """Wait for every process, then leave the process group."""
        if self.active:
            dist.barrier()
            dist.destroy_process_group()
