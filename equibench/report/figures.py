"""Figures of ``equibench report``: relative-accuracy box plots, critical-difference diagrams
and the runtime-vs-AUC bubble plot, each written as a PNG and a PDF by
``equibench.figures.save_figure`` (so the same results give the same files)."""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import warnings
from pathlib import Path

import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from ..figures import new_figure, save_figure
from .tables import method_label

MIN_TIME_S = 1e-4  # floor of the log time scales (a zero time cannot be drawn)


def _time_norm(times: pd.Series) -> LogNorm:
    low, high = max(times.min(), MIN_TIME_S), max(times.max(), MIN_TIME_S)
    if high / low < 10:  # widen a narrow range so the colours stay distinguishable
        centre = math.sqrt(low * high)
        low, high = centre / math.sqrt(10), centre * math.sqrt(10)
    return LogNorm(vmin=low, vmax=high)


def relative_accuracy_boxplot(relative: pd.Series, times: pd.Series, order: list[str], suite: str,
                              stem: Path) -> list[Path]:
    """Per-task accuracy improvement over KNN (``relative``, indexed by entry and task), one
    horizontal box per entry in ``order`` (best first, drawn on top), coloured by mean time per
    fold (``times``, by entry) on a log scale."""
    values = {entry: group.to_numpy() for entry, group in relative.groupby(level="entry")}
    entries = [entry for entry in reversed(order) if entry in values]
    figure = new_figure(8.5, 1.4 + 0.42 * len(entries))
    axes = figure.subplots()
    norm, cmap = _time_norm(times[entries]), colormaps["viridis"]
    boxes = axes.boxplot(
        [values[entry] for entry in entries], orientation="horizontal", patch_artist=True, widths=0.6,
        medianprops={"color": "red", "linewidth": 2}, flierprops={"markersize": 3},
    )
    for patch, entry in zip(boxes["boxes"], entries):
        patch.set_facecolor(cmap(norm(max(times[entry], MIN_TIME_S))))
    axes.set_yticks(range(1, len(entries) + 1), labels=entries)
    axes.axvline(0, color="grey", linestyle="--", linewidth=1)
    axes.grid(axis="x", alpha=0.3)
    n_tasks = relative.index.get_level_values("task_id").nunique()
    axes.set(xlabel="accuracy improvement over KNN (%)",
             title=f"{suite}: accuracy relative to KNN over {n_tasks} tasks (red: median)")
    colorbar = figure.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes)
    colorbar.set_label("mean time per fold (s)")
    return save_figure(figure, stem)


def critical_difference_diagram(auc: pd.DataFrame, suite: str, stem: Path) -> tuple[list[Path], str]:
    """Rank the columns of ``auc`` (rows: paired (task, fold) cells) with autorank
    (non-parametric, alpha 0.05) and draw its critical-difference diagram; return the files
    (none when no diagram could be drawn) and a sentence for the report."""
    from autorank import autorank, plot_stats

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):  # autorank prints as it goes
            warnings.simplefilter("ignore")
            result = autorank(auc, alpha=0.05, verbose=False, force_mode="nonparametric")
            axes = plot_stats(result, allow_insignificant=True, width=max(6.0, 1.0 + 0.7 * auc.shape[1]))
    except Exception as error:  # noqa: BLE001 - autorank raises many kinds; the report must still be written
        return [], f"No critical-difference diagram for {suite}: autorank failed ({type(error).__name__}: {error})."
    if axes is None:
        return [], (f"No critical-difference diagram for {suite}: with {auc.shape[1]} methods autorank runs a "
                    f"{result.omnibus} test (p = {result.pvalue:.3g}), which has no diagram.")
    figure = axes.figure
    figure.text(0.5, 1.0, f"{suite}: mean rank by AUC over {len(auc)} (task, fold) cells (1 = best)",
                ha="center", va="bottom", fontsize=10)
    paths = save_figure(figure, stem, tight=True)
    verdict = "significant" if result.pvalue < result.alpha else "not significant: no method is shown to differ"
    return paths, (f"Critical-difference diagram of {suite}: mean rank of per-(task, fold) AUC over {len(auc)} "
                   f"cells; methods joined by a bar are not significantly different (Nemenyi, critical difference "
                   f"{result.cd:.2f}); the Friedman test is {verdict} (p = {result.pvalue:.3g}).")


def _obstacles(axes, table: pd.DataFrame, radii: pd.Series) -> list[Bbox]:
    """Display boxes of every marker (by its radius in points) and of the Pareto front's segments."""
    scale = axes.figure.dpi / 72
    centres = axes.transData.transform(table[["time_s", "auc_rel_pct"]].to_numpy())
    boxes = [Bbox.from_bounds(x - r * scale, y - r * scale, 2 * r * scale, 2 * r * scale)
             for (x, y), r in zip(centres, radii)]
    front = axes.transData.transform(table[table["pareto"]].sort_values("time_s")[["time_s", "auc_rel_pct"]].to_numpy())
    for (x0, y0), (x1, y1) in itertools.pairwise(front):  # drawn as steps: along, then up
        boxes += [Bbox.from_extents(x0, y0 - 1, x1, y0 + 1), Bbox.from_extents(x1 - 1, y0, x1 + 1, y1)]
    return boxes


def _label_slots(radius: float) -> list[tuple[float, float, str, str]]:
    """Offsets (points) and alignments beside a marker of ``radius``: above, right, below, left, diagonals."""
    gap, diagonal = radius + 2, (radius + 2) / math.sqrt(2)
    return [(0, gap, "center", "bottom"), (gap, 0, "left", "center"), (0, -gap, "center", "top"),
            (-gap, 0, "right", "center"), (diagonal, diagonal, "left", "bottom"), (-diagonal, diagonal, "right", "bottom"),
            (diagonal, -diagonal, "left", "top"), (-diagonal, -diagonal, "right", "top")]


def _annotate(axes, row: pd.Series, slot: tuple[float, float, str, str]):
    dx, dy, ha, va = slot
    label = axes.annotate(row["variant"], (row["time_s"], row["auc_rel_pct"]), xytext=(dx, dy),
                          textcoords="offset points", ha=ha, va=va, fontsize=8, zorder=4)
    label.set_in_layout(False)
    return label


def _clashes(box: Bbox, others: list[Bbox], frame: Bbox) -> int:
    """How many of ``others`` the box overlaps; worse than any overlap when it leaves ``frame``."""
    inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    return sum(box.overlaps(other) for other in others) + (0 if inside else len(others) + 1)


def _label_markers(axes, table: pd.DataFrame, radii: pd.Series) -> None:
    """Write each ensemble variant beside its bubble, in the first slot that overlaps no other
    label, marker or front segment and stays inside the axes (else the least crowded slot)."""
    figure = axes.figure
    figure.draw_without_rendering()  # settles the layout and the axis limits
    renderer = figure.canvas.get_renderer()
    frame = axes.get_window_extent(renderer)
    obstacles = _obstacles(axes, table, radii)  # the first len(table) are the markers, in table order
    for index, (entry, row) in enumerate(table.iterrows()):
        if not row["ensemble"]:
            continue
        others = obstacles[:index] + obstacles[index + 1:]
        candidates = []
        for slot in _label_slots(radii[entry]):
            label = _annotate(axes, row, slot)
            box = label.get_window_extent(renderer)
            label.remove()
            candidates.append((_clashes(box, others, frame), box, slot))
            if candidates[-1][0] == 0:
                break
        _, box, slot = min(candidates, key=lambda candidate: candidate[0])
        _annotate(axes, row, slot)
        obstacles.append(box)


def ensemble_bubble_plot(table: pd.DataFrame, suite: str, stem: Path) -> list[Path]:
    """Mean time per fold (log x) vs mean AUC improvement over KNN (y) of every entry in
    ``table`` (see ``tables.ensemble_table``): ensemble variants as bubbles with area ∝
    members and labelled with their variant, other methods as diamonds, and the Pareto front."""
    figure = new_figure(9.5, 5.5)
    axes = figure.subplots()
    axes.set_xscale("log")
    table = table.assign(time_s=table["time_s"].clip(lower=MIN_TIME_S))
    area = table["members"] * min(60.0, 1500.0 / table["members"].max())
    area = area.where(table["ensemble"], 45.0)
    ensemble = table.groupby("method")["ensemble"].first()
    methods = sorted(ensemble.index, key=lambda method: (not ensemble[method], method_label(method).casefold()))
    palette = [*colormaps["tab10"].colors, *colormaps["Dark2"].colors]  # distinct colours, in the order of methods
    colours = {method: palette[index % len(palette)] for index, method in enumerate(methods)}
    handles = []
    for method in methods:
        rows = table[table["method"] == method]
        marker = "o" if rows["ensemble"].iloc[0] else "D"
        axes.scatter(rows["time_s"], rows["auc_rel_pct"], s=area[rows.index], marker=marker, color=colours[method],
                     alpha=0.65, edgecolors="black", linewidths=0.6, zorder=3)
        handles.append(Line2D([], [], linestyle="", marker=marker, markersize=8, markerfacecolor=colours[method],
                              markeredgecolor="black", label=method_label(method)))
    front = table[table["pareto"]].sort_values("time_s")
    axes.plot(front["time_s"], front["auc_rel_pct"], drawstyle="steps-post", linestyle="--", color="black",
              linewidth=1, zorder=2)
    handles.append(Line2D([], [], linestyle="--", color="black", linewidth=1, label="Pareto front"))
    axes.axhline(0, color="grey", linewidth=0.8, alpha=0.6)
    axes.margins(x=0.12, y=0.12)
    axes.grid(alpha=0.3, which="both")
    axes.set(xlabel="mean time per fold (s, log scale)", ylabel="mean AUC improvement over KNN (%)",
             title=f"{suite}: AUC vs runtime over ensemble sizes")
    axes.legend(handles=handles, title="bubble area ∝ ensemble members", fontsize=8, title_fontsize=8,
                loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    _label_markers(axes, table, (area / math.pi) ** 0.5)
    return save_figure(figure, stem)


def ratio_speedup_bars(table: pd.DataFrame, suite: str, stem: Path) -> list[Path]:
    """The right panel of the paper's bubble figure: per ensemble variant of the other PFNs
    (``table``, see ``tables.ratio_speedup_table``), its AUC ratio to KNN (blue, left axis;
    dashed: EquiTabPFN's) and the speed-up of EquiTabPFN with one member over it (green, right
    axis; the grey line marks 1×)."""
    figure = new_figure(max(6.5, 2.5 + 0.9 * len(table)), 4.5)
    ratio_axes = figure.subplots()
    speedup_axes = ratio_axes.twinx()
    positions = list(range(len(table)))
    width = 0.38
    equi_ratio = table["equitabpfn_auc_ratio"].iloc[0]
    ratio_axes.bar([p - width / 2 for p in positions], table["auc_ratio"], width, color="tab:blue",
                   label="AUC ratio to KNN")
    ratio_axes.axhline(equi_ratio, color="tab:blue", linestyle="--", linewidth=1,
                       label=f"{method_label('equitabpfn')}'s AUC ratio")
    speedup_axes.bar([p + width / 2 for p in positions], table["speedup"], width, color="tab:green",
                     label="speed-up of EquiTabPFN")
    speedup_axes.axhline(1, color="grey", linewidth=0.8)
    speedup_axes.set_ylim(0, 1.25 * max(1.0, table["speedup"].max()))
    low, high = min(table["auc_ratio"].min(), equi_ratio), max(table["auc_ratio"].max(), equi_ratio)
    ratio_axes.set_ylim(min(0.95, low - 0.02), high + 0.4 * (high - min(0.95, low - 0.02)))
    several = table["method"].nunique() > 1
    ratio_axes.set_xticks(positions, [f"{m}\n{v}" if several else v for m, v in zip(table["method"], table["variant"])])
    methods = ", ".join(dict.fromkeys(method_label(m) for m in table["method"]))
    ratio_axes.set_xlabel(f"ensemble variant of {methods}")
    ratio_axes.set_ylabel("mean AUC ratio to KNN", color="tab:blue")
    speedup_axes.set_ylabel("speed-up of EquiTabPFN (×; below 1: slower)", color="tab:green")
    ratio_axes.set_title(f"{suite}: AUC ratio to KNN and EquiTabPFN's speed-up as ensembles grow", fontsize=10)
    handles = [*ratio_axes.get_legend_handles_labels()[0], *speedup_axes.get_legend_handles_labels()[0]]
    ratio_axes.legend(handles=handles, fontsize=8, loc="upper left")
    return save_figure(figure, stem)


def accuracy_vs_time(table: pd.DataFrame, suite: str, stem: Path) -> list[Path]:
    """Mean accuracy (y) against mean seconds per 1,000 test rows (log x), one labelled point
    per entry of ``table`` (see ``tables.context_table``): fit + predict on the left (where a
    trained model spends its time), predict only on the right (where a PFN does)."""
    figure = new_figure(13.0, 5.0)
    panels = figure.subplots(1, 2, sharey=True)
    for axes, column, what in zip(panels, ("fit_predict_s_per_1k", "predict_s_per_1k"), ("fit + predict", "predict")):
        axes.set_xscale("log")
        times = table[column].clip(lower=MIN_TIME_S)
        axes.scatter(times, table["accuracy"], s=45, color="tab:blue", edgecolors="black", linewidths=0.6, zorder=3)
        for entry, x, y in zip(table.index, times, table["accuracy"]):
            axes.annotate(entry, (x, y), xytext=(5, 4), textcoords="offset points", fontsize=8)
        axes.margins(x=0.25, y=0.12)
        axes.grid(alpha=0.3, which="both")
        axes.set(xlabel=f"mean {what} time per 1,000 test rows (s, log scale)", title=f"{what} time")
    panels[0].set_ylabel("mean accuracy over tasks (%)")
    figure.suptitle(f"{suite}: accuracy vs time")
    return save_figure(figure, stem)
