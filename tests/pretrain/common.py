"""What the pretraining tests share: a tiny CPU run and its step losses."""

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
