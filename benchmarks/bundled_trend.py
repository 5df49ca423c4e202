"""The quality bar's bundled rows over several checkpoints, finer than accuracy (issue 13).

benchmarks/quality.py scores iris, wine, breast_cancer and digits by 5-fold accuracy, which
moves one test row at a time: on iris one row is 0.7 points. To tell whether more training
brings a row closer to the bar, this prints, for each checkpoint and dataset, with the bar's
folds (StratifiedKFold(5, shuffle, seed 0)) and the classifier's defaults (random_state=0):
the bar's accuracy (mean over folds), the cross-validated log loss, the errors, and the
*nearest miss*: p(true class) - max p(other class) of the misclassified row closest to
being right (0 would flip it; n/a without errors). LogisticRegression (standardised inputs,
the bar's reference) comes first, with the accuracy the bar asks for (its own - 1 point).

    python benchmarks/bundled_trend.py CHECKPOINT [CHECKPOINT ...] [--datasets iris digits] [--threads 1]

A checkpoint's architecture and step are read from its model card.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from quality import standardised
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.errors import EquibenchError
from equibench.evaluate.cells import reproducible_cell
from equibench.model.checkpoint import read_card
from equibench.pretrain import BUNDLED_DATASETS
from equibench.tables import markdown_table

CLASSIFIERS = {"equitabpfn": EquiTabPFNClassifier, "tabpfn-star": TabPFNStarClassifier}
BAR_MARGIN = 0.01  # the bar: the PFN's accuracy >= LogisticRegression's - 1 point


def cv_row(model, X: np.ndarray, y: np.ndarray) -> dict:
    """The bar's 5-fold accuracy (mean over folds), log loss, errors and nearest miss of
    ``model`` on ``X`` (n, F) and ``y`` (n,), class codes 0..K-1."""
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    proba = cross_val_predict(model, X, y, cv=splitter, method="predict_proba")  # (n, K)
    if not np.isfinite(proba).all():
        raise EquibenchError("a model predicted non-finite probabilities; its scores are not reported")
    rows = np.arange(len(y))
    others = proba.copy()
    others[rows, y] = -np.inf
    margin = proba[rows, y] - others.max(axis=1)  # (n,)
    correct = proba.argmax(axis=1) == y  # as predict
    misses = margin[~correct]
    return {
        "accuracy": np.mean([correct[test].mean() for _, test in splitter.split(X, y)]),
        "log_loss": log_loss(y, proba, labels=np.arange(proba.shape[1])),
        "errors": int((~correct).sum()),
        "nearest_miss": misses.max() if misses.size else np.nan,
    }


def trend(checkpoints: list[str], datasets: list[str]) -> pd.DataFrame:
    """One row per (dataset, model): LogisticRegression first, then each checkpoint."""
    cards = {path: read_card(path) for path in checkpoints}
    rows = []
    for name in datasets:
        X, y = BUNDLED_DATASETS[name](return_X_y=True)
        y = np.unique(y, return_inverse=True)[1]
        reference = cv_row(standardised(LogisticRegression(max_iter=2000)), X, y)
        rows.append({"dataset": name, "model": "LogisticRegression", "step": "n/a", **reference,
                     "bar": reference["accuracy"] - BAR_MARGIN})
        for path, card in cards.items():
            model = CLASSIFIERS[card.arch](checkpoint=path, random_state=0)
            rows.append({"dataset": name, "model": f"{card.arch} ({path})", "step": card.steps,
                         **cv_row(model, X, y), "bar": np.nan})
            print(f"  {name}: {path} done", flush=True)
    return pd.DataFrame(rows)


def display(table: pd.DataFrame) -> pd.DataFrame:
    """The table's cells as strings: accuracies in points, log loss and margins to 4 / 3 places."""
    return pd.DataFrame({
        "dataset": table.dataset, "model": table.model, "step": table.step.astype(str),
        "accuracy": (100 * table.accuracy).map("{:.1f}".format),
        "bar asks": (100 * table.bar).map(lambda v: "n/a" if np.isnan(v) else f"{v:.1f}"),
        "log loss": table.log_loss.map("{:.4f}".format),
        "errors": table.errors.astype(str),
        "nearest miss": table.nearest_miss.map(lambda v: "n/a" if np.isnan(v) else f"{v:+.3f}"),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="checkpoint files (equibench export / a run's model.pt)")
    parser.add_argument("--datasets", nargs="+", choices=list(BUNDLED_DATASETS), default=list(BUNDLED_DATASETS))
    parser.add_argument("--threads", type=int, default=1, help="torch and OpenMP/BLAS threads (default 1)")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads takes a positive number, got {args.threads}")
    started = time.perf_counter()
    with reproducible_cell(args.threads):
        try:
            table = trend(args.checkpoints, args.datasets)
        except EquibenchError as error:
            parser.exit(1, f"bundled_trend.py: error: {error}\n")
    print("\n" + markdown_table(display(table)))
    print(f"({time.perf_counter() - started:.0f} s, {args.threads} thread{'s' if args.threads > 1 else ''})")


if __name__ == "__main__":
    main()
