"""Feature normalisation shared by the synthetic prior and the classifiers.

Statistics are fitted on train rows only, from finite values only; NaN and +-inf pass
through untouched so that the model's missing-value indicator can see them.
"""

from __future__ import annotations

import torch

#: Z-scores beyond this magnitude are squashed logarithmically.
OUTLIER_Z = 4.0


def _finite_mean_std(x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std over the kept values, computed on values scaled by a power of two near
    their largest magnitude: no under- or overflow at any scale (1e-300 or 1e300), and
    bit-identical to the unscaled formulas in between (power-of-two scaling is exact)."""
    # x, keep: (..., N, F) -> mean, std: (..., 1, F)
    zero = x.new_zeros(())
    magnitude = torch.where(keep, x.abs(), zero).amax(dim=-2, keepdim=True)
    exponent = torch.frexp(magnitude).exponent  # magnitude < 2**exponent (0 for 0)
    scaled = torch.ldexp(x, -exponent)
    count = keep.sum(dim=-2, keepdim=True).clamp(min=1)
    mean = torch.where(keep, scaled, zero).sum(dim=-2, keepdim=True) / count
    centred = torch.where(keep, scaled - mean, zero)
    std = (centred.square().sum(dim=-2, keepdim=True) / count).sqrt()
    return torch.ldexp(mean, exponent), torch.ldexp(std, exponent)


def fit_normalization(x_train: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Robust per-feature mean and std of the train rows.

    A first pass over the finite values finds mean and std; values further than
    ``OUTLIER_Z`` std from the mean are then left out and the statistics recomputed.
    Constant (or all-missing) features get std 1: those whose spread is within rounding of
    their mean (relative to the data's own scale, so features in tiny or huge units keep
    their information).
    """
    # x_train: (..., N, F) -> mean, std: (..., 1, F)
    finite = torch.isfinite(x_train)
    mean, std = _finite_mean_std(x_train, finite)
    inlier = finite & ((x_train - mean).abs() <= OUTLIER_Z * std)
    mean, std = _finite_mean_std(x_train, inlier)
    relative_floor = max(1e-12, 16 * torch.finfo(x_train.dtype).eps)
    std = torch.where((std > relative_floor * mean.abs()) & (std > 0), std, torch.ones_like(std))
    return mean, std


def apply_normalization(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Z-score with fitted statistics, then squash |z| > ``OUTLIER_Z`` as
    ``sign(z) * (OUTLIER_Z + log1p(|z| - OUTLIER_Z))`` (continuous, monotone)."""
    # x: (..., R, F), mean/std: (..., 1, F) -> (..., R, F)
    z = (x - mean) / std
    magnitude = z.abs()
    squashed = torch.sign(z) * (OUTLIER_Z + torch.log1p((magnitude - OUTLIER_Z).clamp(min=0)))
    return torch.where(magnitude > OUTLIER_Z, squashed, z)


def rescale_by_used_features(x: torch.Tensor, n_used: torch.Tensor | int, f_max: int) -> torch.Tensor:
    """Multiply by ``f_max / n_used`` so that datasets with few features keep the same
    total input scale once zero-padded to ``f_max`` features."""
    # x: (..., R, F); n_used: int or (...,) tensor -> (..., R, F)
    if isinstance(n_used, torch.Tensor):
        factor = (f_max / n_used.to(x.dtype).clamp(min=1))[..., None, None]
    else:
        factor = f_max / max(int(n_used), 1)
    return x * factor
