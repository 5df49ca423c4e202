"""Pretraining on the synthetic prior: AdamW with a cosine, warm-up-stable-decay or
schedule-free learning rate (``equibench.optim``), gradient clipping, cross-entropy on test
rows, an optional short-to-long curriculum of rows per dataset, periodic validation, atomic resumable checkpoints and
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
from .devices import resolve_device
from .errors import NonFiniteLossError
from .machine import hardware_description
from .model import SIZES, ModelCard, build_model, load_checkpoint, save_checkpoint, size_config
from .model.checkpoint import atomic_torch_save
from .optim import SCHEDULES, build_optimizer, current_lr, evaluation_weights, extendable_to
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
    adam_beta2: float = 0.999
    schedule: str = "cosine"  # one of equibench.optim.SCHEDULES
    decay_fraction: float = 0.2  # wsd: share of the steps in the final cool-down
    #: short-to-long curriculum: ((first_step, rows), ...); before the first entry the
    #: prior's own ``rows``
    rows_curriculum: tuple = ()
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
        for name in ("lr", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.warmup_steps < 0 or self.validation_batches < 0:
            raise ValueError("warmup_steps and validation_batches must be >= 0")
        if not self.lr > 0 or not self.grad_clip > 0 or self.weight_decay < 0:
            raise ValueError("lr and grad_clip must be > 0 and weight_decay >= 0")
        if not 0.0 < self.adam_beta2 < 1.0:
            raise ValueError(f"adam_beta2 must be in (0, 1), got {self.adam_beta2!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {list(SCHEDULES)}, got {self.schedule!r}")
        if not 0.0 < self.decay_fraction <= 1.0:
            raise ValueError(f"decay_fraction must be in (0, 1], got {self.decay_fraction!r}")
        curriculum = tuple(tuple(entry) for entry in self.rows_curriculum)
        object.__setattr__(self, "rows_curriculum", curriculum)
        steps = [entry[0] for entry in curriculum]
        if (any(len(entry) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in entry)
                for entry in curriculum) or steps != sorted(set(steps))):
            raise ValueError(
                "rows_curriculum must be (first_step, rows) pairs of positive integers with increasing "
                f"steps, got {self.rows_curriculum!r}"
            )
        size_config(self.size, **self.model_overrides)  # validates the overrides


def prior_at(step: int, prior: PriorConfig, curriculum: tuple) -> PriorConfig:
    """The prior of ``step`` (1-based): ``prior`` with the rows of the curriculum entry in force."""
    rows = prior.rows
    for first_step, entry_rows in curriculum:
        if step >= first_step:
            rows = entry_rows
    return prior if rows == prior.rows else dataclasses.replace(prior, rows=rows)


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


#: Defaults of settings added after runs were saved (a saved run without them used these).
_DEFAULTS = {
    "train": {"adam_beta2": 0.999, "schedule": "cosine", "decay_fraction": 0.2, "rows_curriculum": ()},
    "model": {"norm_first": False, "qk_norm": False},
}
#: Settings that do not change the training trajectory and may differ on --resume.
_FREE_ON_RESUME = {"device", "checkpoint_every", "validate_every", "validation_batches", "bundled_validation"}


def _changed_settings(saved: dict, current: dict, config: TrainConfig, done_steps: int) -> list[str]:
    """The settings of ``current`` that would make a resumed run differ from ``saved``. The
    step count may grow where the schedule allows it (``equibench.optim.extendable_to``)."""
    free = set(_FREE_ON_RESUME)
    if extendable_to(config, saved["train"]["steps"], done_steps):
        free.add("steps")
    changed = [
        f"{section}.{key}"
        for section in ("train", "prior", "model")
        for key in sorted(set(saved[section]) | set(current[section]))
        if saved[section].get(key, _DEFAULTS.get(section, {}).get(key)) != current[section].get(key)
        and not (section == "train" and key in free)
    ]
    return changed + (["world_size"] if saved["world_size"] != current["world_size"] else [])


def _read_log(path: Path, up_to_step: int) -> list[str]:
    """Log lines of the steps already covered by the checkpoint (later ones were lost; a last
    line torn by a kill is dropped)."""
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line]
    kept = []
    for number, line in enumerate(lines, start=1):
        try:
            step = json.loads(line)["step"]
        except (ValueError, KeyError, TypeError) as error:
            if number == len(lines):
                break
            raise ValueError(f"{str(path)!r} line {number} is damaged ({error}); fix or delete that line, then resume") from None
        if step <= up_to_step:
            kept.append(line)
    return kept


def _json_line(record: dict) -> str:
    """A strict-JSON log line: non-finite numbers are written as null."""
    return json.dumps({k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in record.items()},
                      allow_nan=False) + "\n"


_RUN_FILES = (STATE_FILE, MODEL_FILE, CONFIG_FILE, LOG_FILE)


def _check_fresh_out_dir(out_dir: Path, overwrite: bool) -> None:
    """A new run never replaces files in ``out_dir`` unless ``overwrite`` says so."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"--out {str(out_dir)!r} is an existing file, not a folder; choose a folder path")
    present = [name for name in _RUN_FILES if (out_dir / name).exists()]
    if overwrite or not present:
        return
    if STATE_FILE in present:
        raise FileExistsError(
            f"{str(out_dir)!r} already holds a training run; pass --resume to continue it, --overwrite to replace it, "
            "or choose a new --out"
        )
    raise FileExistsError(
        f"{str(out_dir)!r} already holds {', '.join(present)} (a finished run whose {STATE_FILE} was deleted, or "
        "another model); choose a new --out, or pass --overwrite to replace them"
    )


def _load_state(state_path: Path) -> dict:
    try:
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        if not isinstance(state, dict) or "run" not in state:
            raise ValueError("not a training state")
    except Exception as error:  # torch raises many types for a damaged file
        raise ValueError(
            f"{str(state_path)!r} is unreadable ({type(error).__name__}: {str(error).splitlines()[0][:200]}); it may be "
            f"truncated: continue from its {MODEL_FILE} with --init-from in a new --out, or start over with --overwrite"
        ) from None
    return state


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


def _diverged(loss: float, ddp: _Distributed, device) -> bool:
    """Whether the loss is non-finite on any process (every process gets the same answer)."""
    bad = not math.isfinite(loss)
    if not ddp.active:
        return bad
    flag = torch.tensor(float(bad), device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def pretrain(
    config: TrainConfig,
    prior: PriorConfig,
    out_dir: str | os.PathLike,
    resume: bool = False,
    progress: bool = True,
    time_limit_s: float | None = None,
    overwrite: bool = False,
) -> PretrainOutcome:
    """Train (or resume) a model on the prior.

    ``time_limit_s`` stops this invocation early, checkpointed, before a step would end past
    the limit (at the mean pace of its steps so far); ``resume=True`` continues exactly.
    With ``config.init_from`` the run starts from that checkpoint's weights (fresh optimizer
    and schedule); the model card then counts steps, datasets and time over both runs and
    keeps the earlier run's command under ``training["initialised_from"]``.

    A new run (no ``resume``) refuses an ``out_dir`` holding any of its files unless
    ``overwrite``. A NaN or infinite loss (or weights) stops the run with NonFiniteLossError,
    keeping the last finite checkpoint."""
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
        state = _load_state(state_path)
        changed = _changed_settings(state["run"], run_description, config, state["step"])
        if changed:
            raise ValueError(
                f"cannot resume {str(out_dir)!r}: the settings differ from the saved run in {changed}; "
                "use the same options as the original command, or a new --out directory"
            )
    elif ddp.is_main:  # alone: another rank could see files rank 0 has just written
        _check_fresh_out_dir(out_dir, overwrite)

    torch.manual_seed(config.seed)
    model = build_model(config.arch, size_config(config.size, **config.model_overrides)).to(device)
    optimizer, scheduler = build_optimizer(model, config, device)
    for first_step, _ in config.rows_curriculum:
        prior_at(first_step, prior, config.rows_curriculum)  # validates every curriculum prior now
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
        if not resume:
            state_path.unlink(missing_ok=True)  # --overwrite: the replaced run can no longer be resumed
        (out_dir / CONFIG_FILE).write_text(json.dumps(run_description, indent=2) + "\n")
        kept = _read_log(log_path, start_step) if resume else []
        log_path.write_text("".join(line + "\n" for line in kept))
    command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])

    def save(step: int) -> None:
        generators = [prior_generator.get_state()]
        if ddp.active:
            generators = [None] * ddp.world_size
            dist.all_gather_object(generators, prior_generator.get_state())
        if not ddp.is_main:
            return
        if not all(torch.isfinite(tensor).all() for tensor in model.state_dict().values()):
            raise NonFiniteLossError(
                f"step {step}: the weights are no longer finite (training diverged); nothing was written, the last "
                f"checkpoint in {str(out_dir)!r} is kept. Lower --lr (now {config.lr:g}) and start a new --out"
            )
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
        with evaluation_weights(model, optimizer):
            save_checkpoint(model, out_dir / MODEL_FILE, card)

    def validate(step: int) -> None:
        nonlocal metrics, wall_time
        started = time.perf_counter()
        model.eval()
        metrics = {"step": step}
        with evaluation_weights(model, optimizer):
            if validation_batches:
                metrics.update(prior_metrics(model, validation_batches))
            if config.bundled_validation:
                metrics.update(bundled_accuracy(model, device=device))
        model.train()
        metrics["seconds"] = time.perf_counter() - started
        wall_time += metrics["seconds"]
        with log_path.open("a") as log:
            log.write(_json_line({"kind": "validation", **metrics}))

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
                            loss=float("nan"), lr=current_lr(optimizer, scheduler), rate=0.0, prior_share=0.0)
        for step in range(start_step + 1, config.steps + 1):
            started, cpu_started = time.perf_counter(), time.process_time()
            prior_seconds, step_loss = 0.0, 0.0
            step_prior = prior_at(step, prior, config.rows_curriculum)
            optimizer.zero_grad(set_to_none=True)
            for micro in range(config.grad_accumulation):
                prior_started = time.perf_counter()
                batch = sample_batch(step_prior, config.batch_size, prior_generator, device)
                prior_seconds += time.perf_counter() - prior_started
                last = micro == config.grad_accumulation - 1
                with (trained.no_sync() if ddp.active and not last else nullcontext()), autocast:
                    loss = masked_test_loss(forward_batch(trained, batch), batch.y[:, batch.n_train:], batch.loss_mask)
                (loss / config.grad_accumulation).backward()
                step_loss += loss.item() / config.grad_accumulation
            if _diverged(step_loss, ddp, device):
                raise NonFiniteLossError(
                    f"step {step}: the training loss is {step_loss} (diverged); the last checkpoint in "
                    f"{str(out_dir)!r} is kept. Lower --lr (now {config.lr:g}) and start a new --out"
                )
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            lr = current_lr(optimizer, scheduler)
            optimizer.step()
            scheduler.step()
            seconds = time.perf_counter() - started
            wall_time += seconds
            step_datasets = config.batch_size * config.grad_accumulation * ddp.world_size
            datasets_seen += step_datasets
            record = {
                "kind": "step", "step": step, "loss": step_loss, "lr": lr, "grad_norm": float(grad_norm),
                "n_classes": batch.n_classes, "rows": step_prior.rows, "seconds": seconds,
                "cpu_seconds": time.process_time() - cpu_started, "datasets_per_s": step_datasets / seconds,
                "prior_share": prior_seconds / seconds, "datasets_seen": datasets_seen,
            }
            if ddp.is_main:
                with log_path.open("a") as log:
                    log.write(_json_line(record))
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
