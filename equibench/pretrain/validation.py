"""Validation during pretraining: held-out prior datasets and scikit-learn's bundled
real datasets (accuracy by stratified cross-validation)."""

from __future__ import annotations

import time

import numpy as np
import torch
from sklearn import datasets
from sklearn.model_selection import StratifiedKFold, cross_val_score
from torch import nn

from ..classifier import classifier_for
from ..prior import PriorBatch, PriorConfig, sample_batch
from .loss import forward_batch, masked_test_loss
from .optim import evaluation_weights

#: The bundled real datasets validated on, by loader.
BUNDLED_DATASETS = {
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
}
#: Seed of the fixed validation prior datasets, independent of the training seed.
VALIDATION_PRIOR_SEED = 20_241_122


def validation_prior_batches(config: PriorConfig, n_batches: int, batch_size: int, device) -> list[PriorBatch]:
    """A fixed set of prior batches, drawn on the CPU: the same for every run with this prior
    config, on any ``device``."""
    generator = torch.Generator().manual_seed(VALIDATION_PRIOR_SEED)
    return [sample_batch(config, batch_size, generator, "cpu").to(device) for _ in range(n_batches)]


@torch.no_grad()
def prior_metrics(model: nn.Module, batches: list[PriorBatch]) -> dict[str, float]:
    """Loss and accuracy on the test rows of fixed prior batches (masked datasets left out)."""
    losses, correct, total = [], 0.0, 0.0
    for batch in batches:
        logits = forward_batch(model, batch)
        y_test = batch.y[:, batch.n_train :]
        losses.append(masked_test_loss(logits, y_test, batch.loss_mask).item())
        hits = (logits.argmax(-1) == y_test).float().mean(dim=1)  # (B,)
        correct += (hits * batch.loss_mask).sum().item()
        total += batch.loss_mask.sum().item()
    return {"prior_loss": float(np.mean(losses)), "prior_accuracy": correct / max(total, 1.0)}


def bundled_accuracy(
    model: nn.Module, names=tuple(BUNDLED_DATASETS), folds: int = 5, n_estimators: int = 1, device="cpu"
) -> dict[str, float]:
    """Mean stratified ``folds``-fold CV accuracy on scikit-learn's bundled datasets."""
    classifier = classifier_for(model, n_estimators=n_estimators, device=device, random_state=0)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    scores = {}
    was_training = model.training
    model.eval()
    try:
        for name in names:
            X, y = BUNDLED_DATASETS[name](return_X_y=True)
            scores[f"{name}_accuracy"] = float(cross_val_score(classifier, X, y, cv=splitter).mean())
    finally:
        model.train(was_training)
    return scores


def validation_metrics(model: nn.Module, optimizer: torch.optim.Optimizer, batches: list[PriorBatch],
                       bundled: bool, device) -> dict[str, float]:
    """:func:`prior_metrics` on ``batches`` (if any) and, if ``bundled``, :func:`bundled_accuracy`
    of the weights to ship (``evaluation_weights``), with the ``seconds`` they took."""
    started = time.perf_counter()
    model.eval()
    metrics = {}
    with evaluation_weights(model, optimizer):
        if batches:
            metrics.update(prior_metrics(model, batches))
        if bundled:
            metrics.update(bundled_accuracy(model, device=device))
    model.train()
    metrics["seconds"] = time.perf_counter() - started
    return metrics
