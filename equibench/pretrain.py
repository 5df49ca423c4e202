"""Pretraining on the synthetic prior: AdamW, linear warm-up then cosine decay, gradient
clipping, cross-entropy on test rows, periodic validation, atomic resumable checkpoints and
multi-process data parallelism (launch with ``torchrun``).

An output directory holds::

    train_state.pt   model, optimizer, scheduler and RNG state (for --resume)
    model.pt         the model in the equibench checkpoint format, with its model card
    log.jsonl        one record per step ({"kind": "step", ...}) and per validation
    config.json      the training and prior configuration
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import shlex
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
import torch.distributed as dist
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import nn

from . import __version__
from .classifier import resolve_device
from .machine import hardware_description
from .model import SIZES, ModelCard, build_model, load_checkpoint, save_checkpoint, size_config
from .model.checkpoint import atomic_torch_save
from .prior import PriorConfig, sample_batch
from .validation import bundled_accuracy, forward_batch, masked_test_loss, prior_metrics, validation_prior_batches

STATE_FILE = "train_state.pt"
MODEL_FILE = "model.pt"
LOG_FILE = "log.jsonl"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a pretraining run besides the prior."""

    arch: str = "equitabpfn"
    size: str = "small"
    steps: int = 1000
    batch_size: int = 8  # datasets per micro-batch and process
    grad_accumulation: int = 1
    lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "auto"
    amp: bool | None = None  # None: bf16 autocast on CUDA, off on CPU
    checkpoint_every: int = 100
    validate_every: int = 200
    validation_batches: int = 8
    bundled_validation: bool = True
    model_overrides: dict = field(default_factory=dict)  # fields of ModelConfig to change
    init_from: str | None = None  # checkpoint whose weights start the run (continued pretraining)

    def __post_init__(self) -> None:
        if self.arch not in ("equitabpfn", "tabpfn-star"):
            raise ValueError(f"arch must be 'equitabpfn' or 'tabpfn-star', got {self.arch!r}")
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {list(SIZES)}, got {self.size!r}")
        for name in ("steps", "batch_size", "grad_accumulation", "checkpoint_every", "validate_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.warmup_steps < 0 or self.validation_batches < 0:
            raise ValueError("warmup_steps and validation_batches must be >= 0")
        if not self.lr > 0 or not self.grad_clip > 0 or self.weight_decay < 0:
            raise ValueError("lr and grad_clip must be > 0 and weight_decay >= 0")
        size_config(self.size, **self.model_overrides)  # validates the overrides


def lr_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up to 1 over ``warmup_steps``, then cosine decay to 0 at ``total_steps``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


class _Distributed:
    """Rank and world size from torchrun's environment; a no-op for one process."""

    def __init__(self, device: torch.device):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.active = self.world_size > 1
        if self.active and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


#: Settings that do not change the training trajectory and may differ on --resume.
_FREE_ON_RESUME = {"device", "checkpoint_every", "validate_every", "validation_batches", "bundled_validation"}


def _changed_settings(saved: dict, current: dict) -> list[str]:
    """The settings of ``current`` that would make a resumed run differ from ``saved``."""
    changed = [
        f"{section}.{key}"
        for section in ("train", "prior", "model")
        for key in sorted(set(saved[section]) | set(current[section]))
        if saved[section].get(key) != current[section].get(key)
        and not (section == "train" and key in _FREE_ON_RESUME)
    ]
    return changed + (["world_size"] if saved["world_size"] != current["world_size"] else [])


def _read_log(path: Path, up_to_step: int) -> list[str]:
    """Log lines of the steps already covered by the checkpoint (later ones were lost)."""
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= up_to_step]


def _initial_weights(config: TrainConfig, model: nn.Module) -> tuple[dict, dict]:
    """Weights and lineage (``{"checkpoint", "steps", "datasets_seen", "wall_time_s", "command"}``)
    of ``config.init_from``, checked against the model this run builds."""
    source, card = load_checkpoint(config.init_from)
    if source.arch != model.arch or source.config != model.config:
        raise ValueError(
            f"--init-from {config.init_from!r} holds a {source.arch} model with {source.config}, but this run "
            f"trains a {model.arch} model with {model.config}; pass the same --arch, --size and overrides"
        )
    lineage = {
        "checkpoint": str(config.init_from), "steps": card.steps, "datasets_seen": card.datasets_seen,
        "wall_time_s": card.wall_time_s, "command": card.command, "training": card.training,
    }
    return source.state_dict(), lineage


class PretrainOutcome(NamedTuple):
    model_path: Path  # model.pt of the last checkpoint
    step: int  # the step it holds
    steps: int  # the run's total

    @property
    def finished(self) -> bool:
        return self.step >= self.steps


def _out_of_time(elapsed_s: float, steps_done: int, time_limit_s: float, ddp: _Distributed, device) -> bool:
    """Whether one more step (at this invocation's mean pace) would end past the limit; every
    process gets the same answer."""
    late = elapsed_s + elapsed_s / steps_done >= time_limit_s
    if not ddp.active:
        return late
    flag = torch.tensor(float(late), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def pretrain(
    config: TrainConfig,
    prior: PriorConfig,
    out_dir: str | os.PathLike,
    resume: bool = False,
    progress: bool = True,
    time_limit_s: float | None = None,
) -> PretrainOutcome:
    """Train (or resume) a model on the prior.

    ``time_limit_s`` stops this invocation early, checkpointed, before a step would end past
    the limit (at the mean pace of its steps so far); ``resume=True`` continues exactly.
    With ``config.init_from`` the run starts from that checkpoint's weights (fresh optimizer
    and schedule); the model card then counts steps, datasets and time over both runs and
    keeps the earlier run's command under ``training["initialised_from"]``."""
    if time_limit_s is not None and not time_limit_s >= 0:
        raise ValueError(f"the time limit must be a non-negative number of seconds, got {time_limit_s!r}")
    out_dir = Path(out_dir)
    device = resolve_device(config.device)
    use_amp = device.type == "cuda" if config.amp is None else config.amp
    ddp = _Distributed(device)
    if ddp.active and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)

    run_description = {
        "train": dataclasses.asdict(config),
        "prior": prior.to_dict(),
        "model": size_config(config.size, **config.model_overrides).to_dict(),
        "world_size": ddp.world_size,
    }
    state_path = out_dir / STATE_FILE
    if resume:
        if not state_path.exists():
            raise FileNotFoundError(
                f"--resume was given but {str(state_path)!r} does not exist; start without --resume"
            )
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        changed = _changed_settings(state["run"], run_description)
        if changed:
            raise ValueError(
                f"cannot resume {str(out_dir)!r}: the settings differ from the saved run in {changed}; "
                "use the same options as the original command, or a new --out directory"
            )
    elif state_path.exists():
        raise FileExistsError(
            f"{str(out_dir)!r} already holds a training run; pass --resume to continue it or choose a new --out"
        )

    torch.manual_seed(config.seed)
    model = build_model(config.arch, size_config(config.size, **config.model_overrides)).to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
        fused=device.type == "cuda",
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, config.warmup_steps, config.steps)
    )
    prior_generator = torch.Generator(device=device).manual_seed(config.seed * 1_000_003 + ddp.rank)
    start_step, datasets_seen, wall_time, metrics = 0, 0, 0.0, {}
    lineage = None
    if config.init_from is not None:
        initial_state, lineage = _initial_weights(config, model)
        if not resume:
            model.load_state_dict(initial_state)
    if resume:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        prior_generator.set_state(state["prior_generators"][ddp.rank])
        start_step, datasets_seen = state["step"], state["datasets_seen"]
        wall_time, metrics = state["wall_time_s"], state["metrics"]

    trained = nn.parallel.DistributedDataParallel(model) if ddp.active else model
    validation_batches = (
        validation_prior_batches(prior, config.validation_batches, config.batch_size, device)
        if ddp.is_main and config.validation_batches else []
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / LOG_FILE
    if ddp.is_main:
        (out_dir / CONFIG_FILE).write_text(json.dumps(run_description, indent=2) + "\n")
        kept = _read_log(log_path, start_step)
        log_path.write_text("".join(line + "\n" for line in kept))
    command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])

    def save(step: int) -> None:
        generators = [prior_generator.get_state()]
        if ddp.active:
            generators = [None] * ddp.world_size
            dist.all_gather_object(generators, prior_generator.get_state())
        if not ddp.is_main:
            return
        atomic_torch_save(
            {
                "run": run_description, "step": step, "datasets_seen": datasets_seen,
                "wall_time_s": wall_time, "metrics": metrics, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "prior_generators": [g.cpu() for g in generators],
            },
            state_path,
        )
        earlier = lineage or {"steps": 0, "datasets_seen": 0, "wall_time_s": 0.0}
        training = {**dataclasses.asdict(config), "world_size": ddp.world_size, "amp": use_amp}
        if lineage is not None:
            training["initialised_from"] = lineage
        card = ModelCard(
            arch=config.arch, size=config.size, prior=prior.to_dict(), training=training,
            steps=earlier["steps"] + step, datasets_seen=earlier["datasets_seen"] + datasets_seen,
            wall_time_s=round(earlier["wall_time_s"] + wall_time, 1),
            hardware=f"{ddp.world_size} x {hardware_description(device)}", metrics=metrics,
            command=command, seed=config.seed, equibench_version=__version__,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
        save_checkpoint(model, out_dir / MODEL_FILE, card)

    def validate(step: int) -> None:
        nonlocal metrics, wall_time
        started = time.perf_counter()
        model.eval()
        metrics = {"step": step}
        if validation_batches:
            metrics.update(prior_metrics(model, validation_batches))
        if config.bundled_validation:
            metrics.update(bundled_accuracy(model, device=device))
        model.train()
        metrics["seconds"] = time.perf_counter() - started
        wall_time += metrics["seconds"]
        with log_path.open("a") as log:
            log.write(json.dumps({"kind": "validation", **metrics}) + "\n")

    columns = [
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.4f}  lr {task.fields[lr]:.2e}  "
                   "{task.fields[rate]:.1f} datasets/s  prior {task.fields[prior_share]:.0%}"),
        TimeElapsedColumn(), TimeRemainingColumn(),
    ]
    bar = Progress(*columns, console=Console(stderr=True), disable=not (progress and ddp.is_main))  # stdout stays for results
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16) if use_amp else nullcontext()
    )
    invocation_started = time.perf_counter()
    if ddp.is_main and start_step == 0:
        validate(0)  # the curves start from the untrained model
    model.train()
    last_step = start_step
    with bar:
        task = bar.add_task(f"{config.arch}-{config.size}", total=config.steps, completed=start_step,
                            loss=float("nan"), lr=scheduler.get_last_lr()[0], rate=0.0, prior_share=0.0)
        for step in range(start_step + 1, config.steps + 1):
            started = time.perf_counter()
            prior_seconds, step_loss = 0.0, 0.0
            optimizer.zero_grad(set_to_none=True)
            for micro in range(config.grad_accumulation):
                prior_started = time.perf_counter()
                batch = sample_batch(prior, config.batch_size, prior_generator, device)
                prior_seconds += time.perf_counter() - prior_started
                last = micro == config.grad_accumulation - 1
                with (trained.no_sync() if ddp.active and not last else nullcontext()), autocast:
                    loss = masked_test_loss(forward_batch(trained, batch), batch.y[:, batch.n_train:], batch.loss_mask)
                (loss / config.grad_accumulation).backward()
                step_loss += loss.item() / config.grad_accumulation
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            seconds = time.perf_counter() - started
            wall_time += seconds
            step_datasets = config.batch_size * config.grad_accumulation * ddp.world_size
            datasets_seen += step_datasets
            record = {
                "kind": "step", "step": step, "loss": step_loss, "lr": lr, "grad_norm": float(grad_norm),
                "n_classes": batch.n_classes, "seconds": seconds, "datasets_per_s": step_datasets / seconds,
                "prior_share": prior_seconds / seconds, "datasets_seen": datasets_seen,
            }
            if ddp.is_main:
                with log_path.open("a") as log:
                    log.write(json.dumps(record) + "\n")
                bar.update(task, completed=step, loss=step_loss, lr=lr, rate=record["datasets_per_s"],
                           prior_share=record["prior_share"])
                if step % config.validate_every == 0 or step == config.steps:
                    validate(step)
            checkpointed = step % config.checkpoint_every == 0 or step == config.steps
            if checkpointed:
                save(step)
            last_step = step
            elapsed = time.perf_counter() - invocation_started
            if time_limit_s is not None and step < config.steps and _out_of_time(
                elapsed, step - start_step, time_limit_s, ddp, device
            ):
                if not checkpointed:
                    save(step)
                break
    ddp.barrier()
    ddp.close()
    return PretrainOutcome(out_dir / MODEL_FILE, last_step, config.steps)
