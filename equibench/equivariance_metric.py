"""The equivariance metric: how far ``sigma^-1 f(X, sigma(Y))`` is from ``f(X, Y)``; shared by
pretraining's validation and the equivariance experiment (:mod:`equibench.equivariance`).

A permutation is an integer vector ``perm`` of length K: class ``k`` is relabelled
``perm[k]``, so ``sigma(Y) = perm[Y]``, and an output computed on the relabelled data is mapped
back to the original class order by ``output[..., perm]`` (:func:`unpermute`).

Two numbers per dataset compare the log-probabilities of the two predictions
(:func:`compare_log_probs`):

* arg-max change fraction: the share of test rows whose predicted class (arg-max of
  ``f(X, Y)``) is no longer the top class of ``sigma^-1 f(X, sigma(Y))`` (beaten by more than
  ``tie_tolerance`` in log-probability, so float rounding between exactly tied classes is
  not counted as a change);
* log-probability RMS: the root mean square, over test rows and classes, of
  ``log_softmax(sigma^-1 f(X, sigma(Y))) - log_softmax(f(X, Y))``.

A permutation ensemble's prediction is the mean probability over its members
(:func:`ensemble_log_probs`).
"""

from __future__ import annotations

import math

import torch

__all__ = ["TIE_TOLERANCE", "compare_log_probs", "ensemble_log_probs", "non_identity_permutations", "unpermute"]

#: Log-probability margin below which two classes count as tied for the arg-max change.
TIE_TOLERANCE = 1e-5


def non_identity_permutations(n: int, n_classes: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` permutations of ``n_classes`` classes, (n, K), each uniform among the non-identity
    ones (drawn uniform, those equal to the identity drawn again)."""
    identity = torch.arange(n_classes)
    permutations = torch.rand(n, n_classes, generator=generator).argsort(dim=1)
    while bool((redraw := (permutations == identity).all(dim=1)).any()):
        permutations[redraw] = torch.rand(int(redraw.sum()), n_classes, generator=generator).argsort(dim=1)
    return permutations


def unpermute(outputs: torch.Tensor, permutation: torch.Tensor) -> torch.Tensor:
    """Map outputs computed on labels relabelled by ``permutation`` back to the original
    class order: ``outputs[..., permutation]`` (``permutation`` broadcasts over rows)."""
    # outputs: (..., M, K), permutation: (..., 1, K) or (K,) -> (..., M, K)
    return outputs.gather(-1, permutation.expand_as(outputs))


def compare_log_probs(
    reference: torch.Tensor, mapped_back: torch.Tensor, tie_tolerance: float = TIE_TOLERANCE
) -> tuple[torch.Tensor, torch.Tensor]:
    """(arg-max change fraction, log-probability RMS) per dataset, both in the original
    class order; see the module docstring for the definitions."""
    # reference, mapped_back: (..., M, K) log-probabilities -> two (...,) tensors
    predicted = reference.argmax(dim=-1, keepdim=True)  # (..., M, 1)
    beaten = mapped_back.gather(-1, predicted)[..., 0] < mapped_back.amax(dim=-1) - tie_tolerance
    rms = (mapped_back - reference).square().mean(dim=(-2, -1)).sqrt()
    return beaten.to(reference.dtype).mean(dim=-1), rms


def ensemble_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """log of the mean probability over the members (axis 1)."""
    # (D, E, M, K) -> (D, M, K)
    return torch.logsumexp(log_probs, dim=1) - math.log(log_probs.shape[1])
