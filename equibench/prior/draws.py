"""Random scalar draws shared by the samplers (all from the batch's numpy generator)."""

from __future__ import annotations

import math

import numpy as np


def meta_gamma(rng: np.random.Generator, max_alpha: float, max_mean: float, size=None):
    """TabPFN's "meta gamma": ``Gamma(a, mean / a)`` with ``a = exp(U(0, ln max_alpha))`` and
    ``mean ~ U(0, max_mean)``."""
    shape = np.exp(rng.uniform(0.0, math.log(max_alpha), size))
    mean = rng.uniform(0.0, max_mean, size)
    return rng.gamma(shape, mean / shape)


def log_uniform(rng: np.random.Generator, bounds: tuple[float, float], size: int) -> np.ndarray:
    """``size`` values log-uniform in ``bounds``."""
    return np.exp(rng.uniform(math.log(bounds[0]), math.log(bounds[1]), size))
