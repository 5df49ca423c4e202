"""``equibench boundaries``: the paper's appendix figure of binary decision boundaries, several
methods on three 2-D scikit-learn datasets (moons, circles, linearly separable), the PFNs with
one ensemble member (no ensembling, to show how smooth and stable a single network is).

Every method comes from the method registry and runs through its evaluation interface
(``baselines.base.Method``); a method that cannot run here (no weights, a missing package) is
left out of the panels and named, with its reason, in the figure's caption.

    OUT/decision-boundaries.png, .pdf   rows: datasets; columns: the data, then one method each
    OUT/decision-boundaries.csv         test accuracy per (dataset, method), or why a method was skipped
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from sklearn.datasets import make_circles, make_classification, make_moons
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from .baselines.registry import check_weight_paths, method_spec
from .baselines.settings import MethodOptions
from .errors import InvalidInputError, MethodUnavailableError
from .evaluate.config import method_settings
from .figures import new_figure, save_figure

#: The PFNs with user-supplied or packaged weights first, then the classical baselines.
DEFAULT_METHODS = ("equitabpfn", "tabpfn-star", "tabpfn-v1", "tabpfn-v2", "tabicl", "knn", "linear-model",
                   "random-forest", "xgboost")
DATASET_NAMES = ("moons", "circles", "linearly separable")
TEST_FRACTION = 0.4
MARGIN = 0.5  # around the data, in standardised units
STEM = "decision-boundaries"
_POINTS = ListedColormap(["#FF0000", "#0000FF"])


def _two_d_dataset(name: str, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's classifier-comparison datasets: X (samples, 2), y (samples,) in {0, 1}."""
    if name == "moons":
        return make_moons(n_samples=samples, noise=0.3, random_state=seed)
    if name == "circles":
        return make_circles(n_samples=samples, noise=0.2, factor=0.5, random_state=seed)
    X, y = make_classification(n_samples=samples, n_features=2, n_redundant=0, n_informative=2,
                               n_clusters_per_class=1, random_state=seed)
    return X + 2 * np.random.default_rng(seed).uniform(size=X.shape), y


@dataclass(frozen=True)
class Split:
    """One standardised dataset, split into train and test rows, and its prediction grid."""

    X_train: np.ndarray  # (n_train, 2) float32
    y_train: np.ndarray  # (n_train,) int
    X_test: np.ndarray  # (n_test, 2) float32
    y_test: np.ndarray  # (n_test,) int
    xx: np.ndarray  # (grid, grid) first feature of the grid points
    yy: np.ndarray  # (grid, grid) second feature

    @property
    def grid_points(self) -> np.ndarray:
        return np.c_[self.xx.ravel(), self.yy.ravel()].astype(np.float32)  # (grid * grid, 2)


def make_splits(samples: int, grid: int, seed: int) -> dict[str, Split]:
    """The three datasets, standardised, split (stratified, ``TEST_FRACTION`` test rows) and gridded."""
    splits = {}
    for name in DATASET_NAMES:
        X, y = _two_d_dataset(name, samples, seed)
        X = StandardScaler().fit_transform(X).astype(np.float32)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=TEST_FRACTION, stratify=y,
                                                            random_state=seed)
        low, high = X.min(axis=0) - MARGIN, X.max(axis=0) + MARGIN
        xx, yy = np.meshgrid(np.linspace(low[0], high[0], grid), np.linspace(low[1], high[1], grid))
        splits[name] = Split(X_train, y_train, X_test, y_test, xx, yy)
    return splits


@dataclass(frozen=True)
class BoundaryConfig:
    """What ``equibench boundaries`` draws; validated on construction. ``options`` give the
    checkpoints, weights and device (their ensemble sizes are ignored: one member each)."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    samples: int = 100
    grid: int = 50  # prediction points per side (the PFNs predict grid² points per dataset)
    seed: int = 0
    options: MethodOptions = field(default_factory=MethodOptions)

    def __post_init__(self) -> None:
        if not self.methods:
            raise InvalidInputError("no methods selected: give at least one in `methods`")
        for name in self.methods:
            method_spec(name)
        check_weight_paths(self.options.weights)
        if len(set(self.methods)) != len(self.methods):
            raise InvalidInputError(f"`methods` listed more than once: {list(self.methods)}")
        if self.samples < 20:
            raise InvalidInputError(f"`samples` must be at least 20 (train and test rows of both classes), got {self.samples}")
        if self.grid < 2:
            raise InvalidInputError(f"`grid` needs at least 2 points per side, got {self.grid}")


@dataclass
class Boundaries:
    """What was measured: per (dataset, method) the probability of class 1 on the grid and the
    test accuracy; the methods skipped, with their reasons."""

    splits: dict[str, Split]
    methods: list[str]  # those that ran, in the configured order
    probabilities: dict[tuple[str, str], np.ndarray]  # (dataset, method) -> (grid, grid)
    accuracy: dict[tuple[str, str], float]
    skipped: dict[str, str]  # method -> reason

    def table(self) -> pd.DataFrame:
        """One row per (dataset, method): status, test accuracy or the reason it was skipped."""
        rows = []
        for dataset in self.splits:
            for method in [*self.methods, *self.skipped]:
                ran = method in self.methods
                rows.append({"dataset": dataset, "method": method, "label": method_spec(method).plain_label,
                             "status": "ok" if ran else "skipped", "reason": "" if ran else self.skipped[method],
                             "accuracy": self.accuracy[dataset, method] if ran else np.nan})
        return pd.DataFrame(rows)


def measure_boundaries(config: BoundaryConfig,
                       progress: Callable[[int, int], None] = lambda done, total: None) -> Boundaries:
    """Fit every method on every dataset's train rows, predict its test rows and grid; a method
    unavailable here is skipped at its first fit. ``progress(done, total)`` follows the fits."""
    splits = make_splits(config.samples, config.grid, config.seed)
    settings = {name: method_settings(name, config.options).variants((1,))[0] for name in config.methods}
    result = Boundaries(splits, [], {}, {}, {})
    total = len(splits) * len(config.methods)
    progress(0, total)
    for index, name in enumerate(config.methods):
        implementation = method_spec(name).implementation()
        for number, (dataset, split) in enumerate(splits.items()):
            np.random.seed(config.seed)
            torch.manual_seed(config.seed)
            method = implementation(2, config.seed, settings[name])
            try:
                method.fit(split.X_train, split.y_train)
            except MethodUnavailableError as error:
                result.skipped[name] = str(error)
                break
            proba = method.predict_proba(np.concatenate([split.X_test, split.grid_points]))[:, 1]  # (n_test + grid²,)
            n_test = len(split.y_test)
            result.accuracy[dataset, name] = float(np.mean((proba[:n_test] > 0.5) == split.y_test))
            result.probabilities[dataset, name] = proba[n_test:].reshape(split.xx.shape)
            progress(index * len(splits) + number + 1, total)
        if name not in result.skipped:
            result.methods.append(name)
        progress((index + 1) * len(splits), total)
    return result


def caption(result: Boundaries) -> str:
    """The figure's caption: what the panels show, and each skipped method with its reason."""
    text = ("Binary decision boundaries: colour is the predicted probability of class 1 (red 0, blue 1); train "
            "points solid, test points translucent; test accuracy at the bottom right. The PFNs run with one "
            "ensemble member.")
    if result.skipped:
        text += " Not shown: " + "; ".join(f"{method_spec(name).plain_label} ({reason})"
                                           for name, reason in result.skipped.items()) + "."
    return text


def _scatter(axes, split: Split) -> None:
    for X, y, alpha in ((split.X_train, split.y_train, None), (split.X_test, split.y_test, 0.5)):
        axes.scatter(X[:, 0], X[:, 1], c=y, cmap=_POINTS, edgecolors="black", linewidths=0.5, s=14, alpha=alpha)
    axes.set(xlim=(split.xx.min(), split.xx.max()), ylim=(split.yy.min(), split.yy.max()), xticks=(), yticks=())


def plot_boundaries(result: Boundaries, stem: Path) -> list[Path]:
    """Rows: datasets; columns: the data, then each method that ran; PNG and PDF."""
    columns = 1 + len(result.methods)
    figure = new_figure(2.3 * columns, 2.3 * len(result.splits) + 0.8)
    grid = figure.subplots(len(result.splits), columns, squeeze=False)
    levels = np.linspace(0, 1, 11)
    for row, (dataset, split) in zip(grid, result.splits.items()):
        row[0].set_ylabel(dataset)
        _scatter(row[0], split)
        for axes, method in zip(row[1:], result.methods):
            axes.contourf(split.xx, split.yy, result.probabilities[dataset, method], levels=levels,
                          cmap=colormaps["RdBu"], alpha=0.8)
            _scatter(axes, split)
            axes.text(0.97, 0.03, f"{result.accuracy[dataset, method]:.2f}", transform=axes.transAxes, ha="right",
                      va="bottom", fontsize=11, fontweight="bold", bbox={"facecolor": "white", "alpha": 0.7, "lw": 0})
    for axes, title in zip(grid[0], ["Input data", *(method_spec(m).plain_label for m in result.methods)]):
        axes.set_title(title, fontsize=10)
    figure.supxlabel(textwrap.fill(caption(result), width=max(60, 28 * columns)), fontsize=8)
    return save_figure(figure, stem, dpi=110)


def run_boundaries(config: BoundaryConfig, out: Path,
                   progress: Callable[[int, int], None] = lambda done, total: None) -> tuple[Boundaries, list[Path]]:
    """Measure, then write ``STEM``.png/.pdf and ``STEM``.csv into ``out``; return the
    measurements and the files written."""
    result = measure_boundaries(config, progress)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"`out` {str(out)!r} is an existing file, not a folder; pass a folder path")
    if not result.methods:
        raise MethodUnavailableError("no method could run: " + "; ".join(f"{m}: {r}" for m, r in result.skipped.items()))
    files = plot_boundaries(result, out / STEM)
    table = out / f"{STEM}.csv"
    result.table().to_csv(table, index=False, float_format="%.6g")
    return result, [*files, table]
