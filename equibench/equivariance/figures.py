"""The experiment's figures: the paper's equivariance gap (arg-max changes vs K and vs
ensemble size) and the 9-point toy's panels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap

from ..figures import new_figure, save_figure
from .experiment import arch_label
from .toy import TOY_EXTENT, TOY_ORDERINGS, differs_from_identity, toy_problem

DPI = 130
#: % arg-max changes of the paper's fully trained TabPFN, 1 member, by K. Source: the project's
#: specification (shared/docs/SPEC.md, section 4), for the paper's equivariance-error figure
#: (fig:equi-gap-ensemble, bottom), whose values the paper's text does not print.
PAPER_TABPFN = {2: 1.0, 4: 2.9, 8: 10.1, 10: 20.5}
#: The same source: K = 10 with 16 permutation-ensemble members.
PAPER_TABPFN_K10_E16 = 11.2
#: Where the reference values come from, as the experiment's README states it.
PAPER_SOURCE = ("values of the project's specification for the paper's equivariance-error figure, whose text prints "
                "no numbers")


def one_member(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one member: the networks' smallest ensemble, and every measured method's row."""
    networks = frame.measured == "network"
    return frame[(frame.ensemble == frame.ensemble[networks].min()) | ~networks]


def _plot_vs_classes(axes, frame: pd.DataFrame) -> None:
    single = one_member(frame)
    for index, (label, rows) in enumerate(single.groupby("checkpoint", sort=False)):
        rows = rows.sort_values("K")
        axes.errorbar(rows.K, 100 * rows.argmax_change_fraction, yerr=100 * rows.argmax_change_sem.fillna(0),
                      marker="o", capsize=3, color=f"C{index}",
                      label=f"{arch_label(rows.arch.iloc[0])} ({label})")
    axes.plot(list(PAPER_TABPFN), list(PAPER_TABPFN.values()), "s--", color="0.55",
              label="paper: TabPFN, full training")
    axes.set(xlabel="number of classes K", ylabel="arg-max changes (% of test rows)",
             title=f"vs K ({int(single.ensemble.min())} ensemble member)")
    axes.set_xticks(sorted(set(single.K) | set(PAPER_TABPFN)))


def _plot_vs_ensemble(axes, frame: pd.DataFrame) -> None:
    styles = ["-", "--", ":", "-."]
    frame = frame[frame.measured == "network"]  # the methods run with one member only
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
    """The paper's figure: % arg-max changes vs K (1 member; the checkpoints' networks and the
    measured methods) and vs ensemble size (the networks: one line per K for TabPFN*,
    EquiTabPFN at its worst K); error bars +-1 s.e.m. over datasets."""
    figure = new_figure(12, 4.8)
    left, right = figure.subplots(1, 2)
    _plot_vs_classes(left, frame)
    _plot_vs_ensemble(right, frame)
    for axes in (left, right):
        axes.set_ylim(bottom=-0.5)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle(f"Equivariance error: test rows whose predicted class changes when the classes are permuted "
                    f"({int(frame.n_datasets.max())} prior datasets per K; error bars: ±1 s.e.m.)", fontsize=11)
    return save_figure(figure, stem, dpi=DPI)


def plot_nine_point_toy(predictions: dict[str, list[np.ndarray]], stem: Path) -> list[Path]:
    """Rows: models; columns: ``TOY_ORDERINGS``; colour: predicted original class."""
    x_train, y_train, _ = toy_problem(2)
    colours = [f"C{c}" for c in range(9)]
    grid_size = next(iter(predictions.values()))[0].shape[0]
    half_step = (TOY_EXTENT[1] - TOY_EXTENT[0]) / (grid_size - 1) / 2  # mesh points are pixel centres
    extent = (TOY_EXTENT[0] - half_step, TOY_EXTENT[1] + half_step) * 2
    figure = new_figure(11.5, 3.7 * len(predictions) + 0.6)
    grid = figure.subplots(len(predictions), len(TOY_ORDERINGS), squeeze=False, sharex=True, sharey=True)
    image, differs = None, differs_from_identity(predictions)
    for row, (label, maps) in zip(grid, predictions.items()):
        for column, (axes, name, classes) in enumerate(zip(row, TOY_ORDERINGS, maps)):
            image = axes.imshow(classes, origin="lower", extent=extent, cmap=ListedColormap(colours),
                                vmin=-0.5, vmax=8.5, interpolation="nearest")
            axes.scatter(x_train[:, 0], x_train[:, 1], c=[colours[c] for c in y_train], marker="X", s=110,
                         edgecolors="black", linewidths=1.2)
            note = "" if column == 0 else f"\n{differs[label][column]:.1f}% of the grid differs from identity"
            axes.set_title(f"{label}: {name} ordering{note}", fontsize=9)
            axes.set(xlabel="feature 1", ylabel="feature 2", xticks=range(3), yticks=range(3))
            axes.label_outer()
    colourbar = figure.colorbar(image, ax=grid, ticks=range(9), shrink=0.8)
    colourbar.set_label("predicted class (original identity)")
    figure.suptitle("9 training points (crosses, one class each) under 3 class orderings; orderings (label of "
                    "class 0..8): " + "; ".join(f"{n} {''.join(map(str, o))}" for n, o in TOY_ORDERINGS.items()),
                    fontsize=9)
    return save_figure(figure, stem, dpi=DPI)
