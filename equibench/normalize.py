"""Feature normalisation shared by the synthetic prior and the classifiers.

Statistics are fitted on train rows only, from finite values only; NaN and +-inf pass
through untouched so that the model's missing-value indicator can see them.
"""

from __future__ import annotations

import torch

#: Z-scores beyond this magnitude are squashed logarithmically.
OUTLIER_Z = 4.0


def _finite_mean_std(x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # x, keep: (..., N, F) -> mean, std: (..., 1, F)
    count = keep.sum(dim=-2, keepdim=True).clamp(min=1)
    values = torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))
    mean = values.sum(dim=-2, keepdim=True) / count
    centred = torch.where(keep, x - mean, torch.zeros((), dtype=x.dtype, device=x.device))
    std = (centred.square().sum(dim=-2, keepdim=True) / count).sqrt()
    return mean, std


def fit_normalization(x_train: torch.Tensor, outlier_z: float = OUTLIER_Z) -> tuple[torch.Tensor, torch.Tensor]:
    """Robust per-feature mean and std of the train rows.

    A first pass over the finite values finds mean and std; values further than
    ``outlier_z`` std from the mean are then left out and the statistics recomputed.
    Constant (or all-missing) features get std 1.
    """
    # x_train: (..., N, F) -> mean, std: (..., 1, F)
    finite = torch.isfinite(x_train)
    mean, std = _finite_mean_std(x_train, finite)
    inlier = finite & ((x_train - mean).abs() <= outlier_z * std)
    mean, std = _finite_mean_std(x_train, inlier)
    std = torch.where(std > 1e-12 * (1 + mean.abs()), std, torch.ones_like(std))
    return mean, std


def apply_normalization(
    x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, outlier_z: float = OUTLIER_Z
) -> torch.Tensor:
    """Z-score with fitted statistics, then squash |z| > ``outlier_z`` as
    ``sign(z) * (outlier_z + log1p(|z| - outlier_z))`` (continuous, monotone)."""
    # x: (..., R, F), mean/std: (..., 1, F) -> (..., R, F)
    z = (x - mean) / std
    magnitude = z.abs()
    squashed = torch.sign(z) * (outlier_z + torch.log1p((magnitude - outlier_z).clamp(min=0)))
    return torch.where(magnitude > outlier_z, squashed, z)


def rescale_by_used_features(x: torch.Tensor, n_used: torch.Tensor | int, f_max: int) -> torch.Tensor:
    """Multiply by ``f_max / n_used`` so that datasets with few features keep the same
    total input scale once zero-padded to ``f_max`` features."""
    # x: (..., R, F); n_used: int or (...,) tensor -> (..., R, F)
    if isinstance(n_used, torch.Tensor):
        factor = (f_max / n_used.to(x.dtype).clamp(min=1))[..., None, None]
    else:
        factor = f_max / max(int(n_used), 1)
    return x * factor
