"""The pretraining quality bar of the shipped (or given) checkpoints.

1. scikit-learn's iris, wine, breast_cancer and digits, 5-fold stratified CV accuracy:
   EquiTabPFN and TabPFN* against LogisticRegression on standardised inputs.
2. The <= 10-class tasks of an offline OpenML cache, first folds (test = fold i, train =
   the other folds): median accuracy of EquiTabPFN and TabPFN* against KNN (k=9) on
   standardised inputs.

    python benchmarks/quality.py --openml-cache ../shared/data/openml-cache \
        [--equitabpfn PATH] [--tabpfn-star PATH] [--folds 3] [--first-fold 0] \
        [--n-estimators 4] [--feature-transforms none quantile]

The bar is defined on folds 0-2; ``--first-fold 3`` gives an independent look at the same
tasks (for choosing settings without touching the bar's folds).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.preprocessing import FEATURE_TRANSFORMS
from equibench.pretrain import BUNDLED_DATASETS
from equibench.tasks.openml import load_task, working_cache


def standardised(estimator, categorical: np.ndarray | None = None):
    """Impute, one-hot encode categoricals, standardise, then ``estimator``."""
    if categorical is None or not categorical.any():
        return make_pipeline(SimpleImputer(), StandardScaler(), estimator)
    columns = make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")), categorical),
        (make_pipeline(SimpleImputer(), StandardScaler()), ~categorical),
        sparse_threshold=0.0,
    )
    return make_pipeline(columns, estimator)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--equitabpfn", default="default", help="checkpoint path (default: packaged)")
    parser.add_argument("--tabpfn-star", default="default", help="checkpoint path (default: packaged)")
    parser.add_argument("--openml-cache", help="OpenML cache directory (read-only is fine)")
    parser.add_argument("--folds", type=int, default=3, help="how many OpenML folds")
    parser.add_argument("--first-fold", type=int, default=0, help="the first OpenML fold used")
    parser.add_argument("--n-estimators", type=int, default=4)
    parser.add_argument("--feature-transforms", nargs="+", default=list(FEATURE_TRANSFORMS),
                        choices=FEATURE_TRANSFORMS, help="cycled over the ensemble members")
    args = parser.parse_args()

    settings = {"n_estimators": args.n_estimators, "feature_transforms": tuple(args.feature_transforms),
                "random_state": 0}
    pfns = {
        "EquiTabPFN": EquiTabPFNClassifier(checkpoint=args.equitabpfn, **settings),
        "TabPFN*": TabPFNStarClassifier(checkpoint=args.tabpfn_star, **settings),
    }
    print(f"### Bundled datasets (5-fold stratified CV accuracy, n_estimators={args.n_estimators}, "
          f"feature_transforms={' '.join(args.feature_transforms)})\n")
    print("| dataset | EquiTabPFN | TabPFN* | LogisticRegression | Equi - LR (points) |")
    print("|---|---:|---:|---:|---:|")
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    for name, loader in BUNDLED_DATASETS.items():
        X, y = loader(return_X_y=True)
        scores = {label: cross_val_score(model, X, y, cv=splitter).mean() for label, model in pfns.items()}
        scores["LR"] = cross_val_score(standardised(LogisticRegression(max_iter=2000)), X, y, cv=splitter).mean()
        print(f"| {name} | {100 * scores['EquiTabPFN']:.1f} | {100 * scores['TabPFN*']:.1f} | "
              f"{100 * scores['LR']:.1f} | {100 * (scores['EquiTabPFN'] - scores['LR']):+.1f} |", flush=True)

    if not args.openml_cache:
        return
    cache = working_cache(args.openml_cache, tempfile.mkdtemp(prefix="equibench-openml-"))
    task_ids = sorted(int(p.name) for p in (cache / "org/openml/www/tasks").iterdir() if p.name.isdigit())
    rows = []
    for task_id in task_ids:
        task = load_task(task_id, cache)
        if len(np.unique(task.y)) > 10:
            continue
        for fold in range(args.first_fold, min(args.first_fold + args.folds, task.n_folds)):
            train, validation, test = task.split(fold)
            train = np.concatenate([train, validation])
            X_train, X_test = task.X.iloc[train], task.X.iloc[test]
            y_train, y_test = task.y[train], task.y[test]
            models = {**pfns, "KNN": standardised(KNeighborsClassifier(n_neighbors=9), task.categorical)}
            for label, model in models.items():
                started = time.perf_counter()
                accuracy = float((model.fit(X_train, y_train).predict(X_test) == y_test).mean())
                rows.append({"task": task_id, "dataset": task.name, "fold": fold, "method": label,
                             "accuracy": accuracy, "seconds": time.perf_counter() - started})
    table = pd.DataFrame(rows).pivot_table(index=["task", "dataset"], columns="method", values="accuracy")
    last = args.first_fold + args.folds - 1
    print(f"\n### <= 10-class tasks of the OpenML cache (mean accuracy over folds {args.first_fold}-{last})\n")
    methods = list(table.columns)
    print("| task | dataset | " + " | ".join(methods) + " |")
    print("|---:|---|" + "---:|" * len(methods))
    for (task_id, name), values in table.iterrows():
        print(f"| {task_id} | {name} | " + " | ".join(f"{100 * values[m]:.1f}" for m in methods) + " |")
    print("\n| method | median accuracy | mean accuracy | wins vs KNN |")
    print("|---|---:|---:|---:|")
    for method in table.columns:
        wins = int((table[method] > table["KNN"]).sum()) if method != "KNN" else 0
        print(f"| {method} | {100 * table[method].median():.1f} | {100 * table[method].mean():.1f} | "
              f"{wins}/{len(table)} |")


if __name__ == "__main__":
    main()
