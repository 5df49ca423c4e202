"""The experiment's metric: the shared definitions of :mod:`equibench.equivariance_metric`
(:func:`unpermute`, :func:`compare_log_probs`) and the log-probabilities of a permutation
ensemble (:func:`ensemble_log_probs`)."""

from __future__ import annotations

import math

import torch

from ..equivariance_metric import TIE_TOLERANCE, compare_log_probs, unpermute

__all__ = ["TIE_TOLERANCE", "compare_log_probs", "ensemble_log_probs", "unpermute"]


def ensemble_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """log of the mean probability over the members (axis 1)."""
    # (D, E, M, K) -> (D, M, K)
    return torch.logsumexp(log_probs, dim=1) - math.log(log_probs.shape[1])
