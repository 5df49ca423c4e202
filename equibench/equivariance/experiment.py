"""The equivariance experiment on prior datasets: for each checkpoint, class count K and
permutation-ensemble size, the metric of :mod:`equibench.equivariance_metric` per dataset, summarised over datasets.

A permutation ensemble averages the mapped-back softmax outputs over random relabellings of
the training labels; it is one fixed function of the data, whose permuted-back output is
compared with its reference.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..baselines.registry import method_spec, weights_methods
from ..baselines.settings import MethodOptions
from ..devices import resolve_device
from ..equivariance_metric import (
    TIE_TOLERANCE,
    compare_log_probs,
    ensemble_log_probs,
    non_identity_permutations,
    unpermute,
)
from ..errors import InvalidInputError
from ..model import ARCHITECTURES, default_checkpoint, load_checkpoint
from ..prior import PriorConfig, sample_batch
from .methods import measure_method, method_label, prepare_methods

#: Share of each prior dataset's rows used as training rows; the rest are test rows.
TRAIN_FRACTION = 0.5
#: Prior batches are drawn this many datasets at a time (so a run's datasets do not depend
#: on ``datasets``: a smaller run uses a prefix of a larger one's).
PRIOR_BATCH = 64
#: Network calls hold at most this many (dataset, relabelling) pairs ...
FORWARD_BATCH = 32
#: ... and at most this many tokens (rows x slots): larger token tensors make CPU runs
#: slower (page-fault churn of freshly mapped memory).
FORWARD_TOKENS = 16384
#: The classifiers' inference temperature, used for the ensembles' softmax outputs.
SOFTMAX_TEMPERATURE = 0.8


def arch_label(arch: str) -> str:
    """A row's ``arch`` (a checkpoint's architecture or a measured method) as the registry labels that method."""
    return method_spec(arch).plain_label


@dataclass(frozen=True)
class EquivarianceConfig:
    """What ``equibench equivariance`` measures; validated on construction. ``methods``: PFN
    methods of the registry measured through their own classifiers with the user's weights
    (:mod:`.methods`), besides the checkpoints' networks."""

    checkpoints: tuple[Path, ...] = field(default_factory=lambda: tuple(map(default_checkpoint, ARCHITECTURES)))
    methods: tuple[str, ...] = ()
    classes: tuple[int, ...] = (2, 4, 8, 10)
    ensembles: tuple[int, ...] = (1, 2, 4, 8, 16)
    datasets: int = 512
    rows: int = 256
    seed: int = 0
    device: str = "cpu"
    softmax_temperature: float = SOFTMAX_TEMPERATURE
    tie_tolerance: float = TIE_TOLERANCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "checkpoints", tuple(Path(p) for p in self.checkpoints))
        object.__setattr__(self, "classes", tuple(sorted(set(self.classes))))
        object.__setattr__(self, "ensembles", tuple(sorted(set(self.ensembles))))
        object.__setattr__(self, "methods", tuple(dict.fromkeys(self.methods)))
        if not self.checkpoints:
            raise InvalidInputError("give at least one checkpoint")
        for name in self.methods:
            if name not in weights_methods():
                raise InvalidInputError(f"`methods`: {name!r} is not a PFN method that takes weights; choose among "
                                        f"{', '.join(weights_methods())}")
        if not self.classes or min(self.classes) < 2:
            raise InvalidInputError(f"class counts K must be at least 2, got {list(self.classes)}")
        if not self.ensembles or min(self.ensembles) < 1:
            raise InvalidInputError(f"ensemble sizes must be at least 1, got {list(self.ensembles)}")
        if self.datasets < 1:
            raise InvalidInputError(f"the number of datasets must be at least 1, got {self.datasets}")
        n_train = math.floor(TRAIN_FRACTION * self.rows)
        if n_train < 2 * max(self.classes):
            raise InvalidInputError(
                f"{self.rows} rows give {n_train} train rows, fewer than 2 per class for K={max(self.classes)}; "
                f"use at least {4 * max(self.classes)} rows"
            )
        if not self.softmax_temperature > 0 or not self.tie_tolerance >= 0:
            raise InvalidInputError("`softmax_temperature` must be > 0 and `tie_tolerance` >= 0")


class PriorDatasets(NamedTuple):
    """Prior datasets with one class count; rows ``[:n_train]`` are train rows."""

    x: torch.Tensor  # (D, R, F)
    y: torch.Tensor  # (D, R) int64 in [0, K)
    n_train: int


def _generator(seed: int, n_classes: int, stream: int) -> torch.Generator:
    state = np.random.SeedSequence([seed, n_classes, stream]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state) >> 1)


def prior_datasets(n_classes: int, n_datasets: int, rows: int, seed: int) -> PriorDatasets:
    """``n_datasets`` prior datasets with exactly ``n_classes`` classes, all present among the
    train rows (the first ``TRAIN_FRACTION`` of the rows); deterministic given ``seed``.

    The prior draws K per batch (uniform in {2..K} here), so batches are filtered: a
    one-dataset probe from a copy of the generator state tells K before the full batch is
    drawn (the full batch's K is still checked).
    """
    config = PriorConfig(rows=rows, max_classes=n_classes, p_binary=0.0,
                         min_train_fraction=TRAIN_FRACTION, max_train_fraction=TRAIN_FRACTION)
    generator = _generator(seed, n_classes, 0)
    xs, ys, kept, n_train = [], [], 0, 0
    for _ in range(200 * n_classes * math.ceil(n_datasets / PRIOR_BATCH)):
        state = generator.get_state()
        if sample_batch(config, 1, generator).n_classes != n_classes:
            continue
        generator.set_state(state)
        batch = sample_batch(config, PRIOR_BATCH, generator)
        if batch.n_classes != n_classes:
            continue
        xs.append(batch.x[batch.loss_mask])
        ys.append(batch.y[batch.loss_mask])
        kept, n_train = kept + int(batch.loss_mask.sum()), batch.n_train
        if kept >= n_datasets:
            return PriorDatasets(x=torch.cat(xs)[:n_datasets], y=torch.cat(ys)[:n_datasets], n_train=n_train)
    raise InvalidInputError(
        f"could only draw {kept} of {n_datasets} prior datasets with K={n_classes} whose classes all occur "
        f"among the train rows; use more rows"
    )


def draw_permutations(n_datasets: int, n_classes: int, n_members: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per dataset: sigma, uniform among the non-identity permutations, (D, K); and the
    ensemble members' relabellings (D, E, K), member 0 the identity, the others uniform."""
    generator = _generator(seed, n_classes, 1)
    sigma = non_identity_permutations(n_datasets, n_classes, generator)
    members = torch.rand(n_datasets, n_members, n_classes, generator=generator).argsort(dim=2)
    members[:, 0] = torch.arange(n_classes)
    return sigma, members


@torch.inference_mode()
def _member_log_probs(
    model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
    n_classes: int, relabels: torch.Tensor, temperature: float, batch: int,
) -> torch.Tensor:
    """log softmax(logits / temperature) for each relabelling, mapped back to the original
    class order."""
    # x_train: (D, N, F), y_train: (D, N), x_test: (D, M, F), relabels: (D, P, K) -> (D, P, M, K)
    n_sets, n_relabels, _ = relabels.shape
    labels = relabels.gather(2, y_train[:, None, :].expand(-1, n_relabels, -1)).flatten(0, 1)  # (D*P, N)
    flat_index = torch.arange(n_sets).repeat_interleave(n_relabels)  # dataset of each (D*P) entry
    chunks = []
    for start in range(0, len(flat_index), batch):
        index = flat_index[start:start + batch]
        logits = model(x_train[index], labels[start:start + batch], x_test[index], n_classes)  # (b, M, K)
        chunks.append(torch.log_softmax(logits.double().cpu() / temperature, dim=-1))
    log_probs = torch.cat(chunks).view(n_sets, n_relabels, -1, n_classes)
    return unpermute(log_probs, relabels[:, :, None, :].cpu())


def measure_model(
    model: nn.Module, data: PriorDatasets, n_classes: int, sigma: torch.Tensor, members: torch.Tensor,
    ensembles: tuple[int, ...], temperature: float, tie_tolerance: float, device: torch.device,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-dataset (arg-max change fraction, log-probability RMS), each (len(ensembles), D).

    Ensemble of size E: members[:, :E] relabel the training labels for the reference
    prediction and ``members o sigma`` for the permuted one (see the module docstring)."""
    model = model.to(device)
    n_train, n_members = data.n_train, members.shape[1]
    composed = members.gather(2, sigma[:, None, :].expand_as(members))  # (D, E, K): k -> pi_e[sigma[k]]
    relabels = torch.cat([members, composed], dim=1)  # (D, 2E, K)
    # (dataset, relabelling) pairs per network call: EquiTabPFN has 1 + K token slots per row, TabPFN* one
    batch = max(1, min(FORWARD_BATCH, FORWARD_TOKENS // (data.x.shape[1] * model.token_slots(n_classes))))
    per_call = max(1, batch // (2 * n_members))
    fractions, rms = [], []
    for start in range(0, len(sigma), per_call):
        part = slice(start, start + per_call)
        x = data.x[part].to(device)  # (d, R, F)
        y = data.y[part, :n_train].to(device)  # (d, N)
        log_probs = _member_log_probs(model, x[:, :n_train], y, x[:, n_train:], n_classes,
                                      relabels[part].to(device), temperature, batch)  # (d, 2E, M, K)
        scores = [compare_log_probs(ensemble_log_probs(log_probs[:, :size]),
                                    ensemble_log_probs(log_probs[:, n_members:n_members + size]),
                                    tie_tolerance)
                  for size in ensembles]
        fractions.append(torch.stack([s[0] for s in scores]))
        rms.append(torch.stack([s[1] for s in scores]))
    return torch.cat(fractions, dim=1).numpy(), torch.cat(rms, dim=1).numpy()


def _spread(values: np.ndarray) -> tuple[float, float, float]:
    """mean, standard deviation (ddof 1) and standard error; NaN spread for one value."""
    std = float(values.std(ddof=1)) if len(values) > 1 else math.nan
    return float(values.mean()), std, std / math.sqrt(len(values))


def checkpoint_labels(paths: tuple[Path, ...]) -> list[str]:
    """File stems, or full paths when two stems clash."""
    stems = [p.stem for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def _record(label: str, arch: str, measured: str, n_classes: int, size: int, fractions: np.ndarray,
            rms: np.ndarray) -> dict:
    change, change_std, change_sem = _spread(fractions)
    error, error_std, error_sem = _spread(rms)
    return {"checkpoint": label, "arch": arch, "measured": measured, "K": n_classes, "ensemble": size,
            "argmax_change_fraction": change, "argmax_change_std": change_std, "argmax_change_sem": change_sem,
            "logit_rms": error, "logit_rms_std": error_std, "logit_rms_sem": error_sem, "n_datasets": len(fractions)}


def measure_equivariance(config: EquivarianceConfig, log: Callable[[str], None] = lambda _: None,
                         progress: Callable[[int, int], None] = lambda done, total: None,
                         options: MethodOptions | None = None) -> pd.DataFrame:
    """One row per (checkpoint, K, ensemble size) and per (method, K): mean, std and s.e.m.
    over datasets of the arg-max change fraction and of the log-probability RMS; ``measured``
    says how ("network": the checkpoint's network, "method": the method's classifier with one
    member and ``options``' weights). What could not run (TabPFN* beyond its class slots, a
    method without its package) is left out and described in ``frame.attrs["notes"]``.
    ``progress(done, total)`` is called as (checkpoint or method, K) measurements finish."""
    models = {label: load_checkpoint(path)[0] for label, path in zip(checkpoint_labels(config.checkpoints),
                                                                      config.checkpoints)}
    options = options or MethodOptions(device=config.device)
    methods, unavailable = prepare_methods(config.methods, options)
    device = resolve_device(config.device)

    def runnable_models(n_classes: int) -> dict:
        return {label: m for label, m in models.items() if m.class_limit is None or n_classes <= m.class_limit}

    total = sum(len(runnable_models(n_classes)) + len(methods) for n_classes in config.classes)
    done = 0
    progress(done, total)
    records = []
    notes = [f"{method_label(name, options)}: not measured, {reason}" for name, reason in unavailable.items()]
    for n_classes in config.classes:
        runnable = runnable_models(n_classes)
        notes += [f"{label}: K={n_classes} skipped, TabPFN* has {model.class_limit} class slots "
                  "(it needs ECOC beyond them)" for label, model in models.items() if label not in runnable]
        if not runnable and not methods:
            continue
        data = prior_datasets(n_classes, config.datasets, config.rows, config.seed)
        sigma, members = draw_permutations(config.datasets, n_classes, max(config.ensembles), config.seed)
        for label, model in runnable.items():
            started = time.perf_counter()
            fractions, rms = measure_model(model, data, n_classes, sigma, members, config.ensembles,
                                           config.softmax_temperature, config.tie_tolerance, device)
            records += [_record(label, model.arch, "network", n_classes, size, fractions[i], rms[i])
                        for i, size in enumerate(config.ensembles)]
            log(f"{label} K={n_classes}: {100 * fractions[0].mean():.2f}% arg-max changes with "
                f"{config.ensembles[0]} member(s), {100 * fractions[-1].mean():.2f}% with {config.ensembles[-1]} "
                f"({time.perf_counter() - started:.0f} s)")
            done += 1
            progress(done, total)
        for name, settings in methods.items():
            started = time.perf_counter()
            fractions, rms = measure_method(name, settings, data.x, data.y, data.n_train, n_classes, sigma, config.seed,
                                            config.tie_tolerance)
            records.append(_record(method_label(name, options), name, "method", n_classes, 1, fractions, rms))
            log(f"{method_label(name, options)} K={n_classes}: {100 * fractions.mean():.2f}% arg-max changes with "
                f"1 member, through its classifier ({time.perf_counter() - started:.0f} s)")
            done += 1
            progress(done, total)
    if not records:
        raise InvalidInputError(f"no checkpoint can run any of K={list(config.classes)}: " + "; ".join(notes))
    frame = pd.DataFrame.from_records(records)
    frame.attrs["notes"] = notes
    return frame
