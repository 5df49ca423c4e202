"""Feature post-processing of a batch: outlying cells, categoricals, missing values, normalisation."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..normalize import apply_normalization, fit_normalization, rescale_by_used_features
from .config import PriorConfig
from .draws import log_uniform


def categorize_(
    x: torch.Tensor, used: torch.Tensor, config: PriorConfig, rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """Turn a random share of each dataset's features into categoricals: cut at random row
    values into a few levels and give the levels a random order."""
    # x: (B, R, F), used: (B, F) bool -> x
    device = x.device
    batch, rows, f = x.shape
    share = torch.as_tensor(rng.random(batch), device=device, dtype=torch.float32)
    convert = (torch.rand(batch, f, generator=gen, device=device) < share[:, None]) & used  # (B, F)
    levels_np = np.round(rng.exponential(config.categorical_mean_levels, (batch, f)))
    levels = torch.as_tensor(np.clip(levels_np, 2, config.categorical_max_levels).astype(np.int64), device=device)
    n_cuts = config.categorical_max_levels - 1
    columns = x.transpose(1, 2).contiguous()  # (B, F, R)
    cut_rows = torch.randint(0, rows, (batch, f, n_cuts), generator=gen, device=device)
    cuts = columns.gather(2, cut_rows)
    cuts = cuts.masked_fill(torch.arange(n_cuts, device=device) >= (levels - 1)[..., None], math.inf)
    level = torch.searchsorted(cuts.sort(dim=2).values, columns)  # (B, F, R) in [0, levels)
    order_scores = torch.rand(batch, f, config.categorical_max_levels, generator=gen, device=device)
    order_scores = order_scores.masked_fill(
        torch.arange(config.categorical_max_levels, device=device) >= levels[..., None], math.inf)
    code = order_scores.argsort(dim=2).gather(2, level).to(x.dtype)
    return torch.where(convert[:, None, :], code.transpose(1, 2), x)


def _random_cells(
    x: torch.Tensor, used: torch.Tensor, prob: float, max_fraction: float, rng: np.random.Generator,
    gen: torch.Generator,
) -> torch.Tensor:
    """With probability ``prob`` per dataset, a share U(0, ``max_fraction``) of its used cells,
    completely at random; padding is never picked."""
    # x: (B, R, F), used: (B, F) bool -> (B, R, F) bool
    batch_size = x.shape[0]
    rate = rng.uniform(0.0, max_fraction, batch_size) * (rng.random(batch_size) < prob)
    rate_t = torch.as_tensor(rate, dtype=torch.float32, device=x.device)
    return (torch.rand(x.shape, generator=gen, device=x.device) < rate_t[:, None, None]) & used[:, None, :]


def _move_outliers(
    x: torch.Tensor, used: torch.Tensor, config: PriorConfig, rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """With probability ``outlier_prob`` a dataset has a share U(0, outlier_max_fraction) of its
    used cells moved by +-s of their column's standard deviation (s log-uniform in
    ``outlier_scale_range`` per dataset): measurement errors that its target never saw."""
    # x: (B, R, F) finite, used: (B, F) bool -> x
    moved = _random_cells(x, used, config.outlier_prob, config.outlier_max_fraction, rng, gen)
    scale = torch.as_tensor(log_uniform(rng, config.outlier_scale_range, x.shape[0]), dtype=torch.float32,
                            device=x.device)
    sign = torch.randint(0, 2, x.shape, generator=gen, device=x.device).to(x.dtype) * 2 - 1
    shift = sign * scale[:, None, None] * x.std(dim=1, keepdim=True)  # (B, R, F)
    return torch.where(moved, x + shift, x)


def finish_features(
    x: torch.Tensor, n_train: int, n_features: torch.Tensor, config: PriorConfig,
    rng: np.random.Generator, gen: torch.Generator,
) -> torch.Tensor:
    """Raw features to model input: scale, maybe outlying cells, categoricals and missing values, then
    normalise with the train rows' statistics, rescale by ``f_max / n_features`` and zero the
    padding."""
    # x: (B, R, f_max) finite, n_features: (B,) -> (B, R, f_max)
    used = torch.arange(config.f_max, device=x.device)[None] < n_features[:, None]  # (B, F)
    # z-scores do not depend on a column's scale; bringing |x| <= 1 keeps float32 squares finite
    x = x / x.abs().amax(dim=1, keepdim=True).clamp(min=torch.finfo(x.dtype).tiny)
    if config.outlier_prob > 0:
        x = _move_outliers(x, used, config, rng, gen)
    if rng.random() < config.categorical_batch_prob:
        x = categorize_(x, used, config, rng, gen)
    if config.nan_prob > 0:
        x = x.masked_fill(_random_cells(x, used, config.nan_prob, config.nan_max_fraction, rng, gen), math.nan)
    mean, std = fit_normalization(x[:, :n_train])
    x = rescale_by_used_features(apply_normalization(x, mean, std), n_features, config.f_max)
    return torch.where(used[:, None, :], x, 0.0)
