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
from ..equivariance_metric import compare_log_probs, non_identity_permutations, unpermute
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


def class_permutations(batch: PriorBatch, index: int) -> torch.Tensor:
    """One fixed non-identity permutation of the batch's classes per dataset, (B, K): the same
    for every run and step (seeded by the validation seed and the batch's ``index``)."""
    generator = torch.Generator().manual_seed(VALIDATION_PRIOR_SEED + index)
    return non_identity_permutations(len(batch.y), batch.n_classes, generator).to(batch.y.device)


def argmax_changes(model: nn.Module, batch: PriorBatch, logits: torch.Tensor, permutations: torch.Tensor) -> torch.Tensor:
    """Per dataset, the share of test rows whose predicted class changes when the training
    labels are relabelled by ``permutations`` (the equivariance experiment's metric)."""
    # logits: (B, M, K) on the original labels, permutations: (B, K) -> (B,)
    n = batch.n_train
    relabelled = permutations.gather(1, batch.y[:, :n])  # (B, N)
    mapped_back = unpermute(model(batch.x[:, :n], relabelled, batch.x[:, n:], batch.n_classes), permutations[:, None, :])
    changes, _ = compare_log_probs(torch.log_softmax(logits.double(), -1), torch.log_softmax(mapped_back.double(), -1))
    return changes


@torch.no_grad()
def prior_metrics(model: nn.Module, batches: list[PriorBatch]) -> dict[str, float]:
    """Loss, accuracy and equivariance error (share of test rows whose predicted class changes
    when the classes are permuted: the mean over datasets and its standard deviation across
    them, as the paper reports it) on the test rows of fixed prior batches (masked datasets
    left out)."""
    losses, correct, changed, per_dataset = [], 0.0, 0.0, []  # per_dataset: the changes of unmasked datasets
    for index, batch in enumerate(batches):
        logits = forward_batch(model, batch)
        y_test = batch.y[:, batch.n_train :]
        losses.append(masked_test_loss(logits, y_test, batch.loss_mask).item())
        hits = (logits.argmax(-1) == y_test).float().mean(dim=1)  # (B,)
        correct += (hits * batch.loss_mask).sum().item()
        changes = argmax_changes(model, batch, logits, class_permutations(batch, index))  # (B,)
        changed += (changes * batch.loss_mask).sum().item()
        per_dataset += changes[batch.loss_mask.bool()].tolist()
    return {"prior_loss": float(np.mean(losses)), "prior_accuracy": correct / max(len(per_dataset), 1),
            "prior_equivariance_error": changed / max(len(per_dataset), 1),
            "prior_equivariance_error_std": float(np.std(per_dataset)) if per_dataset else 0.0}


def bundled_accuracy(model: nn.Module, device) -> dict[str, float]:
    """Mean stratified 5-fold CV accuracy on scikit-learn's bundled datasets, of ``model``
    in eval mode (as :func:`validation_metrics` sets it: the classifier runs a copy)."""
    classifier = classifier_for(model, n_estimators=1, device=device, random_state=0)
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    return {f"{name}_accuracy": float(cross_val_score(classifier, *load(return_X_y=True), cv=splitter).mean())
            for name, load in BUNDLED_DATASETS.items()}


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
            metrics.update(bundled_accuracy(model, device))
    model.train()
    metrics["seconds"] = time.perf_counter() - started
    return metrics
