"""Target-equivariance error of PFN classifiers (the paper's "equivariance gap" figures).

Definition (paper, eq. "target permutation equivariance"): ``f`` is equivariant when
``sigma^-1(f(X, sigma(Y), X*)) == f(X, Y, X*)`` for every permutation ``sigma`` of the K
classes. A permutation is stored as an integer vector ``perm`` of length K: class ``k`` is
relabelled ``perm[k]``, so ``sigma(Y) = perm[Y]``, and an output computed on the relabelled
data is mapped back to the original class order by ``output[..., perm]``.

Two numbers measure how far ``f`` is from equivariant on one dataset:

* arg-max change fraction: the share of test rows whose predicted class (arg-max of
  ``f(X, Y)``) is no longer the top class of ``sigma^-1 f(X, sigma(Y))`` (beaten by more than
  ``tie_tolerance`` in log-probability, so float rounding between exactly tied classes is
  not counted as a change);
* log-probability RMS: the root mean square, over test rows and classes, of
  ``log_softmax(sigma^-1 f(X, sigma(Y))) - log_softmax(f(X, Y))``.

The experiment (``equibench equivariance``) measures both on prior datasets with exactly K
classes, for single networks and for permutation ensembles (the average of the mapped-back
softmax outputs over random relabellings of the training labels), draws the paper's
equivariance-gap figure and its 9-point 3x3-grid illustration.
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

from .classifier import EquiTabPFNClassifier, TabPFNStarClassifier
from .devices import resolve_device
from .model import default_checkpoint, load_checkpoint
from .prior import PriorConfig, sample_batch

#: Share of each prior dataset's rows used as training rows; the rest are test rows.
TRAIN_FRACTION = 0.5
#: Prior batches are drawn this many datasets at a time (so a run's datasets do not depend
#: on ``--datasets``: a smaller run uses a prefix of a larger one's).
PRIOR_BATCH = 64
#: Network calls hold at most this many (dataset, relabelling) pairs ...
FORWARD_BATCH = 32
#: ... and at most this many tokens (rows x slots): larger token tensors make CPU runs
#: slower (page-fault churn of freshly mapped memory).
FORWARD_TOKENS = 16384
#: Log-probability margin below which two classes count as tied for the arg-max change.
TIE_TOLERANCE = 1e-5
#: The classifiers' inference temperature, used for the ensembles' softmax outputs.
SOFTMAX_TEMPERATURE = 0.8
ARCH_LABELS = {"equitabpfn": "EquiTabPFN", "tabpfn-star": "TabPFN*"}
#: Paper (SPEC section 4): % arg-max changes of a fully trained TabPFN, 1 member, by K.
PAPER_TABPFN = {2: 1.0, 4: 2.9, 8: 10.1, 10: 20.5}
#: Paper: K = 10 with 16 permutation-ensemble members.
PAPER_TABPFN_K10_E16 = 11.2
#: The 9-point toy's class orderings: ordering[c] is the label given to original class c.
TOY_ORDERINGS = {
    "identity": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "reversed": (8, 7, 6, 5, 4, 3, 2, 1, 0),
    "shuffled": (4, 0, 7, 2, 8, 1, 6, 3, 5),
}
TOY_EXTENT = (-1.0, 3.0)  # the 3x3 training grid sits at coordinates 0, 1, 2


# ---------------------------------------------------------------------------
# The metric


@dataclass(frozen=True)
class EquivarianceError:
    """Equivariance error of one predictor on one dataset, over the given permutations."""

    argmax_change_fraction: float  # share of (permutation, test row) pairs whose class changes
    logit_rms: float  # RMS change of the log-probabilities over permutations, rows, classes


def unpermute(outputs: torch.Tensor, permutation: torch.Tensor) -> torch.Tensor:
    """Map outputs computed on labels relabelled by ``permutation`` back to the original
    class order: ``outputs[..., permutation]`` (``permutation`` broadcasts over rows)."""
    # outputs: (..., M, K), permutation: (..., 1, K) or (K,) -> (..., M, K)
    return outputs.gather(-1, permutation.expand_as(outputs))


def compare_log_probs(
    reference: torch.Tensor, mapped_back: torch.Tensor, tie_tolerance: float = TIE_TOLERANCE
) -> tuple[torch.Tensor, torch.Tensor]:
    """(arg-max change fraction, log-probability RMS) per dataset, both in the original
    class order; see the module docstring for the definitions."""
    # reference, mapped_back: (..., M, K) log-probabilities -> two (...,) tensors
    predicted = reference.argmax(dim=-1, keepdim=True)  # (..., M, 1)
    beaten = mapped_back.gather(-1, predicted)[..., 0] < mapped_back.amax(dim=-1) - tie_tolerance
    rms = (mapped_back - reference).square().mean(dim=(-2, -1)).sqrt()
    return beaten.to(reference.dtype).mean(dim=-1), rms


def _as_log_probs(outputs, output: str) -> torch.Tensor:
    values = torch.as_tensor(outputs).double()
    if output == "probs":
        return torch.log(values.clamp(min=torch.finfo(torch.float64).tiny))
    return torch.log_softmax(values, dim=-1)


def _check_permutations(permutations, n_classes: int) -> torch.Tensor:
    perms = torch.as_tensor(np.asarray(permutations), dtype=torch.int64)
    if perms.ndim == 1:
        perms = perms[None]
    expected = torch.arange(n_classes)
    if perms.ndim != 2 or perms.shape[1] != n_classes or not bool((perms.sort(dim=1).values == expected).all()):
        raise ValueError(f"permutations must be rows that each hold 0..{n_classes - 1} once, got {perms.tolist()}")
    return perms


def equivariance_error(
    predict: Callable,
    x_train,
    y_train,
    x_test,
    n_classes: int,
    permutations,
    output: str = "logits",
    tie_tolerance: float = TIE_TOLERANCE,
) -> EquivarianceError:
    """Equivariance error of ``predict(x_train, y_train, x_test, n_classes) -> (M, K)`` on one
    dataset, averaged over ``permutations`` ((P, K) or (K,), see the module docstring).

    ``predict`` receives torch tensors (x_train (N, F), y_train (N,) int64 in [0, K),
    x_test (M, F)) and may return a tensor or an array; ``output`` says whether it returns
    logits (or log-probabilities) or probabilities. The arg-max change fraction is the mean
    over permutations and test rows; the RMS is taken over permutations, rows and classes.
    """
    if output not in ("logits", "probs"):
        raise ValueError(f"output must be 'logits' or 'probs', got {output!r}")
    perms = _check_permutations(permutations, n_classes)
    x_train, x_test = torch.as_tensor(x_train), torch.as_tensor(x_test)
    y_train = torch.as_tensor(y_train, dtype=torch.int64)
    reference = _as_log_probs(predict(x_train, y_train, x_test, n_classes), output)  # (M, K)
    mapped_back = torch.stack([
        unpermute(_as_log_probs(predict(x_train, perm[y_train], x_test, n_classes), output), perm)
        for perm in perms
    ])  # (P, M, K)
    fractions, rms = compare_log_probs(reference.expand_as(mapped_back), mapped_back, tie_tolerance)  # (P,), (P,)
    return EquivarianceError(float(fractions.mean()), float(rms.square().mean().sqrt()))


# ---------------------------------------------------------------------------
# The experiment on prior datasets


def default_checkpoints() -> tuple[Path, ...]:
    """The packaged EquiTabPFN and TabPFN* checkpoints."""
    return tuple(default_checkpoint(arch) for arch in ARCH_LABELS)


@dataclass(frozen=True)
class EquivarianceConfig:
    """What ``equibench equivariance`` measures; validated on construction."""

    checkpoints: tuple[Path, ...] = field(default_factory=default_checkpoints)
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
        if not self.checkpoints:
            raise ValueError("give at least one checkpoint")
        if not self.classes or min(self.classes) < 2:
            raise ValueError(f"class counts K must be at least 2, got {list(self.classes)}")
        if not self.ensembles or min(self.ensembles) < 1:
            raise ValueError(f"ensemble sizes must be at least 1, got {list(self.ensembles)}")
        if self.datasets < 1:
            raise ValueError(f"the number of datasets must be at least 1, got {self.datasets}")
        n_train = math.floor(TRAIN_FRACTION * self.rows)
        if n_train < 2 * max(self.classes):
            raise ValueError(
                f"{self.rows} rows give {n_train} train rows, fewer than 2 per class for K={max(self.classes)}; "
                f"use at least {4 * max(self.classes)} rows"
            )
        if not self.softmax_temperature > 0 or not self.tie_tolerance >= 0:
            raise ValueError("softmax_temperature must be > 0 and tie_tolerance >= 0")


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
    raise ValueError(
        f"could only draw {kept} of {n_datasets} prior datasets with K={n_classes} whose classes all occur "
        f"among the train rows; use more --rows"
    )


def draw_permutations(
    n_datasets: int, n_classes: int, n_members: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per dataset: sigma, uniform among the non-identity permutations, (D, K); and the
    ensemble members' relabellings (D, E, K), member 0 the identity, the others uniform."""
    generator = _generator(seed, n_classes, 1)
    identity = torch.arange(n_classes)
    sigma = torch.rand(n_datasets, n_classes, generator=generator).argsort(dim=1)
    while bool((redraw := (sigma == identity).all(dim=1)).any()):
        sigma[redraw] = torch.rand(int(redraw.sum()), n_classes, generator=generator).argsort(dim=1)
    members = torch.rand(n_datasets, n_members, n_classes, generator=generator).argsort(dim=2)
    members[:, 0] = identity
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


def forward_batch_size(model: nn.Module, rows: int, n_classes: int) -> int:
    """(dataset, relabelling) pairs per network call: EquiTabPFN has 1 + K token slots per
    row, TabPFN* one."""
    slots = n_classes + 1 if model.arch == "equitabpfn" else 1
    return max(1, min(FORWARD_BATCH, FORWARD_TOKENS // (rows * slots)))


def _ensemble(log_probs: torch.Tensor) -> torch.Tensor:
    """log of the mean probability over the member axis 1."""
    # (D, E, M, K) -> (D, M, K)
    return torch.logsumexp(log_probs, dim=1) - math.log(log_probs.shape[1])


def measure_model(
    model: nn.Module, data: PriorDatasets, n_classes: int, sigma: torch.Tensor, members: torch.Tensor,
    ensembles: tuple[int, ...], temperature: float, tie_tolerance: float, device: torch.device,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-dataset (arg-max change fraction, log-probability RMS), each (len(ensembles), D).

    Ensemble of size E: members[:, :E] relabel the training labels for the reference
    prediction and ``members o sigma`` for the permuted one (so the ensemble is one fixed
    function of the data, and its permuted-back output is compared with its reference)."""
    model = model.to(device)
    n_train, n_members = data.n_train, members.shape[1]
    composed = members.gather(2, sigma[:, None, :].expand_as(members))  # (D, E, K): k -> pi_e[sigma[k]]
    relabels = torch.cat([members, composed], dim=1)  # (D, 2E, K)
    batch = forward_batch_size(model, data.x.shape[1], n_classes)
    per_call = max(1, batch // (2 * n_members))
    fractions, rms = [], []
    for start in range(0, len(sigma), per_call):
        part = slice(start, start + per_call)
        x = data.x[part].to(device)  # (d, R, F)
        y = data.y[part, :n_train].to(device)  # (d, N)
        log_probs = _member_log_probs(model, x[:, :n_train], y, x[:, n_train:], n_classes,
                                      relabels[part].to(device), temperature, batch)  # (d, 2E, M, K)
        scores = [compare_log_probs(_ensemble(log_probs[:, :size]),
                                    _ensemble(log_probs[:, n_members:n_members + size]), tie_tolerance)
                  for size in ensembles]
        fractions.append(torch.stack([s[0] for s in scores]))
        rms.append(torch.stack([s[1] for s in scores]))
    return torch.cat(fractions, dim=1).numpy(), torch.cat(rms, dim=1).numpy()


def _spread(values: np.ndarray) -> tuple[float, float, float]:
    """mean, standard deviation (ddof 1) and standard error; NaN spread for one value."""
    if len(values) < 2:
        return float(values.mean()), math.nan, math.nan
    std = float(values.std(ddof=1))
    return float(values.mean()), std, std / math.sqrt(len(values))


def checkpoint_labels(paths: tuple[Path, ...]) -> list[str]:
    """File stems, or full paths when two stems clash."""
    stems = [p.stem for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def measure_equivariance(config: EquivarianceConfig, log: Callable[[str], None] = lambda _: None,
                         progress: Callable[[int, int], None] = lambda done, total: None) -> pd.DataFrame:
    """One row per (checkpoint, K, ensemble size): mean, std and s.e.m. over datasets of the
    arg-max change fraction and of the log-probability RMS. Cells a model cannot run
    (TabPFN* beyond its class slots) are left out and described in ``frame.attrs["notes"]``.
    ``progress(done, total)`` is called as (checkpoint, K) measurements finish."""
    models = {label: load_checkpoint(path)[0] for label, path in zip(checkpoint_labels(config.checkpoints),
                                                                      config.checkpoints)}
    device = resolve_device(config.device)

    def runnable_models(n_classes: int) -> dict:
        return {label: m for label, m in models.items() if m.arch == "equitabpfn" or n_classes <= m.config.max_classes}

    total = sum(len(runnable_models(n_classes)) for n_classes in config.classes)
    done = 0
    progress(done, total)
    records, notes = [], []
    for n_classes in config.classes:
        runnable = runnable_models(n_classes)
        notes += [f"{label}: K={n_classes} skipped, TabPFN* has {model.config.max_classes} class slots "
                  "(it needs ECOC beyond them)" for label, model in models.items() if label not in runnable]
        if not runnable:
            continue
        data = prior_datasets(n_classes, config.datasets, config.rows, config.seed)
        sigma, members = draw_permutations(config.datasets, n_classes, max(config.ensembles), config.seed)
        for label, model in runnable.items():
            started = time.perf_counter()
            fractions, rms = measure_model(model, data, n_classes, sigma, members, config.ensembles,
                                           config.softmax_temperature, config.tie_tolerance, device)
            for i, size in enumerate(config.ensembles):
                change, change_std, change_sem = _spread(fractions[i])
                error, error_std, error_sem = _spread(rms[i])
                records.append({
                    "checkpoint": label, "arch": model.arch, "K": n_classes, "ensemble": size,
                    "argmax_change_fraction": change, "argmax_change_std": change_std,
                    "argmax_change_sem": change_sem, "logit_rms": error, "logit_rms_std": error_std,
                    "logit_rms_sem": error_sem, "n_datasets": fractions.shape[1],
                })
            log(f"{label} K={n_classes}: {100 * fractions[0].mean():.2f}% arg-max changes with "
                f"{config.ensembles[0]} member(s), {100 * fractions[-1].mean():.2f}% with {config.ensembles[-1]} "
                f"({time.perf_counter() - started:.0f} s)")
            done += 1
            progress(done, total)
    if not records:
        raise ValueError(f"no checkpoint can run any of K={list(config.classes)}: " + "; ".join(notes))
    frame = pd.DataFrame.from_records(records)
    frame.attrs["notes"] = notes
    return frame


# ---------------------------------------------------------------------------
# Figures


def _save(figure, stem: Path) -> list[Path]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    stem.parent.mkdir(parents=True, exist_ok=True)
    canvas = FigureCanvasAgg(figure)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".pdf")]
    canvas.print_figure(paths[0], dpi=130)
    figure.set_layout_engine("none")  # the PDF keeps the layout computed for the PNG
    canvas.print_figure(paths[1])
    return paths


def _plot_vs_classes(axes, frame: pd.DataFrame) -> None:
    single = frame[frame.ensemble == frame.ensemble.min()]
    for index, (label, rows) in enumerate(single.groupby("checkpoint", sort=False)):
        rows = rows.sort_values("K")
        axes.errorbar(rows.K, 100 * rows.argmax_change_fraction, yerr=100 * rows.argmax_change_sem.fillna(0),
                      marker="o", capsize=3, color=f"C{index}",
                      label=f"{ARCH_LABELS.get(rows.arch.iloc[0], rows.arch.iloc[0])} ({label})")
    axes.plot(list(PAPER_TABPFN), list(PAPER_TABPFN.values()), "s--", color="0.55",
              label="paper: TabPFN, full training")
    axes.set(xlabel="number of classes K", ylabel="arg-max changes (% of test rows)",
             title=f"vs K ({int(single.ensemble.min())} ensemble member)")
    axes.set_xticks(sorted(set(single.K) | set(PAPER_TABPFN)))


def _plot_vs_ensemble(axes, frame: pd.DataFrame) -> None:
    styles = ["-", "--", ":", "-."]
    non_equivariant = [label for label, rows in frame.groupby("checkpoint", sort=False)
                       if rows.arch.iloc[0] != "equitabpfn"]
    colours = {k: f"C{i + 2}" for i, k in enumerate(sorted(frame.K.unique()))}
    for index, label in enumerate(non_equivariant):
        for n_classes, rows in frame[frame.checkpoint == label].groupby("K"):
            name = f"K={n_classes}" + (f" ({label})" if len(non_equivariant) > 1 else "")
            axes.errorbar(rows.ensemble, 100 * rows.argmax_change_fraction, yerr=100 * rows.argmax_change_sem.fillna(0),
                          marker="o", capsize=3, linestyle=styles[index % len(styles)], color=colours[n_classes], label=f"TabPFN* {name}")
    for index, (label, rows) in enumerate(frame[frame.arch == "equitabpfn"].groupby("checkpoint", sort=False)):
        worst = rows.groupby("ensemble").argmax_change_fraction.max()
        axes.plot(worst.index, 100 * worst.values, "D-", color="black" if index == 0 else f"C{index}", linewidth=2,
                  label=f"EquiTabPFN ({label}), every K")
    if frame.ensemble.max() >= 16:
        axes.plot([16], [PAPER_TABPFN_K10_E16], "*", markersize=11, color="0.55", label="paper: TabPFN K=10, 16 members")
    axes.set_xscale("log", base=2)
    sizes = sorted(frame.ensemble.unique())
    axes.set_xticks(sizes, [str(s) for s in sizes])
    axes.set(xlabel="permutation-ensemble size (members)", ylabel="arg-max changes (% of test rows)",
             title="vs ensemble size")


def plot_equivariance_gap(frame: pd.DataFrame, stem: Path) -> list[Path]:
    """The paper's figure: % arg-max changes vs K (1 member) and vs ensemble size (one line
    per K for TabPFN*, EquiTabPFN at its worst K); error bars +-1 s.e.m. over datasets."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = figure.subplots(1, 2)
    _plot_vs_classes(left, frame)
    _plot_vs_ensemble(right, frame)
    for axes in (left, right):
        axes.set_ylim(bottom=-0.5)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(f"Equivariance error: test rows whose predicted class changes when the classes are permuted "
                    f"({int(frame.n_datasets.max())} prior datasets per K; error bars: ±1 s.e.m.)", fontsize=11)
    return _save(figure, stem)


# ---------------------------------------------------------------------------
# The 9-point toy (3x3 grid, one class per point)


def toy_problem(grid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """9 training points on the 3x3 grid {0, 1, 2}^2 (class 3 * row + column) and a
    ``grid`` x ``grid`` mesh of test points over ``TOY_EXTENT``^2."""
    # -> x_train (9, 2), y_train (9,), mesh (grid * grid, 2) in row-major (y, x) order
    coordinates = np.arange(3, dtype=np.float64)
    gy, gx = np.meshgrid(coordinates, coordinates, indexing="ij")
    x_train = np.stack([gx.ravel(), gy.ravel()], axis=1)
    axis = np.linspace(*TOY_EXTENT, grid)
    my, mx = np.meshgrid(axis, axis, indexing="ij")
    return x_train, np.arange(9), np.stack([mx.ravel(), my.ravel()], axis=1)


def toy_predictions(model: nn.Module, grid: int, ordering: tuple[int, ...], device: str = "cpu",
                    seed: int = 0) -> np.ndarray:
    """Predicted ORIGINAL class on the mesh, (grid, grid), when original class c is given
    the label ``ordering[c]``; through the classifier (its preprocessing, 1 member)."""
    classifier_class = EquiTabPFNClassifier if model.arch == "equitabpfn" else TabPFNStarClassifier
    classifier = classifier_class(checkpoint=model, n_estimators=1, device=device, random_state=seed)
    x_train, y_train, mesh = toy_problem(grid)
    relabel = np.asarray(ordering)
    predicted = classifier.fit(x_train, relabel[y_train]).predict(mesh)  # labels 0..8 (classes_ sorted)
    return np.argsort(relabel)[predicted].reshape(grid, grid)


def plot_nine_point_toy(predictions: dict[str, list[np.ndarray]], stem: Path) -> list[Path]:
    """Rows: models; columns: ``TOY_ORDERINGS``; colour: predicted original class."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    x_train, y_train, _ = toy_problem(2)
    colours = [f"C{c}" for c in range(9)]
    grid_size = next(iter(predictions.values()))[0].shape[0]
    half_step = (TOY_EXTENT[1] - TOY_EXTENT[0]) / (grid_size - 1) / 2  # mesh points are pixel centres
    extent = (TOY_EXTENT[0] - half_step, TOY_EXTENT[1] + half_step) * 2
    figure = Figure(figsize=(11.5, 3.7 * len(predictions) + 0.6), layout="constrained")
    grid = figure.subplots(len(predictions), len(TOY_ORDERINGS), squeeze=False, sharex=True, sharey=True)
    image = None
    for row, (label, maps) in zip(grid, predictions.items()):
        for column, (axes, name, classes) in enumerate(zip(row, TOY_ORDERINGS, maps)):
            image = axes.imshow(classes, origin="lower", extent=extent, cmap=ListedColormap(colours),
                                vmin=-0.5, vmax=8.5, interpolation="nearest")
            axes.scatter(x_train[:, 0], x_train[:, 1], c=[colours[c] for c in y_train], marker="X", s=110,
                         edgecolors="black", linewidths=1.2)
            differs = 100 * np.mean(classes != maps[0])
            note = "" if column == 0 else f"\n{differs:.1f}% of the grid differs from identity"
            axes.set_title(f"{label}: {name} ordering{note}", fontsize=9)
            axes.set(xlabel="feature 1", ylabel="feature 2", xticks=range(3), yticks=range(3))
            axes.label_outer()
    colourbar = figure.colorbar(image, ax=grid, ticks=range(9), shrink=0.8)
    colourbar.set_label("predicted class (original identity)")
    figure.suptitle("9 training points (crosses, one class each) under 3 class orderings; orderings (label of "
                    "class 0..8): " + "; ".join(f"{n} {''.join(map(str, o))}" for n, o in TOY_ORDERINGS.items()),
                    fontsize=9)
    return _save(figure, stem)


def nine_point_toy(models: dict[str, nn.Module], stem: Path, grid: int = 150, device: str = "cpu",
                   seed: int = 0) -> tuple[list[Path], dict[str, list[float]]]:
    """Draw the toy for each model; also return, per model, the % of the mesh whose
    predicted class differs from the identity ordering, one value per ordering."""
    predictions = {label: [toy_predictions(model, grid, o, device, seed) for o in TOY_ORDERINGS.values()]
                   for label, model in models.items()}
    differs = {label: [float(100 * np.mean(m != maps[0])) for m in maps] for label, maps in predictions.items()}
    return plot_nine_point_toy(predictions, stem), differs


def _toy_models(config: EquivarianceConfig) -> dict[str, nn.Module]:
    """The first checkpoint of each architecture, EquiTabPFN first."""
    chosen = {}
    for label, path in zip(checkpoint_labels(config.checkpoints), config.checkpoints):
        model = load_checkpoint(path)[0]
        chosen.setdefault(model.arch, (f"{ARCH_LABELS.get(model.arch, model.arch)} ({label})", model))
    return dict(chosen[arch] for arch in ARCH_LABELS if arch in chosen)


# ---------------------------------------------------------------------------
# Files


def _percent(mean: float, sem: float) -> str:
    return f"{100 * mean:.2f}" + ("" if math.isnan(sem) else f" ± {100 * sem:.2f}")


def markdown_table(frame: pd.DataFrame) -> str:
    """The results as a Markdown table (mean ± s.e.m.; std in the CSV)."""
    lines = ["| checkpoint | arch | K | ensemble | arg-max changes (%) | log-prob RMS | datasets |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in frame.itertuples():
        rms = f"{r.logit_rms:.3g}" + ("" if math.isnan(r.logit_rms_sem) else f" ± {r.logit_rms_sem:.2g}")
        lines.append(f"| {r.checkpoint} | {ARCH_LABELS.get(r.arch, r.arch)} | {r.K} | {r.ensemble} | "
                     f"{_percent(r.argmax_change_fraction, r.argmax_change_sem)} | {rms} | {r.n_datasets} |")
    return "\n".join(lines) + "\n"


def _readme(config: EquivarianceConfig, frame: pd.DataFrame, toy: dict | None, seconds: float) -> str:
    n_train = math.floor(TRAIN_FRACTION * config.rows)
    paper = ", ".join(f"K={k} {v}%" for k, v in PAPER_TABPFN.items())
    lines = [
        "# Target-equivariance error", "",
        f"Checkpoints: {', '.join(str(p) for p in config.checkpoints)}.",
        (f"K in {list(config.classes)}, ensemble sizes {list(config.ensembles)}, {config.datasets} prior datasets "
         f"per K ({config.rows} rows: {n_train} train, {config.rows - n_train} test; all K classes among the train "
         f"rows), seed {config.seed}, device {config.device}; {seconds:.0f} s."), "",
        ("Per dataset, sigma is a random non-identity class permutation; a test row counts as changed when the "
         f"class predicted on (X, Y) is beaten (by more than {config.tie_tolerance:g} in log-probability) in "
         "sigma^-1 f(X, sigma(Y)). The log-prob RMS compares log softmax(logits / "
         f"{config.softmax_temperature:g}) of the two. An ensemble of E members averages the mapped-back softmax "
         "outputs over E relabellings of the training labels (member 0 the identity, the others random; the "
         "permuted run uses the same relabellings composed with sigma)."), "",
        "## Files", "",
        ("- `equivariance.csv`: one row per (checkpoint, K, ensemble): mean, std and s.e.m. over datasets of the "
         "arg-max change fraction and the log-prob RMS."),
        "- `equivariance.md`: the same as a table (%, mean ± s.e.m.).",
        ("- `equivariance-gap.png` / `.pdf`: left, % arg-max changes vs K with one member, one line per checkpoint "
         f"(grey: the paper's fully trained TabPFN, {paper}); right, vs ensemble size, one line per K for "
         f"TabPFN*, EquiTabPFN at its worst K (grey star: paper, K=10 with 16 members, {PAPER_TABPFN_K10_E16}%)."),
    ]
    if toy is not None:
        lines.append("- `nine-point-toy.png` / `.pdf`: 9 training points on a 3x3 grid, one class each, predicted "
                     "class (mapped back to the original identity) on a dense grid under 3 class orderings; an "
                     "equivariant model gives identical panels.")
    lines += ["", "## One ensemble member", "", markdown_table(frame[frame.ensemble == frame.ensemble.min()])]
    if toy is not None:
        lines += ["## 9-point toy: % of the grid differing from the identity ordering", ""]
        lines += [f"- {label}: " + ", ".join(f"{name} {value:.1f}%" for name, value in zip(TOY_ORDERINGS, values))
                  for label, values in toy.items()]
        lines.append("")
    if frame.attrs.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in frame.attrs["notes"]] + [""]
    return "\n".join(lines)


def run_equivariance(config: EquivarianceConfig, out: Path, toy: bool = True, toy_grid: int = 150,
                     log: Callable[[str], None] = lambda _: None,
                     progress: Callable[[int, int], None] = lambda done, total: None) -> pd.DataFrame:
    """Measure, then write equivariance.csv/.md, equivariance-gap.png/.pdf,
    nine-point-toy.png/.pdf (unless ``toy`` is False) and README.md into ``out``."""
    if toy_grid < 2:
        raise ValueError(f"the toy grid needs at least 2 points per side, got {toy_grid}")
    for path in config.checkpoints:
        load_checkpoint(path)  # fail on a bad file before any work
    started = time.perf_counter()
    frame = measure_equivariance(config, log, progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "equivariance.csv", index=False)
    notes = "".join(f"\n- {note}" for note in frame.attrs["notes"])
    (out / "equivariance.md").write_text(markdown_table(frame) + (f"\nNotes:{notes}\n" if notes else ""))
    plot_equivariance_gap(frame, out / "equivariance-gap")
    differs = None
    if toy:
        _, differs = nine_point_toy(_toy_models(config), out / "nine-point-toy", toy_grid, config.device, config.seed)
    (out / "README.md").write_text(_readme(config, frame, differs, time.perf_counter() - started))
    return frame
