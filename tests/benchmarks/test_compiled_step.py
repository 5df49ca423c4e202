"""benchmarks/compiled_step.py: the batches it times and the step it times."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from equibench.model import build_model, size_config


@pytest.fixture
def compiled_step(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports recording
    return benchmark_module("compiled_step")


def test_batches_keep_to_the_class_limit_and_repeat_by_seed(compiled_step):
    batches = compiled_step.prior_batches(rows=64, batch_size=2, count=6, max_classes=3, seed=4)
    again = compiled_step.prior_batches(rows=64, batch_size=2, count=6, max_classes=3, seed=4)
    assert len(batches) == 6  # unfiltered, the 6th batch of seed 4 has 5 classes
    assert all(batch.n_classes <= 3 and batch.x.shape[:2] == (2, 64) for batch in batches)
    assert all(torch.equal(a.x, b.x) and torch.equal(a.y, b.y) for a, b in zip(batches, again))


def test_a_timed_step_trains_the_model(compiled_step):
    torch.manual_seed(0)
    model = build_model("equitabpfn", size_config("tiny", n_layers=2, norm_first=True)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = [parameter.detach().clone() for parameter in model.parameters()]
    batch = compiled_step.prior_batches(rows=64, batch_size=2, count=1, max_classes=10, seed=0)[0]
    assert compiled_step.timed_step(model, optimizer, batch) > 0
    assert any(not torch.equal(old, new) for old, new in zip(before, model.parameters()))
