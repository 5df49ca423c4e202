"""How ensemble members should present categorical columns: as category codes ("ordinal"),
as one 0/1 column per category ("onehot"), or half of the members each (the default).

Every task of an offline OpenML cache that has a categorical column is scored (test = fold
i, train = the other folds, as `benchmarks/quality.py`) with the classifier's default
settings except ``categorical_encodings``. Numeric tables are left out: the setting does
not change them. The default was chosen on the tasks marked "selection" and checked on the
others ("held out"), so that the choice is not tuned to every task shown here.

    python benchmarks/categorical_encodings.py --openml-cache ../shared/data/openml-cache \
        [--checkpoint default] [--folds 10] [--csv FILE]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from equibench import EquiTabPFNClassifier, PretrainingLimitWarning
from equibench.tables import markdown_table
from equibench.tasks.openml import load_cached_tasks

#: The tasks the default was chosen on (2026-11-24); the others were looked at only after.
SELECTION = (14967, 146821, 49, 23, 27, 29, 35, 50, 54, 47)
VARIANTS = {"ordinal": ("ordinal",), "onehot": ("onehot",), "default (both)": ("ordinal", "onehot")}


def scores(checkpoint: str, cache_dir: str, folds: range) -> pd.DataFrame:
    """Accuracy per task, fold and variant on the cache's tasks with categorical columns."""
    rows = []
    for task_id, task in load_cached_tasks(cache_dir).items():
        if not task.categorical.any():
            continue
        for fold in [f for f in folds if f < task.n_folds]:
            train, validation, test = task.split(fold)
            train = np.concatenate([train, validation])
            for label, encodings in VARIANTS.items():
                model = EquiTabPFNClassifier(checkpoint=checkpoint, categorical_encodings=encodings, random_state=0)
                model.fit(task.X.iloc[train], task.y[train])
                accuracy = float((model.predict(task.X.iloc[test]) == task.y[test]).mean())
                rows.append({"task": task_id, "dataset": task.name, "classes": len(np.unique(task.y)),
                             "categorical": int(task.categorical.sum()), "fold": fold, "variant": label,
                             "accuracy": accuracy})
        print(f"  task {task_id} ({task.name}) done", flush=True)
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per task: mean accuracy of each variant (points) and its difference to ordinal."""
    wide = table.pivot_table(index=["task", "dataset", "classes", "categorical"], columns="variant",
                             values="accuracy").reset_index()
    wide["set"] = np.where(wide.task.isin(SELECTION), "selection", "held out")
    for label in VARIANTS:
        wide[label] = 100 * wide[label]
    for label in ("onehot", "default (both)"):
        wide[f"{label} - ordinal"] = wide[label] - wide["ordinal"]
    return wide.sort_values(["set", "task"], ascending=[False, True])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openml-cache", required=True, help="OpenML cache directory (read-only is fine)")
    parser.add_argument("--checkpoint", default="default", help="EquiTabPFN checkpoint (default: packaged)")
    parser.add_argument("--folds", type=int, default=10, help="folds 0..N-1 of each task")
    parser.add_argument("--csv", help="also write every score (task, fold, variant) to this CSV file")
    args = parser.parse_args()
    warnings.simplefilter("ignore", PretrainingLimitWarning)
    started = time.perf_counter()
    table = scores(args.checkpoint, args.openml_cache, range(args.folds))
    if args.csv:
        table.to_csv(args.csv, index=False)
    wide = summary(table)
    print(f"\n### EquiTabPFN accuracy by categorical encoding (mean over folds 0-{args.folds - 1})\n")
    shown = wide.copy()
    for column in shown.columns[4:]:
        if column != "set":
            shown[column] = shown[column].map(lambda v: f"{v:+.1f}" if " - " in column else f"{v:.1f}")
    print(markdown_table(shown))
    print("| set | tasks | onehot - ordinal: mean / median | default - ordinal: mean / median |\n|---|---:|---:|---:|")
    for name, group in wide.groupby("set", sort=False):
        one, both = group["onehot - ordinal"], group["default (both) - ordinal"]
        print(f"| {name} | {len(group)} | {one.mean():+.1f} / {one.median():+.1f} | {both.mean():+.1f} / {both.median():+.1f} |")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
