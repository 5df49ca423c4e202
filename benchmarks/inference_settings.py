"""Inference settings of a PFN classifier, chosen on half of an OpenML cache's tasks and
confirmed on the other half (issue 13).

The classifiers' defaults (members, feature transforms, softmax temperature) were chosen on
the weak checkpoints of 2026-11-23. This measures a fixed grid of settings on a given
checkpoint: accuracy and log loss on every fold of every task of the cache, and 5-fold CV on
the bundled datasets. The tasks are split once, by sorted task id within each group (<= 10
and > 10 classes): even positions are the *selection* half, odd positions the *held-out*
half. A setting is chosen on the selection half; the held-out half and the bundled datasets
say whether the choice holds beyond the tasks it was chosen on.

    python benchmarks/inference_settings.py --openml-cache ../shared/data/openml-cache \
        [--checkpoint PATH] [--arch equitabpfn] [--settings NAME ...] [--csv FILE] [--threads 1]

``--csv`` keeps every score and is resumed: the (setting, task) units already in it are not
measured again, so a killed study continues where it stopped (losing the unit in flight). A
CSV holds one checkpoint's scores: give each checkpoint and ``--arch`` a file of its own.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold

from equibench import ECOCClassifier, EquiTabPFNClassifier, PretrainingLimitWarning, TabPFNStarClassifier
from equibench.atomic_files import atomic_write
from equibench.errors import EquibenchError
from equibench.evaluate.cells import reproducible_cell
from equibench.pretrain import BUNDLED_DATASETS
from equibench.tables import markdown_table
from equibench.tasks.openml import load_cached_tasks

CLASSIFIERS = {"equitabpfn": EquiTabPFNClassifier, "tabpfn-star": TabPFNStarClassifier}

# name -> classifier parameters; every setting is spelled out, so that its name keeps its
# meaning whatever the classifier's defaults are. The first is the classifiers' defaults: the
# reference of the "median change" columns.
SETTINGS = {
    "4 none+quantile T0.8": {"n_estimators": 4, "feature_transforms": ("none", "quantile"), "softmax_temperature": 0.8},
    "1 none": {"n_estimators": 1, "feature_transforms": ("none",), "softmax_temperature": 0.8},
    "2 none+quantile T0.8": {"n_estimators": 2, "feature_transforms": ("none", "quantile"), "softmax_temperature": 0.8},
    "4 none T0.8": {"n_estimators": 4, "feature_transforms": ("none",), "softmax_temperature": 0.8},
    "4 quantile T0.8": {"n_estimators": 4, "feature_transforms": ("quantile",), "softmax_temperature": 0.8},
    "8 none+quantile T0.8": {"n_estimators": 8, "feature_transforms": ("none", "quantile"), "softmax_temperature": 0.8},
    "4 none+quantile T0.9": {"n_estimators": 4, "feature_transforms": ("none", "quantile"), "softmax_temperature": 0.9},
    "4 none+quantile T1.0": {"n_estimators": 4, "feature_transforms": ("none", "quantile"), "softmax_temperature": 1.0},
}
COLUMNS = ["setting", "dataset", "task", "group", "half", "fold", "accuracy", "log_loss"]


def halves(groups: dict[int, str]) -> dict[int, str]:
    """task id -> "selection" or "held-out": alternate positions by sorted id within each group."""
    half = {}
    for group in sorted(set(groups.values())):
        for position, task_id in enumerate(sorted(t for t, g in groups.items() if g == group)):
            half[task_id] = "selection" if position % 2 == 0 else "held-out"
    return half


def fold_scores(model, X_train, y_train, X_test, y_test) -> tuple[float, float]:
    """Accuracy and log loss (over the classes seen at fit) of ``model`` fitted on the train rows."""
    model.fit(X_train, y_train)
    probabilities = model.predict_proba(X_test)
    classes = model.classes_
    accuracy = float((classes[probabilities.argmax(axis=1)] == y_test).mean())
    seen = np.isin(y_test, classes)  # a test class absent from train has no column
    loss = float(log_loss(y_test[seen], probabilities[seen], labels=classes)) if seen.any() else float("nan")
    return accuracy, loss


def bundled_rows(setting: str, make_model, done: set) -> list[dict]:
    """5-fold stratified CV (seed 0, as benchmarks/quality.py) on each bundled dataset (task -1)
    not in ``done``."""
    rows = []
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    for name, loader in BUNDLED_DATASETS.items():
        X, y = loader(return_X_y=True)
        if (setting, -1, name) in done:
            continue
        for fold, (train, test) in enumerate(splitter.split(X, y)):
            accuracy, loss = fold_scores(make_model(False), X[train], y[train], X[test], y[test])
            rows.append({"setting": setting, "dataset": name, "task": -1, "group": "bundled", "half": "bundled",
                         "fold": fold, "accuracy": accuracy, "log_loss": loss})
    return rows


def task_rows(setting: str, make_model, task, half: str, group: str) -> list[dict]:
    """Every fold of an OpenML task (test = fold i, train = the other folds, as benchmarks/quality.py)."""
    rows = []
    for fold in range(task.n_folds):
        train, validation, test = task.split(fold)
        train = np.concatenate([train, validation])
        accuracy, loss = fold_scores(make_model(group == ">10"), task.X.iloc[train], task.y[train],
                                     task.X.iloc[test], task.y[test])
        rows.append({"setting": setting, "dataset": task.name, "task": int(task.task_id), "group": group, "half": half,
                     "fold": fold, "accuracy": accuracy, "log_loss": loss})
    return rows


def median_change(per_task: pd.DataFrame, setting: str, half: str) -> float:
    """Median over the half's tasks (both groups) of ``setting``'s accuracy minus that of the
    first setting of ``SETTINGS`` (the classifiers' defaults); NaN if either lacks the tasks."""
    half_tasks = per_task[per_task.half == half].pivot(index=["task", "dataset"], columns="setting", values="accuracy")
    reference = next(iter(SETTINGS))
    if reference not in half_tasks or setting not in half_tasks:
        return float("nan")
    return float((half_tasks[setting] - half_tasks[reference]).median())


def summary(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (in ``SETTINGS`` order): mean accuracy and log loss over the tasks of
    each group and half, the median change per task against the defaults, then the bundled
    datasets' accuracies."""
    per_task = scores.groupby(["setting", "group", "half", "task", "dataset"])[["accuracy", "log_loss"]].mean().reset_index()
    table = {}
    for setting in [s for s in SETTINGS if s in set(per_task.setting)]:
        rows, line = per_task[per_task.setting == setting], {}
        for group in ("<=10", ">10"):
            for half in ("selection", "held-out"):
                part = rows[(rows.group == group) & (rows.half == half)]
                line[f"{group} {half} acc"] = 100 * part.accuracy.mean()
                line[f"{group} {half} loss"] = part.log_loss.mean()
        for half in ("selection", "held-out"):
            line[f"{half} median change"] = 100 * median_change(per_task, setting, half)
        for _, row in rows[rows.group == "bundled"].iterrows():
            line[row.dataset] = 100 * row.accuracy
        table[setting] = line
    return pd.DataFrame(table).T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openml-cache", required=True, help="OpenML cache directory (read-only is fine)")
    parser.add_argument("--checkpoint", default="default", help="checkpoint path (default: packaged)")
    parser.add_argument("--arch", choices=sorted(CLASSIFIERS), default="equitabpfn")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--csv", type=Path, help="every score; resumed when it exists")
    parser.add_argument("--threads", type=int, default=1, help="torch and OpenMP/BLAS threads (default 1)")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads takes a positive number, got {args.threads}")
    if args.checkpoint != "default" and not Path(args.checkpoint).is_file():
        parser.error(f"--checkpoint {args.checkpoint}: no such file; give a checkpoint written by equibench pretrain or export")
    if args.csv and args.csv.exists() and not set(COLUMNS) <= set(pd.read_csv(args.csv, nrows=0).columns):
        parser.error(f"--csv {args.csv}: not a file of this study (columns {', '.join(COLUMNS)}); give a new path")
    with reproducible_cell(args.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", PretrainingLimitWarning)  # > 100 features, > 3000 rows: the defaults apply
        try:
            study(args)
        except (EquibenchError, FileNotFoundError) as error:
            parser.exit(1, f"inference_settings.py: error: {error}\n")


def study(args: argparse.Namespace) -> None:
    """Measure every setting ``args`` names (skipping what ``args.csv`` holds) and print the summary."""
    scores = pd.read_csv(args.csv) if args.csv and args.csv.exists() else pd.DataFrame(columns=COLUMNS)
    done = set(zip(scores.setting, scores.task.astype(int), scores.dataset))  # the units measured
    tasks = load_cached_tasks(args.openml_cache)
    groups = {t: (">10" if len(np.unique(task.y)) > 10 else "<=10") for t, task in tasks.items()}
    half = halves(groups)

    def keep(rows: list[dict]) -> None:
        nonlocal scores
        scores = pd.concat([scores, pd.DataFrame(rows, columns=COLUMNS)], ignore_index=True)
        if args.csv:
            atomic_write(args.csv, lambda tmp: scores.to_csv(tmp, index=False))

    for setting in args.settings:
        def make_model(many_classes: bool, parameters=SETTINGS[setting]):
            model = CLASSIFIERS[args.arch](checkpoint=args.checkpoint, random_state=0, **parameters)
            if many_classes and args.arch == "tabpfn-star":  # 10 outputs: an error-correcting output code
                return ECOCClassifier(model, random_state=0)
            return model

        started = time.perf_counter()
        keep(bundled_rows(setting, make_model, done))
        for task_id, task in tasks.items():
            if (setting, task_id, task.name) not in done:
                keep(task_rows(setting, make_model, task, half[task_id], groups[task_id]))
        print(f"  {setting}: {time.perf_counter() - started:.0f} s", flush=True)

    table = summary(scores[scores.setting.isin(args.settings)])
    print(f"\n### Inference settings ({args.arch}, checkpoint {args.checkpoint}, threads {args.threads})\n")
    display = table.reset_index(names="setting")
    for column in display.columns[1:]:
        digits = 3 if column.endswith("loss") else 1
        display[column] = display[column].map(lambda v, d=digits: f"{v:.{d}f}")
    print(markdown_table(display))


if __name__ == "__main__":
    main()
