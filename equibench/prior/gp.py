"""Gaussian-process datasets: uniform features, an RBF-kernel target."""

from __future__ import annotations

import math

import numpy as np
import torch

from .config import PriorConfig
from .draws import log_uniform

_GP_JITTERS = (1e-6, 1e-5, 1e-4, 1e-3)


def sample_gp(
    config: PriorConfig, n_features: np.ndarray, rng: np.random.Generator, gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Datasets from a Gaussian process with an RBF kernel on uniform features.

    The squared distance is divided by ``n_features``, so the length scale does not depend
    on the dimension; the Cholesky factor is computed in float64 with growing jitter.
    """
    # n_features: (g,) -> x (g, R, f_max), y (g, R); y is NaN where Cholesky failed
    device = gen.device
    g, rows = len(n_features), config.rows
    used = torch.as_tensor(n_features, device=device)
    x = torch.rand(g, rows, config.f_max, generator=gen, device=device)
    x = x * (torch.arange(config.f_max, device=device) < used[:, None])[:, None, :]
    lengthscale = torch.as_tensor(log_uniform(rng, config.gp_lengthscale_range, g), device=device)
    noise = torch.as_tensor(log_uniform(rng, config.gp_noise_std_range, g), device=device)
    xd = x.double()
    sq_norm = xd.square().sum(dim=2)
    sq_dist = torch.baddbmm(sq_norm[:, :, None] + sq_norm[:, None, :], xd, xd.transpose(1, 2), alpha=-2.0)
    kernel = sq_dist.clamp_(min=0.0).div_((-2 * lengthscale.square() * used)[:, None, None]).exp_()  # (g, R, R)
    diagonal = kernel.diagonal(dim1=1, dim2=2)
    diagonal.add_(noise.square()[:, None])
    for added, jitter in zip((0.0, *_GP_JITTERS), _GP_JITTERS):
        diagonal.add_(jitter - added)
        chol, info = torch.linalg.cholesky_ex(kernel)
        if not bool((info != 0).any()):
            break
    z = torch.randn(g, rows, 1, generator=gen, device=device, dtype=torch.float64)
    y = (chol @ z)[..., 0].float()
    return x, y.masked_fill((info != 0)[:, None], math.nan)
