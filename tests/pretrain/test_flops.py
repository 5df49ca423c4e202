"""The model FLOPs estimate against PyTorch's own count of the matrix products."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from equibench.model import build_model, size_config
from equibench.pretrain.flops import forward_flops, training_flops


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
    assert forward_flops(arch, config, rows, n_train, n_classes) == forward.get_total_flops() / 2
    assert training_flops(arch, config, rows, n_train, n_classes) == pytest.approx(step.get_total_flops() / 2, rel=0.1)
