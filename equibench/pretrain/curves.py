"""Training curves of one or more pretraining runs (from their log.jsonl)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from ..errors import InvalidInputError
from ..figures import new_figure, save_image
from .run_dir import CONFIG_FILE, LOG_FILE, log_records

#: The validation record's equivariance error (see ``validation.prior_metrics``).
EQUIVARIANCE_ERROR = "prior_equivariance_error"
EQUIVARIANCE_SPREAD = "prior_equivariance_error_std"


def read_log(run_dir: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(step records, validation records) of a run directory."""
    path = Path(run_dir) / LOG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} does not exist: is {str(run_dir)!r} a pretraining output directory?")
    records = [record for _, record in log_records(path)]
    if not records:
        raise InvalidInputError(f"{str(path)!r} holds no step records yet: train for a step first")
    frame = pd.DataFrame(records)
    return tuple(frame[frame["kind"] == kind].dropna(axis=1, how="all").reset_index(drop=True)
                 for kind in ("step", "validation"))


def _parent_run(run_dir: Path) -> Path | None:
    """The run whose weights ``run_dir`` started from (``init_from``), if its log is there."""
    config = run_dir / CONFIG_FILE
    init_from = json.loads(config.read_text())["train"].get("init_from") if config.is_file() else None
    if init_from is None:
        return None
    parent = Path(init_from).parent
    return parent if (parent / LOG_FILE).is_file() else None


def read_lineage(run_dir: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """Like :func:`read_log`, with the runs it continued (``init_from``) first: steps count
    from the first run's start. Also returns the steps where each continuation began (its
    first validation is on its own prior, which may differ from the parent's)."""
    chain = [Path(run_dir)]
    while (parent := _parent_run(chain[0])) is not None and parent not in chain:
        chain.insert(0, parent)
    all_steps, all_validations, starts, offset = [], [], [], 0
    for index, directory in enumerate(chain):
        steps, validations = read_log(directory)
        if index:
            starts.append(offset)
        all_steps.append(steps.assign(step=steps["step"] + offset))
        all_validations.append(validations.assign(step=validations["step"] + offset))
        offset += int(steps["step"].max()) if len(steps) else 0
    return pd.concat(all_steps, ignore_index=True), pd.concat(all_validations, ignore_index=True), starts


def run_labels(run_dirs: list[str | os.PathLike]) -> dict[str, Path]:
    """Each run folder under the shortest end of its path that tells it from the others
    (``run``, or ``a/run`` and ``b/run`` for two folders named alike); a folder given twice is refused."""
    paths = [Path(run_dir) for run_dir in run_dirs]
    resolved = [path.resolve() for path in paths]
    for index, path in enumerate(resolved):
        if path in resolved[:index]:
            raise InvalidInputError(f"run folder {str(paths[index])!r} is given twice; name each run once")

    def label(path: Path) -> str:
        others = [other for other in resolved if other != path]
        depth = next(d for d in range(1, len(path.parts) + 1)
                     if all(other.parts[-d:] != path.parts[-d:] for other in others))
        return Path(*path.parts[-depth:]).as_posix()

    return {label(path): given for path, given in zip(resolved, paths)}


def plot_training_curves(runs: dict[str, str | os.PathLike], out_path: str | os.PathLike, smoothing: int = 50) -> Path:
    """One figure: training loss (moving average over ``smoothing`` steps) and validation
    prior loss vs step, validation accuracies (prior and bundled datasets) vs step and, when a
    run logged it, the equivariance error observed while training (% of prior test rows whose
    predicted class changes when the classes are permuted). A run that continued another
    (``init_from``) is drawn from the start of the first, with a dotted line where it took over."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if Path(out_path).suffix.lower().lstrip(".") not in FigureCanvasAgg.get_supported_filetypes():
        raise InvalidInputError(f"`out_path` {str(out_path)!r} has no image file extension; use .png, .pdf or .svg")
    if Path(out_path).is_dir():
        raise InvalidInputError(f"`out_path` {str(out_path)!r} is a folder; pass an image file path such as curves.png")
    lineages = {label: read_lineage(run_dir) for label, run_dir in runs.items()}
    logged = {column for _, validations, _ in lineages.values() for column in validations.columns}
    kinds = ["loss", "prior"] + (["bundled"] if _bundled_columns(logged) else []) \
        + (["equivariance"] if EQUIVARIANCE_ERROR in logged else [])
    figure = new_figure(4.4 * len(kinds), 4.5)
    panels = dict(zip(kinds, figure.subplots(1, len(kinds))))
    for index, (label, (steps, validations, starts)) in enumerate(lineages.items()):
        colour = f"C{index}"  # matplotlib's colour cycle
        for start in starts:
            for axes in panels.values():
                axes.axvline(start, color=colour, linestyle=":", linewidth=1)
        smoothed = steps["loss"].rolling(smoothing, min_periods=1).mean()
        panels["loss"].plot(steps["step"], smoothed, color=colour, label=f"{label} train (avg {smoothing} steps)")
        if "prior_loss" in validations:
            panels["loss"].plot(validations["step"], validations["prior_loss"], "o--", color=colour,
                                label=f"{label} validation")
            panels["prior"].plot(validations["step"], 100 * validations["prior_accuracy"], "o-", color=colour,
                                 label=label)
        for style, column in zip(["-", "--", ":", "-."], _bundled_columns(validations.columns)):  # their panel exists
            panels["bundled"].plot(validations["step"], 100 * validations[column], style, marker="o", markersize=3,
                                   color=colour, label=f"{label}: {column.removesuffix('_accuracy')}")
        if EQUIVARIANCE_ERROR in validations:  # with ±1 std over datasets where logged and > 0 (the paper's band)
            measured = validations.dropna(subset=[EQUIVARIANCE_ERROR])
            mean = 100 * measured[EQUIVARIANCE_ERROR]
            panels["equivariance"].plot(measured["step"], mean, "o-", color=colour, label=label)
            if EQUIVARIANCE_SPREAD in measured and (measured[EQUIVARIANCE_SPREAD].fillna(0.0) > 0).any():
                spread = 100 * measured[EQUIVARIANCE_SPREAD].fillna(0.0)
                panels["equivariance"].fill_between(measured["step"], (mean - spread).clip(lower=0), mean + spread,
                                                    color=colour, alpha=0.2, linewidth=0,
                                                    label=f"{label}: ±1 std over datasets")
    titles = {"loss": ("cross-entropy (nats)", "loss on prior test rows"),
              "prior": ("accuracy (%)", "validation: held-out prior datasets"),
              "bundled": ("accuracy (%)", "validation: bundled datasets (5-fold CV)"),
              "equivariance": ("arg-max changes (% of test rows)", "equivariance error (classes permuted)")}
    for kind, axes in panels.items():
        axes.set(xlabel="optimizer step", ylabel=titles[kind][0], title=titles[kind][1])
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    if "bundled" in panels:
        panels["bundled"].set_ylim(top=100)
    return save_image(figure, out_path, dpi=110)


def _bundled_columns(columns) -> list[str]:
    """The bundled datasets' accuracy columns of a validation log."""
    return [c for c in columns if c.endswith("_accuracy") and c != "prior_accuracy"]

