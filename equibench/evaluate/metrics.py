"""Per-cell metrics, all from scikit-learn, over the task's full class list."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, log_loss, roc_auc_score


def roc_auc(y_true: np.ndarray, proba: np.ndarray) -> float:
    """One-vs-one macro AUC over the task's classes (binary AUC for K=2); NaN when the test
    part holds a single class."""
    n_classes = proba.shape[1]
    if len(np.unique(y_true)) < 2:
        return float("nan")
    if n_classes == 2:
        return float(roc_auc_score(y_true, proba[:, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(roc_auc_score(y_true, proba, multi_class="ovo", average="macro", labels=np.arange(n_classes)))


def cell_metrics(y_true: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """accuracy, auc, f1 (weighted) and log_loss of probabilities (n, K) for labels 0..K-1;
    the prediction is the arg-max (ties to the first class)."""
    labels = np.arange(proba.shape[1])
    clipped = np.clip(proba, 1e-15, 1.0)
    predicted = proba.argmax(axis=1)
    return {
        "accuracy": float(accuracy_score(y_true, predicted)),
        "auc": roc_auc(y_true, proba),
        "f1": float(f1_score(y_true, predicted, average="weighted", labels=labels, zero_division=0)),
        "log_loss": float(log_loss(y_true, clipped / clipped.sum(axis=1, keepdims=True), labels=labels)),
    }
