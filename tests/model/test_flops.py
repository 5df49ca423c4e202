"""Each network's FLOPs (its ``forward_flops``) against PyTorch's own count of the matrix products."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from equibench.model import build_model, size_config


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
def test_the_estimate_counts_every_matrix_product(arch):
    config = size_config("tiny", norm_first=True)
    model = build_model(arch, config)
    rows, n_train, n_classes = 40, 25, 3
    x, y = torch.randn(2, rows, 7), torch.randint(0, n_classes, (2, n_train))
    # the math attention is made of counted matrix products; the fused kernels are not counted on the CPU
    with sdpa_kernel(SDPBackend.MATH):
        with torch.no_grad(), FlopCounterMode(display=False) as forward:
            model(x[:, :n_train], y, x[:, n_train:], n_classes)
        with FlopCounterMode(display=False) as step:
            model(x[:, :n_train], y, x[:, n_train:], n_classes).sum().backward()
    assert model.forward_flops(rows, n_train, n_classes) == forward.get_total_flops() / 2
    assert model.training_flops(rows, n_train, n_classes) == pytest.approx(step.get_total_flops() / 2, rel=0.1)


@pytest.mark.parametrize(("arch", "size", "forward", "training"), [
    ("equitabpfn", "tiny", 2295201792, 420321600), ("tabpfn-star", "tiny", 343343104, 159744000),
    ("equitabpfn", "small", 32228507648, 8235854400), ("tabpfn-star", "small", 4116447232, 2536243200)])
def test_the_counts_of_the_named_sizes_stay_put(arch, size, forward, training):
    """The MFU of docs/BENCHMARKS.md rests on these: forward on 1024 rows (512 train) and 10
    classes, a training step on 300 rows (200 train) and 3 classes."""
    model = build_model(arch, size_config(size))
    assert (model.forward_flops(1024, 512, 10), model.training_flops(300, 200, 3)) == (forward, training)
