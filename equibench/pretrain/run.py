"""One invocation of a pretraining run: :func:`pretrain` sets up (or resumes) the run in its
folder, then trains with a per-step callback that logs, validates, checkpoints and stops at
the time limit."""

from __future__ import annotations

import dataclasses
import datetime
import os
import shlex
import sys
import threading
import time
from contextlib import closing, nullcontext
from pathlib import Path
from typing import NamedTuple

import torch
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text
from torch import nn

from .._version import __version__
from ..devices import resolve_device
from ..errors import InvalidInputError, NonFiniteLossError
from ..machine import hardware_description
from ..model import ModelCard, build_model, load_checkpoint, size_config
from ..prior import PriorConfig
from ..progress import LimitedRemainingColumn, Progress
from . import hardware_history, run_dir
from .config import TrainConfig, changed_settings, describe_run
from .deepen import can_deepen, deepened_state, layer_plan
from .distributed import Distributed
from .loop import Counters, prior_batches, train
from .optim import build_optimizer, current_lr
from .validation import validation_metrics, validation_prior_batches

RUN_IN_USE = "wait for it to stop (it checkpoints at its time limit) or stop it: two runs in one folder overwrite each other"


class PretrainOutcome(NamedTuple):
    model_path: Path  # model.pt of the last checkpoint
    step: int  # the step it holds
    steps: int  # the run's total
    stopped_by: str | None = None  # why it stopped early: "time limit" or "stop request"

    @property
    def finished(self) -> bool:
        return self.step >= self.steps


def pretrain(
    config: TrainConfig,
    prior: PriorConfig,
    out_dir: str | os.PathLike,
    resume: bool = False,
    progress: bool = True,
    time_limit_s: float | None = None,
    overwrite: bool = False,
    stop: threading.Event | None = None,
    console: Console | None = None,
) -> PretrainOutcome:
    """Train (or resume) a model on the prior, in the run folder ``out_dir`` (``run_dir``).

    ``time_limit_s`` stops this invocation early, checkpointed, before a step would end past
    the limit (at the mean pace of its steps so far); so does setting ``stop`` (e.g. from a
    signal handler), after the step in flight; ``resume=True`` continues exactly. The progress
    bar goes to ``console`` (default: a new one on stderr).
    With ``config.init_from`` the run starts from that checkpoint's weights (fresh optimizer
    and schedule); the model card then counts steps, datasets and time over both runs and
    keeps the earlier run's command under ``training["initialised_from"]``.

    A new run (no ``resume``) refuses an ``out_dir`` holding any of its files unless
    ``overwrite``; while another process trains in ``out_dir`` (it holds the folder's lock),
    FolderInUseError is raised at once, naming it. A NaN or infinite loss (or weights) stops
    the run with NonFiniteLossError, keeping the last finite checkpoint."""
    if time_limit_s is not None and not time_limit_s >= 0:
        raise InvalidInputError(f"`time_limit_s` must be a non-negative number of seconds, got {time_limit_s!r}")
    out_dir = Path(out_dir)
    device = resolve_device(config.device)
    ddp = Distributed(device)
    # the process that writes holds the folder until it stops
    with run_dir.locked(out_dir, RUN_IN_USE) if ddp.is_main else nullcontext():
        description = describe_run(config, prior, ddp.world_size)
        state = run_dir.load_state(out_dir) if resume else None
        if state is not None and (changed := changed_settings(state["run"], description, config, state["step"])):
            raise InvalidInputError(
                f"cannot resume {str(out_dir)!r}: the settings differ from the saved run in {changed}; use the "
                "saved settings (its config.json), or a new `out_dir`"
            )
        if state is None and ddp.is_main:  # alone: another rank could see files rank 0 has just written
            run_dir.check_fresh(out_dir, overwrite)

        torch.manual_seed(config.seed)
        model = build_model(config.arch, size_config(config.size, **config.model_overrides)).to(ddp.device)
        optimizer, scheduler = build_optimizer(model, config, ddp.device)
        # the prior stream's seeds come from the CPU, so a run resumes on another device
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + ddp.rank)
        # a resumed run reads its lineage from its state's card, not init_from's file (None: not started from it)
        lineage = None if state is None else state["card"]["training"].get("initialised_from")
        if config.init_from is not None and lineage is None:
            initial_weights, lineage = _initial_weights(config, model)
            if state is None:
                model.load_state_dict(initial_weights)
        run = _Run(config, prior, out_dir, ddp, model, optimizer, scheduler, generator, description, lineage,
                   time_limit_s=time_limit_s, stop=stop)
        if state is not None:
            run.restore(state)
        if ddp.is_main:
            run.validation_batches = validation_prior_batches(prior, config.validation_batches, config.batch_size,
                                                              ddp.device)
            run_dir.start(out_dir, description, None if state is None else run.counters.step)
        autocast = torch.autocast(device_type=ddp.device.type, dtype=torch.bfloat16) if run.amp else nullcontext()
        batches = prior_batches(prior, config, generator, ddp.device, run.counters.step + 1)
        with run.progress_bar(console or Console(stderr=True), enabled=progress and ddp.is_main), closing(batches):
            run.start()
            train(model, optimizer, scheduler, batches, config, run.counters, run.on_step, ddp, autocast)
        ddp.close()
        return PretrainOutcome(out_dir / run_dir.MODEL_FILE, run.counters.step, config.steps, run.stopped_by)


def _initial_weights(config: TrainConfig, model: nn.Module) -> tuple[dict, dict]:
    """Weights and lineage (with ``"layers"`` when deepened) of ``config.init_from``, checked against the
    model this run builds: the same, or the same pre-LN model with more layers, whose new layers start as
    identities (:mod:`.deepen`)."""
    source, card = load_checkpoint(config.init_from)
    deepen = can_deepen(source, model)
    if source.arch != model.arch or (source.config != model.config and not deepen):
        raise InvalidInputError(
            f"`init_from` {config.init_from!r} holds a {source.arch} model with {source.config}, but this run "
            f"trains a {model.arch} model with {model.config}; use the same `arch`, `size` and `model_overrides` "
            "(or, for a pre-LN model, only more layers: `n_layers`)"
        )
    lineage = {
        "checkpoint": str(config.init_from), "steps": card.steps, "datasets_seen": card.datasets_seen,
        "wall_time_s": card.wall_time_s, "command": card.command, "training": card.training,
        "hardware_history": card.hardware_history or hardware_history.extended([], None, 1, card.steps),
    }
    if not deepen:
        return source.state_dict(), lineage
    lineage["layers"] = {"from": source.config.n_layers, "to": model.config.n_layers,
                         "plan": layer_plan(source.config.n_layers, model.config.n_layers)}
    return deepened_state(source, model), lineage


class _StatsColumn(ProgressColumn):
    """The task's ``stats`` on one line, the column a narrow terminal shortens first: by whole
    items (``loss 0.41, lr 1.0e-03``), never cutting a number."""

    def render(self, task) -> _Items:
        return _Items(task.fields["stats"].split(", "))


class _Items:
    """Comma-separated items, as many as fit the width."""

    def __init__(self, items: list[str]):
        self.items = items

    def __rich_measure__(self, console, options) -> Measurement:
        return Measurement(1, cell_len(", ".join(self.items)))

    def __rich_console__(self, console, options):
        shown = []
        for item in self.items:
            if cell_len(", ".join([*shown, item])) > options.max_width:
                break
            shown.append(item)
        yield Text(", ".join(shown), no_wrap=True)


class _Run:
    """What one invocation trains and writes; :meth:`on_step` is the training loop's callback.
    Rank 0 alone logs, validates and writes files."""

    def __init__(self, config: TrainConfig, prior: PriorConfig, out_dir: Path, ddp: Distributed, model: nn.Module,
                 optimizer, scheduler, generator: torch.Generator, description: dict, lineage: dict | None,
                 time_limit_s: float | None, stop: threading.Event | None):
        self.config, self.prior, self.out_dir, self.ddp = config, prior, out_dir, ddp
        self.model, self.optimizer, self.scheduler, self.generator = model, optimizer, scheduler, generator
        self.description, self.lineage, self.time_limit_s = description, lineage, time_limit_s
        self.amp = ddp.device.type == "cuda" if config.amp is None else config.amp  # None: bf16 on CUDA
        self.stop, self.stopped_by = stop, None
        self.counters, self.metrics, self.validation_batches = Counters(), {}, []
        self.command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
        self.hardware = f"{ddp.world_size} x {hardware_description(ddp.device)}"
        self.hardware_history: list[dict] = []  # the steps before this invocation's (hardware_history)

    def restore(self, state: dict) -> None:
        """Continue from a saved training state (see :meth:`save`)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["prior_generators"][self.ddp.rank])
        self.counters = Counters(state["step"], state["datasets_seen"], state["wall_time_s"])
        self.metrics = state["metrics"]
        self.hardware_history = state["hardware_history"]

    def progress_bar(self, console: Console, enabled: bool) -> Progress:
        """A progress bar on ``console`` (stderr: stdout stays for results), shown by :meth:`on_step`;
        with a time limit, the time left is the limit's where it comes before the last step."""
        columns = [  # the times before the statistics: a narrow terminal cuts the last columns
            TextColumn("[bold]{task.description}"), BarColumn(bar_width=12), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(table_column=Column(min_width=7, no_wrap=True)),
            LimitedRemainingColumn(table_column=Column(min_width=7, no_wrap=True)), _StatsColumn(),
        ]
        self.bar = Progress(*columns, console=console, disable=not enabled, name="pretrain")
        deadline = None if self.time_limit_s is None else time.monotonic() + self.time_limit_s  # :meth:`start` follows
        self.task = self.bar.add_task(  # no loss nor pace before the first step
            f"{self.config.arch}-{self.config.size}", total=self.config.steps, completed=self.counters.step,
            stats=f"lr {current_lr(self.optimizer, self.scheduler):.1e}", deadline=deadline,
        )
        return self.bar

    def start(self) -> None:
        """Start this invocation's clock; a new run first validates the untrained model (its curves start there)."""
        self.started, self.start_step = time.perf_counter(), self.counters.step
        self.validation_s = self.last_validation_s = 0.0  # this invocation's validations, out of the steps' pace
        if self.ddp.is_main and self.start_step == 0:
            self.validate(0)

    def on_step(self, record: dict) -> bool:
        """After a step: log it, validate and checkpoint on schedule; whether the time limit or a stop
        request stops the run here."""
        step, config = record["step"], self.config
        if self.ddp.is_main:
            run_dir.append_log(self.out_dir, record)
            self.bar.update(self.task, completed=step, stats=(
                f"loss {record['loss']:.4f}, lr {record['lr']:.1e}, {record['datasets_per_s']:.1f} datasets/s, "
                f"prior wait {record['prior_share']:.0%}"))
        validated = step % config.validate_every == 0 or step == config.steps
        if validated and self.ddp.is_main:
            self.validate(step)
        self.stopped_by = None if step == config.steps else self._stop_reason(step)
        if self.stopped_by is not None and not validated and self.ddp.is_main:
            self.validate(step)  # the weights a stopped run ships are validated too
        if self.stopped_by is not None or step % config.checkpoint_every == 0 or step == config.steps:
            self.save(step)
        return self.stopped_by is not None

    def _stop_reason(self, step: int) -> str | None:
        """Why to stop after ``step``: "stop request" (``stop`` is set) or "time limit" (one more
        step at this invocation's mean pace, then the validation a stopped run ends with, would end
        past it); every process gets the same answer."""
        if self.stop is not None and self.ddp.any(self.stop.is_set()):
            return "stop request"
        if self.time_limit_s is None:
            return None
        elapsed = time.perf_counter() - self.started
        pace = (elapsed - self.validation_s) / (step - self.start_step)  # a step's time, validations left out
        next_end = elapsed + pace + self.last_validation_s  # the next step, then a validation (on schedule or at the stop)
        return "time limit" if self.ddp.any(next_end >= self.time_limit_s) else None

    def validate(self, step: int) -> None:
        """Validate the weights to ship; the metrics go to the log and the next checkpoint's card."""
        self.bar.update(self.task, description=f"{self.config.arch}-{self.config.size} validating")
        self.bar.refresh()
        self.metrics = {"step": step, **validation_metrics(
            self.model, self.optimizer, self.validation_batches, self.config.bundled_validation, self.ddp.device
        )}
        self.bar.update(self.task, description=f"{self.config.arch}-{self.config.size}")
        self.counters.wall_time_s += self.metrics["seconds"]
        self.last_validation_s = self.metrics["seconds"]
        self.validation_s += self.metrics["seconds"]
        run_dir.append_log(self.out_dir, {"kind": "validation", **self.metrics})

    def save(self, step: int) -> None:
        """Checkpoint ``step``: the training state (to resume) and the model with its card."""
        generators = self.ddp.gather(self.generator.get_state())
        if not self.ddp.is_main:
            return
        if not all(torch.isfinite(tensor).all() for tensor in self.model.state_dict().values()):
            raise NonFiniteLossError(
                f"step {step}: the weights are no longer finite (training diverged); nothing was written, the last "
                f"checkpoint in {str(self.out_dir)!r} is kept: lower the learning rate (now `lr={self.config.lr:g}`) and "
                "start a new `out_dir`"
            )
        own = hardware_history.extended(self.hardware_history, self.hardware, self.start_step + 1, step)  # this run's
        counters, card = self.counters, self._card(step, own)
        state = {
            "run": self.description, "step": step, "datasets_seen": counters.datasets_seen,
            "wall_time_s": counters.wall_time_s, "metrics": self.metrics, "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "prior_generators": [g.cpu() for g in generators], "hardware_history": own,
            "card": dataclasses.asdict(card),  # model.pt's card, so the state alone rebuilds model.pt
        }
        run_dir.save(self.out_dir, state, self.model, self.optimizer, card, self.config.max_file_mb)

    def _card(self, step: int, own: list[dict]) -> ModelCard:
        """The model card of ``step`` (``own``: which hardware trained steps 1..``step`` of this run): steps,
        datasets, time and hardware count from the start of the lineage."""
        config, counters = self.config, self.counters
        earlier = self.lineage or {"steps": 0, "datasets_seen": 0, "wall_time_s": 0.0, "hardware_history": []}
        history = hardware_history.continued(earlier["hardware_history"], own, earlier["steps"])
        training = {**dataclasses.asdict(config), "world_size": self.ddp.world_size, "amp": self.amp}
        if self.lineage is not None:
            training["initialised_from"] = self.lineage
        return ModelCard(
            arch=config.arch, size=config.size, prior=self.prior.to_dict(), training=training,
            steps=earlier["steps"] + step, datasets_seen=earlier["datasets_seen"] + counters.datasets_seen,
            wall_time_s=round(earlier["wall_time_s"] + counters.wall_time_s, 1),
            hardware=hardware_history.summary(history), hardware_history=history, metrics=self.metrics,
            command=self.command, seed=config.seed, equibench_version=__version__,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
