"""TabZilla's rtdl-MLP baseline (Gorishniy et al. 2021): layers 128-256-128, dropout 0.1,
lr 1e-3, built from ``rtdl_revisiting_models.MLP``.

That package's ``MLP`` gives every block the same width, so the 128-256-128 layout is a
chain of one-block ``MLP``s (Linear -> ReLU -> Dropout each), the last one carrying the
linear output layer.
"""

from __future__ import annotations

from torch import nn

from .base import require
from .neural import TorchMethod


class RtdlMLPMethod(TorchMethod):
    """Settings: ``layers`` (default ``(128, 256, 128)``), ``dropout`` (0.1) plus those of
    :class:`~.neural.TorchMethod` (lr default 1e-3)."""

    name = "rtdl-mlp"
    lr = 1e-3

    def build(self, n_features, n_seen):
        rtdl = require(self.name, "rtdl_revisiting_models", "rtdl-revisiting-models")
        layers = list(self._setting("layers", (128, 256, 128)))
        dropout = self._setting("dropout", 0.1)
        blocks, width = [], n_features
        for i, d_block in enumerate(layers):
            last = i == len(layers) - 1
            blocks.append(
                rtdl.MLP(
                    d_in=width, d_out=n_seen if last else None, n_blocks=1, d_block=d_block, dropout=dropout
                )
            )
            width = d_block
        return nn.Sequential(*blocks)  # (B, F) -> (B, S)
