"""``preprocessing="official"``: the feature preprocessing of the authors' one-member evaluation.

The paper's tables run the official checkpoint through mothernet's ``transformer_predict``
with one ensemble member, no feature shift and ``no_preprocess_mode`` (TabZilla's
``EquiTabPFNV1_1_0``). For that member it: standardises each column by its train rows
(NaN-aware mean, unbiased std + 1e-6, clipped to +-100); drops the columns with at most one
distinct non-missing train value; squashes outliers beyond 4 std of the train rows (two
passes, the second without the first's outliers) logarithmically; multiplies by
100 / (columns used); zero-pads to 100 (in the network). NaN stays NaN for the network's
indicator. :class:`OfficialTransform` does this, in the member interface of
:class:`~equibench.preprocessing.MemberTransform`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..preprocessing import MemberSpec

#: The official member: no feature rotation, no class rotation.
OFFICIAL_MEMBER = MemberSpec(variant="official", feature_shift=0, class_shift=0)
_OUTLIER_STDS = 4


def _mean_std(x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per column, the mean and unbiased std of the entries where ``keep`` holds."""
    # x, keep: (N, F) -> each (F,)
    count = keep.sum(dim=0)
    mean = torch.where(keep, x, 0.0).sum(dim=0) / count
    squares = torch.where(keep, mean - x, 0.0).square().sum(dim=0)
    return mean, torch.sqrt(squares / (count - 1))


class OfficialTransform:
    """The official one-member preprocessing, fitted on the train rows."""

    def __init__(self, f_max: int):
        self.f_max = f_max

    def fit_transform(self, values: np.ndarray, category_counts: list[int]) -> torch.Tensor:
        # values: (N, F) float64 -> (N, F_used) float64; category_counts unused (categorical codes count as numbers)
        x = torch.from_numpy(np.asarray(values, dtype=np.float64))
        self.mean_, self.std_ = _mean_std(x, ~torch.isnan(x))
        x = self._standardise(x)
        self.columns_ = [j for j in range(x.shape[1]) if torch.unique(x[:, j][~torch.isnan(x[:, j])]).numel() > 1]
        x = x[:, self.columns_]
        mean, std = _mean_std(x, ~torch.isnan(x))
        inliers = (x <= mean + _OUTLIER_STDS * std) & (x >= mean - _OUTLIER_STDS * std) & ~torch.isnan(x)
        mean, std = _mean_std(x, inliers)
        self.lower_, self.upper_ = mean - _OUTLIER_STDS * std, mean + _OUTLIER_STDS * std
        return self._finish(x)

    def transform(self, values: np.ndarray) -> torch.Tensor:
        # values: (M, F) float64 -> (M, F_used) float64
        return self._finish(self._standardise(torch.from_numpy(np.asarray(values, dtype=np.float64)))[:, self.columns_])

    def _standardise(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean_) / (self.std_ + 1e-6)).clamp(-100, 100)

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.maximum(-torch.log(1 + x.abs()) + self.lower_, x)  # in this order, as the official code
        x = torch.minimum(torch.log(1 + x.abs()) + self.upper_, x)
        return x / (x.shape[1] / self.f_max) if x.shape[1] else x
