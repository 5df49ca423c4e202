"""The report's fine-tuning section: zero-shot against fine-tuned accuracy per task, for each
architecture with a fine-tuned method (``equitabpfn-ft`` beside ``equitabpfn``, ``tabpfn-star-ft``
beside ``tabpfn-star``), on the (task, fold, variant) cells both ran."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..figures import new_figure, save_figure
from .tables import diagnostics, method_label

#: A fine-tuned method's name is its zero-shot method's with this suffix.
FINETUNED_SUFFIX = "-ft"


def finetuning_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per zero-shot method and task: the mean over paired folds of the zero-shot and fine-tuned
    accuracy (%), the fine-tuned cells' mean validation gain (points), kept share (of folds whose
    fine-tuning kept a step) and fine-tuning seconds; empty without a pair."""
    measures = ["finetune_kept_step", "finetune_validation_gain", "finetune_seconds"]
    tuned = cells[cells["method"].str.endswith(FINETUNED_SUFFIX)]
    tuned = tuned.assign(method=tuned["method"].str.removesuffix(FINETUNED_SUFFIX), **diagnostics(tuned, measures))
    keys = ["method", "variant", "task_id", "fold"]
    pairs = cells[keys + ["dataset", "accuracy"]].merge(tuned[keys + ["accuracy", *measures]], on=keys,
                                                        suffixes=("_zero_shot", "_finetuned"))
    if pairs.empty:
        return pd.DataFrame()
    pairs = pairs.assign(kept=pairs["finetune_kept_step"] > 0)
    table = pairs.groupby(["method", "task_id"]).agg(
        dataset=("dataset", "first"), zero_shot=("accuracy_zero_shot", "mean"), finetuned=("accuracy_finetuned", "mean"),
        validation_gain=("finetune_validation_gain", "mean"), kept=("kept", "mean"),
        seconds=("finetune_seconds", "mean"), folds=("fold", "size"))
    table[["zero_shot", "finetuned", "validation_gain"]] *= 100
    table["gain"] = table["finetuned"] - table["zero_shot"]
    return table


def finetuning_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "method": [method_label(method) for method, _ in table.index], "task": table["dataset"],
        "zero-shot (%)": table["zero_shot"].map("{:.2f}".format),
        "fine-tuned (%)": table["finetuned"].map("{:.2f}".format), "gain (points)": table["gain"].map("{:+.2f}".format),
        "validation gain (points)": table["validation_gain"].map("{:+.2f}".format),
        "folds kept tuned": (table["kept"] * table["folds"]).round().astype(int).astype(str) + " / " + table["folds"].astype(str),
        "fine-tune s": table["seconds"].map("{:.0f}".format),
    })


def finetuning_figure(table: pd.DataFrame, suite: str, stem: Path) -> list[Path]:
    """Fine-tuned (y) against zero-shot (x) accuracy per task, one colour per architecture, with the
    diagonal (above it: fine-tuning helped); the legend gives each architecture's median gain."""
    figure = new_figure(6.0, 5.5)
    axes = figure.subplots()
    low = min(table["zero_shot"].min(), table["finetuned"].min())
    high = max(table["zero_shot"].max(), table["finetuned"].max())
    margin = max(0.5, 0.05 * (high - low))
    axes.plot([low - margin, high + margin], [low - margin, high + margin], color="grey", linestyle="--", linewidth=1)
    for (method, chosen), colour in zip(table.groupby(level="method"), ("tab:blue", "tab:orange", "tab:green")):
        label = f"{method_label(method)}: median gain {np.median(chosen['gain']):+.2f} points ({len(chosen)} tasks)"
        axes.scatter(chosen["zero_shot"], chosen["finetuned"], s=40, color=colour, edgecolors="black",
                     linewidths=0.6, label=label, zorder=3)
    axes.set(xlabel="zero-shot accuracy (%)", ylabel="fine-tuned accuracy (%)",
             title=f"{suite}: fine-tuning on the table, per task")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    return save_figure(figure, stem)
