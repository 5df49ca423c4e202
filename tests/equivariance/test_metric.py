"""The metric: unpermuting outputs, the arg-max change / log-prob RMS comparison, ensembles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from equibench.equivariance_metric import compare_log_probs, ensemble_log_probs, unpermute


def _problem(n_classes: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(n_classes, 2))
    y_train = np.arange(40) % n_classes
    x_train = centres[y_train] + rng.normal(size=(40, 2))
    x_test = rng.normal(scale=3.0, size=(25, 2))
    return torch.as_tensor(x_train), torch.as_tensor(y_train), torch.as_tensor(x_test)


def nearest_centroid(x_train, y_train, x_test, n_classes):
    """Equivariant: the logit of class k is minus the squared distance to its centroid."""
    centroids = torch.stack([x_train[y_train == k].mean(dim=0) for k in range(n_classes)])  # (K, F)
    return -((x_test[:, None, :] - centroids[None]) ** 2).sum(dim=-1)  # (M, K)


def favours_class_zero(x_train, y_train, x_test, n_classes):
    """Not equivariant: label 0 gets a bonus whatever class it names."""
    logits = nearest_centroid(x_train, y_train, x_test, n_classes)
    logits[:, 0] += 4.0
    return logits


def linear_slot_head(x_train, y_train, x_test, n_classes):
    """Not equivariant: a fixed linear map over the one-hot slots of the nearest train row."""
    nearest = torch.cdist(x_test, x_train).argmin(dim=1)
    onehot = torch.nn.functional.one_hot(y_train[nearest], n_classes).double()  # (M, K)
    head = torch.randn(n_classes, n_classes, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return onehot @ head


def _scores(predict, n_classes: int = 4):
    """compare_log_probs of predict over 10 random permutations: two (10,) tensors."""
    x_train, y_train, x_test = _problem(n_classes)
    perms = torch.stack([torch.as_tensor(np.random.default_rng(s).permutation(n_classes)) for s in range(10)])
    reference = torch.log_softmax(predict(x_train, y_train, x_test, n_classes), dim=-1)  # (M, K)
    mapped_back = torch.stack([unpermute(torch.log_softmax(predict(x_train, perm[y_train], x_test, n_classes), dim=-1),
                                         perm) for perm in perms])  # (P, M, K)
    return compare_log_probs(reference.expand_as(mapped_back), mapped_back)


def test_zero_for_an_equivariant_predictor():
    fractions, rms = _scores(nearest_centroid)
    assert (fractions == 0.0).all() and (rms < 1e-12).all()


@pytest.mark.parametrize("predict", [favours_class_zero, linear_slot_head])
def test_positive_for_non_equivariant_predictors(predict):
    fractions, rms = _scores(predict)
    assert 0.0 < fractions.mean() <= 1.0 and (fractions <= 1.0).all() and rms.max() > 0.1


def test_unpermute_maps_relabelled_outputs_back():
    perm = torch.tensor([2, 0, 1])  # class k is labelled perm[k]
    original = torch.tensor([[0.1, 0.2, 0.7]])  # (M=1, K=3) by original class
    relabelled = torch.empty_like(original)
    relabelled[:, perm] = original  # the same output, computed on relabelled data
    assert torch.equal(unpermute(relabelled, perm), original)
    batched = torch.stack([relabelled, original])  # (D=2, M, K) with per-dataset permutations (D, 1, K)
    perms = torch.stack([perm, torch.arange(3)])[:, None, :]
    assert torch.equal(unpermute(batched, perms), torch.stack([original, original]))


def test_ties_within_the_tolerance_are_not_changes():
    reference = torch.log(torch.tensor([[[0.5, 0.5, 0.0 + 1e-30], [0.2, 0.3, 0.5]]], dtype=torch.float64))
    rounding = reference.clone()
    rounding[0, 0, 1] += 1e-9  # class 1 now tops class 0 by less than the tolerance
    fractions, rms = compare_log_probs(reference, rounding)
    assert fractions.tolist() == [0.0] and 0.0 < rms.item() < 1e-9
    swapped = reference.clone()
    swapped[0, 1] = swapped[0, 1, [0, 2, 1]]  # row 1's top class drops to second place
    fractions, _ = compare_log_probs(reference, swapped)
    assert fractions.tolist() == [0.5]


def test_ensemble_is_the_log_of_the_mean_probability():
    probs = torch.softmax(torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0),
                                      dtype=torch.float64), dim=-1)  # (D, E, M, K)
    ensembled = ensemble_log_probs(probs.log())
    assert torch.allclose(ensembled, probs.mean(dim=1).log())
    assert math.isclose(float(ensembled.exp().sum(dim=-1).mean()), 1.0)
