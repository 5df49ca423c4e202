from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from equibench.prior import PriorBatch, PriorConfig, sample_batch

SMALL = PriorConfig(rows=96)


@pytest.fixture
def draw() -> Callable[..., PriorBatch]:
    """``draw(config, batch_size, seed, device)``: one batch from a freshly seeded generator."""

    def draw_batch(config: PriorConfig = SMALL, batch_size: int = 8, seed: int = 0, device="cpu") -> PriorBatch:
        return sample_batch(config, batch_size, torch.Generator().manual_seed(seed), device=device)

    return draw_batch
