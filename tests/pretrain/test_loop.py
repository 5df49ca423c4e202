"""The step loop: its prior stream and its per-step callback."""

from __future__ import annotations

import torch

from equibench.model import build_model, size_config
from equibench.pretrain import pretrain
from equibench.pretrain.distributed import Distributed
from equibench.pretrain.loop import Counters, prior_batches, train
from equibench.pretrain.optim import build_optimizer

from .common import PRIOR, log_records, tiny_config


def test_same_data_stream_for_both_architectures(tmp_path):
    """The controlled comparison: both models see identical prior batches."""
    for arch in ("equitabpfn", "tabpfn-star"):
        pretrain(tiny_config(arch=arch, steps=3), PRIOR, tmp_path / arch, progress=False)
    classes = [[r.get("n_classes") for r in log_records(tmp_path / arch)] for arch in ("equitabpfn", "tabpfn-star")]
    assert classes[0] == classes[1]


def test_the_callback_sees_every_step_and_can_stop_the_loop():
    config = tiny_config(steps=5, grad_accumulation=2, rows_curriculum=((2, 48),))
    torch.manual_seed(0)
    model = build_model(config.arch, size_config(config.size))
    optimizer, scheduler = build_optimizer(model, config, torch.device("cpu"))
    batches = prior_batches(PRIOR, config, torch.Generator().manual_seed(0), "cpu", first_step=1)
    counters, records = Counters(), []

    def on_step(record: dict) -> bool:
        records.append(record)
        return record["step"] == 3

    train(model, optimizer, scheduler, batches, config, counters, on_step, Distributed(torch.device("cpu")))
    assert [r["step"] for r in records] == [1, 2, 3] and [r["rows"] for r in records] == [96, 48, 48]
    assert counters.step == 3 and counters.datasets_seen == records[-1]["datasets_seen"] == 3 * 3 * 2
    assert counters.wall_time_s == sum(r["seconds"] for r in records)
