"""What the pretraining tests share: a tiny CPU run, its step losses, a simulated kill."""

from __future__ import annotations

import json

from equibench.pretrain import TrainConfig
from equibench.prior import PriorConfig

PRIOR = PriorConfig(rows=96)


def tiny_config(**changes) -> TrainConfig:
    """Six steps of the tiny model on the CPU, checkpointed and validated every 3 steps."""
    settings = dict(
        arch="equitabpfn", size="tiny", steps=6, batch_size=3, lr=1e-3, warmup_steps=2,
        checkpoint_every=3, validate_every=3, validation_batches=1, bundled_validation=False, device="cpu",
    )
    return TrainConfig(**{**settings, **changes})


def log_records(out_dir) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]


def step_losses(out_dir) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in log_records(out_dir) if r["kind"] == "step"]


def validation_at(out_dir, step: int) -> dict:
    """The run's validation record of ``step``."""
    return next(r for r in log_records(out_dir) if r["kind"] == "validation" and r["step"] == step)


def kill_during_step(monkeypatch, step: int):
    """Make the prior's ``step``-th batch raise KeyboardInterrupt (a kill mid-step); returns
    the real sampler, to put back before resuming."""
    import equibench.pretrain.loop as loop_module

    real_sample = loop_module.sample_batch
    calls = {"n": 0}

    def dies(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            raise KeyboardInterrupt("simulated kill")
        return real_sample(*args, **kwargs)

    monkeypatch.setattr(loop_module, "sample_batch", dies)
    return real_sample
