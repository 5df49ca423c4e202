"""A one-line description of the hardware, for model cards and benchmark records."""

from __future__ import annotations

import platform
from contextlib import suppress
from pathlib import Path

import torch


def cpu_name() -> str:
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def hardware_description(device: torch.device) -> str:
    """GPU name for CUDA devices, else the CPU model and torch's thread count."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA)"
    threads = torch.get_num_threads()
    return f"{cpu_name()}, {threads} thread{'' if threads == 1 else 's'}"
