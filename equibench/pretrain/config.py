"""The settings of a pretraining run: :class:`TrainConfig`, the prior of each step (rows
curriculum), the run description saved as config.json, and which changes a resume allows."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..errors import InvalidInputError
from ..model.config import ARCHITECTURES, SIZES, size_config
from ..prior.config import PriorConfig

#: The learning-rate schedules (:mod:`.optim` implements them).
SCHEDULES = ("cosine", "wsd", "schedule-free")


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
    schedule: str = "cosine"  # one of SCHEDULES
    decay_fraction: float = 0.2  # wsd: share of the steps in the final cool-down
    #: short-to-long curriculum: ((first_step, rows), ...); before the first entry the
    #: prior's own ``rows``
    rows_curriculum: tuple = ()
    seed: int = 0
    device: str = "auto"
    amp: bool | None = None  # None: bf16 autocast on CUDA, off on CPU
    #: 0: the prior is drawn in the training process, on ``device``; N: by N worker processes
    #: on the CPU, ahead of use (the stream a CPU run draws, at the pace of N cores)
    prior_workers: int = 0
    checkpoint_every: int = 100
    validate_every: int = 200
    validation_batches: int = 8
    bundled_validation: bool = True
    model_overrides: dict = field(default_factory=dict)  # fields of ModelConfig to change
    init_from: str | None = None  # checkpoint whose weights start the run (continued pretraining)
    #: write train_state.pt in parts of at most this many MB (10**6 bytes); None: one file
    max_file_mb: float | None = None
    recipe: str | None = None  # the recipe these settings started from (a label: name or file)

    def __post_init__(self) -> None:
        if self.arch not in ARCHITECTURES:
            raise InvalidInputError(f"`arch` must be {' or '.join(map(repr, ARCHITECTURES))}, got {self.arch!r}")
        if self.size not in SIZES:
            raise InvalidInputError(f"`size` must be one of {list(SIZES)}, got {self.size!r}")
        for name in ("steps", "batch_size", "grad_accumulation", "checkpoint_every", "validate_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"`{name}` must be a positive integer, got {value!r}")
        for name in ("lr", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidInputError(f"`{name}` must be a finite number, got {value!r}")
        if self.warmup_steps < 0 or self.validation_batches < 0:
            raise InvalidInputError("`warmup_steps` and `validation_batches` must be >= 0")
        if isinstance(self.prior_workers, bool) or not isinstance(self.prior_workers, int) or self.prior_workers < 0:
            raise InvalidInputError(f"`prior_workers` must be a non-negative integer, got {self.prior_workers!r}")
        if self.max_file_mb is not None and (isinstance(self.max_file_mb, bool) or not isinstance(
                self.max_file_mb, (int, float)) or not 0.001 <= self.max_file_mb < math.inf):
            raise InvalidInputError(f"`max_file_mb` must be a number of MB >= 0.001 (left out: one file), got "
                                    f"{self.max_file_mb!r}")
        if not self.lr > 0 or not self.grad_clip > 0 or self.weight_decay < 0:
            raise InvalidInputError("`lr` and `grad_clip` must be > 0 and `weight_decay` >= 0")
        if not 0.0 < self.adam_beta2 < 1.0:
            raise InvalidInputError(f"`adam_beta2` must be in (0, 1), got {self.adam_beta2!r}")
        if self.schedule not in SCHEDULES:
            raise InvalidInputError(f"`schedule` must be one of {list(SCHEDULES)}, got {self.schedule!r}")
        if not 0.0 < self.decay_fraction <= 1.0:
            raise InvalidInputError(f"`decay_fraction` must be in (0, 1], got {self.decay_fraction!r}")
        try:
            curriculum = tuple(tuple(entry) for entry in self.rows_curriculum)
        except TypeError:  # not a sequence of pairs
            curriculum = ((),)
        steps = [entry[0] for entry in curriculum if entry]
        if (any(len(entry) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in entry)
                for entry in curriculum) or steps != sorted(set(steps))):
            raise InvalidInputError(
                "`rows_curriculum` must be (first_step, rows) pairs of positive integers with increasing "
                f"steps, got {self.rows_curriculum!r}"
            )
        object.__setattr__(self, "rows_curriculum", curriculum)
        size_config(self.size, **self.model_overrides)  # validates the overrides


def rows_at(step: int, rows: int, curriculum: tuple) -> int:
    """The rows per dataset of ``step`` (1-based): those of the curriculum entry in force, else ``rows``."""
    for first_step, entry_rows in curriculum:
        if step >= first_step:
            rows = entry_rows
    return rows


def prior_at(step: int, prior: PriorConfig, curriculum: tuple) -> PriorConfig:
    """The prior of ``step`` (1-based): ``prior`` with the rows of the curriculum entry in force."""
    rows = rows_at(step, prior.rows, curriculum)
    return prior if rows == prior.rows else dataclasses.replace(prior, rows=rows)


def same_rows_until(step: int, rows: int, curriculum: tuple, other: tuple) -> bool:
    """Whether two rows curricula give every step up to ``step`` the same rows. A resumed run
    may then change its curriculum: only the steps still to come see the change, so it equals
    a run that had the new curriculum from the start."""
    changes = {1} | {first for first, _ in curriculum + other if first <= step}
    return all(rows_at(s, rows, curriculum) == rows_at(s, rows, other) for s in changes)


def describe_run(config: TrainConfig, prior: PriorConfig, world_size: int) -> dict:
    """The run's settings as plain data (config.json, and the ``run`` of its saved state);
    checks that every prior of the rows curriculum is valid."""
    for first_step, _ in config.rows_curriculum:
        prior_at(first_step, prior, config.rows_curriculum)
    return {
        "train": dataclasses.asdict(config),
        "prior": prior.to_dict(),
        "model": size_config(config.size, **config.model_overrides).to_dict(),
        "world_size": world_size,
    }


#: Settings that do not change what is trained and may differ on resume: where and in which precision
#: the steps run (device, amp, prior_workers), what is written along the way and how, and the
#: recipe's label.
_FREE_ON_RESUME = {"device", "amp", "prior_workers", "checkpoint_every", "validate_every", "validation_batches",
                   "bundled_validation", "max_file_mb", "recipe"}


def changed_settings(saved: dict, current: dict, config: TrainConfig, done_steps: int) -> list[str]:
    """The settings of ``current`` (a :func:`describe_run`) that would make a resumed run differ
    from ``saved``. The step count may grow where the schedule allows it (``extendable_to``)."""
    from .optim import extendable_to  # torch: imported when a run resumes, not with the configuration

    free = set(_FREE_ON_RESUME)
    if extendable_to(config, saved["train"]["steps"], done_steps):
        free.add("steps")
    saved_curriculum = tuple(tuple(entry) for entry in saved["train"]["rows_curriculum"])
    if same_rows_until(done_steps, saved["prior"]["rows"], saved_curriculum, config.rows_curriculum):
        free.add("rows_curriculum")
    changed = [
        f"{section}.{key}"
        for section in ("train", "prior", "model")
        for key in sorted(set(saved[section]) | set(current[section]))
        if saved[section].get(key) != current[section].get(key)
        and not (section == "train" and key in free)
    ]
    return changed + (["world_size"] if saved["world_size"] != current["world_size"] else [])
