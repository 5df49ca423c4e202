"""The run folder of a pretraining run::

    train_state.pt   model, optimizer, scheduler and RNG state (to resume), and model.pt's card;
                     with ``max_file_mb``, possibly an index of train_state.pt.*.part-* files
                     (:mod:`.state_file`)
    model.pt         the model in the equibench checkpoint format, with its model card
                     (rebuilt exactly from train_state.pt by :func:`model_file` where it is missing)
    log.jsonl        one record per step ({"kind": "step", ...}) and per validation
    config.json      the training and prior configuration

One process at a time writes a run folder: a training run holds its lock
(``.equibench.lock``, :func:`locked`) from before it reads the saved state until it stops.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from ..atomic_files import atomic_write_text
from ..errors import InvalidInputError
from ..model import ModelCard, build_model, save_checkpoint, size_config
from ..model.checkpoint import check_finite_weights
from ..outdir_lock import HOLDER_FILE, LOCK_FILE, locked_folder
from . import state_file
from .config import TrainConfig
from .optim import build_optimizer, evaluation_weights

STATE_FILE = "train_state.pt"
MODEL_FILE = "model.pt"
LOG_FILE = "log.jsonl"
CONFIG_FILE = "config.json"
RUN_FILES = (STATE_FILE, MODEL_FILE, CONFIG_FILE, LOG_FILE)
#: What a saved training state holds (``run._Run.save`` writes it).
STATE_KEYS = {"run", "step", "datasets_seen", "wall_time_s", "metrics", "model", "optimizer", "scheduler",
              "prior_generators", "hardware_history", "card"}


@contextmanager
def locked(out_dir: Path, advice: str) -> Iterator[None]:
    """Hold the run folder's lock (creating the folder), or raise FolderInUseError at once
    naming the process that holds it, ending with ``advice``. A folder this call created is
    removed again when what runs inside fails before writing anything."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"`out_dir` {str(out_dir)!r} is an existing file, not a folder; choose a folder path")
    created = not out_dir.exists()
    with locked_folder(out_dir, advice) as lock:
        try:
            yield
        except BaseException:
            lock.remove_folder = created and set(os.listdir(out_dir)) <= {LOCK_FILE, HOLDER_FILE}
            raise


def check_fresh(out_dir: Path, overwrite: bool) -> None:
    """A new run never replaces files in ``out_dir`` unless ``overwrite`` says so."""
    present = [name for name in RUN_FILES if (out_dir / name).exists()]
    orphans = state_file.orphan_parts(out_dir / STATE_FILE)
    if orphans and not overwrite:
        raise FileExistsError(
            f"{str(out_dir)!r} holds {len(orphans)} parts of a training state whose index {STATE_FILE} is missing; "
            f"restore {STATE_FILE} and pass `resume=True` to continue it, choose a new `out_dir`, or pass `overwrite=True` "
            "to delete them"
        )
    if overwrite or not present:
        return
    if STATE_FILE in present:
        raise FileExistsError(
            f"{str(out_dir)!r} already holds a training run; pass `resume=True` to continue it, `overwrite=True` to "
            "replace it, or choose a new `out_dir`"
        )
    raise FileExistsError(
        f"{str(out_dir)!r} already holds {', '.join(present)} (a finished run whose {STATE_FILE} was deleted, or "
        "another model); choose a new `out_dir`, or pass `overwrite=True` to replace them"
    )


def load_state(out_dir: Path) -> dict:
    """The saved training state of the run in ``out_dir`` (to resume it)."""
    path = out_dir / STATE_FILE
    if not path.exists():
        orphans = state_file.orphan_parts(path)
        if orphans:
            raise InvalidInputError(
                f"{str(path)!r}, the index of a training state saved in parts, is missing, but {len(orphans)} of its "
                f"parts are here ({', '.join(p.name for p in orphans[:3])}{', ...' if len(orphans) > 3 else ''}): "
                f"restore {STATE_FILE} from where this folder came from to resume (the parts alone cannot be joined "
                "safely); `overwrite=True` would delete them"
            )
        raise FileNotFoundError(f"`resume=True` was given but {str(path)!r} does not exist, so there is no run to "
                                "continue; leave out `resume=True` to start one")
    try:
        state = state_file.read(path)
        if not isinstance(state, dict) or not STATE_KEYS <= state.keys():
            raise ValueError("not a training state")
    except InvalidInputError:  # a part missing or damaged, named in its own message
        raise
    except Exception as error:  # torch raises many types for a damaged file
        raise InvalidInputError(
            f"{str(path)!r} is unreadable ({type(error).__name__}: {str(error).splitlines()[0][:200]}); it may be "
            f"truncated: continue from its {MODEL_FILE} with `init_from` in a new `out_dir`, or start over with `overwrite=True`"
        ) from None
    return state


def start(out_dir: Path, description: dict, resume_step: int | None) -> None:
    """Prepare ``out_dir`` for this invocation: write config.json; on resume (``resume_step``:
    the saved step) keep the log lines up to that step (later ones were lost), else delete a replaced
    run's state (it can no longer be resumed) and start an empty log."""
    if resume_step is None:
        state_file.remove(out_dir / STATE_FILE)
    atomic_write_text(out_dir / CONFIG_FILE, json.dumps(description, indent=2) + "\n")
    log, kept = out_dir / LOG_FILE, []
    if resume_step is not None and log.exists():
        kept = [line for line, record in log_records(log, ", then resume") if record["step"] <= resume_step]
    atomic_write_text(log, "".join(line + "\n" for line in kept))  # a kill here keeps the old log


def log_records(path: Path, advice: str = "") -> list[tuple[str, dict]]:
    """(line, record) of each step and validation record of the log at ``path``. A last line torn
    by a kill mid-write is dropped; another damaged line raises InvalidInputError, ending with ``advice``."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line]
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or record.get("kind") not in ("step", "validation") or "step" not in record:
                raise ValueError("not a step or validation record")
        except ValueError as error:
            if number == len(lines):  # the last line, torn by a kill mid-write
                break
            raise InvalidInputError(
                f"{str(path)!r} line {number} is damaged ({error}); fix or delete that line{advice}"
            ) from None
        records.append((line, record))
    return records


def append_log(out_dir: Path, record: dict) -> None:
    """Append ``record`` as a strict-JSON line (non-finite numbers written as null)."""
    line = json.dumps({k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in record.items()},
                      allow_nan=False)
    with (out_dir / LOG_FILE).open("a") as log:
        log.write(line + "\n")


def save(out_dir: Path, state: dict, model: nn.Module, optimizer: torch.optim.Optimizer, card: ModelCard,
         max_file_mb: float | None = None) -> None:
    """Write the training ``state`` (in parts of at most ``max_file_mb`` MB where given) and the
    model (its weights to ship) with ``card``, each atomically."""
    state_file.write(state, out_dir / STATE_FILE, None if max_file_mb is None else int(max_file_mb * 1e6))
    with evaluation_weights(model, optimizer):
        save_checkpoint(model, out_dir / MODEL_FILE, card)


def model_file(out_dir: Path) -> Path:
    """The run's ``model.pt``; where it is missing (a committed run keeps only its training
    state), it is first rebuilt from ``train_state.pt``: the same weights and card that the
    last checkpoint wrote."""
    path = out_dir / MODEL_FILE
    if path.exists():
        return path
    with locked(out_dir, f"wait for its next checkpoint, which writes {MODEL_FILE}, or stop it"):
        if path.exists():  # a run may have written it before this process took the lock
            return path
        state = load_state(out_dir)
        config = TrainConfig(**state["run"]["train"] | {"device": "cpu"})
        model = build_model(config.arch, size_config(config.size, **config.model_overrides))
        optimizer, _ = build_optimizer(model, config, torch.device("cpu"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        with evaluation_weights(model, optimizer):  # the weights to ship
            check_finite_weights(model.state_dict(), f"the training state in {str(out_dir)!r}")  # nothing written
            save_checkpoint(model, path, ModelCard.from_dict(state["card"]))
    return path
