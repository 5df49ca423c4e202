"""Does a checkpoint use long contexts on real data? Accuracy on a bundled dataset as the
number of train rows in the context grows, beside KNN and logistic regression fitted on the
same rows.

For each stratified fold, the context is a random subset of n of the fold's train rows (the
same subset for every method; the subsets are drawn once per fold and n, seeded); the test
rows are the fold's. A PFN trained on short datasets may track KNN at small n and fall
behind as n grows: that gap is what longer training datasets (``--rows-curriculum``) are for.

    python benchmarks/context_real.py --checkpoint results/pretraining/equitabpfn/model.pt \
        [--checkpoint default] [--dataset digits] [--contexts 100 250 500 1000 1437] [--folds 5]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from equibench import EquiTabPFNClassifier, PretrainingLimitWarning
from equibench.tables import markdown_table

DATASETS = {"digits": load_digits, "breast_cancer": load_breast_cancer, "wine": load_wine, "iris": load_iris}
SEED = 0


def baselines() -> dict:
    """The references, fitted on standardised features: KNN (k=9, as the protocol's) and
    logistic regression."""
    return {
        "KNN": lambda: make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=9)),
        "LogisticRegression": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
    }


def context_accuracies(x: np.ndarray, y: np.ndarray, methods: dict, contexts: list[int], folds: int) -> pd.DataFrame:
    """Mean test accuracy (%) over the folds, one row per context size, one column per method."""
    rng = np.random.RandomState(SEED)
    scores = {(n, name): [] for n in contexts for name in methods}
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=SEED).split(x, y):
        for n in contexts:
            rows = train if n >= len(train) else rng.choice(train, n, replace=False)
            for name, make in methods.items():
                model = make().fit(x[rows], y[rows])
                scores[n, name].append(100 * model.score(x[test], y[test]))
    table = pd.DataFrame({name: [np.mean(scores[n, name]) for n in contexts] for name in methods}, index=contexts)
    table.index.name = "context rows"
    return table.round(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", action="append", help="EquiTabPFN checkpoint (repeatable; default: packaged)")
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="digits")
    parser.add_argument("--contexts", type=int, nargs="+", default=[100, 250, 500, 1000, 1437])
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    if min(args.contexts) < 1:
        parser.error("--contexts must be positive row counts")
    x, y = DATASETS[args.dataset](return_X_y=True)
    methods = {
        f"EquiTabPFN {path}": (lambda path=path: EquiTabPFNClassifier(
            checkpoint=path, n_estimators=1, device="cpu", random_state=SEED))
        for path in args.checkpoint or ["default"]
    }
    methods.update(baselines())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PretrainingLimitWarning)
        table = context_accuracies(x, y, methods, sorted(set(args.contexts)), args.folds)
    print(f"### {args.dataset}: test accuracy (%) vs train rows in the context ({args.folds} folds, seed {SEED})\n")
    print(markdown_table(table.reset_index()))


if __name__ == "__main__":
    main()
