"""TabZilla's rtdl-MLP baseline (Gorishniy et al. 2021): layers 128-256-128, dropout 0.1,
lr 1e-3, built from ``rtdl_revisiting_models.MLP``.

That package's ``MLP`` gives every block the same width, so the 128-256-128 layout is a
chain of one-block ``MLP``s (Linear -> ReLU -> Dropout each), the last one carrying the
linear output layer.
"""

from __future__ import annotations

from torch import nn

from .base import optional_import
from .neural import TorchMethod
from .settings import RtdlMLPSettings


class RtdlMLPMethod(TorchMethod):
    """:class:`~.settings.RtdlMLPSettings`."""

    name = "rtdl-mlp"
    settings: RtdlMLPSettings

    def build(self, n_features, n_seen):
        with optional_import(self.name, self.settings.requires):
            import rtdl_revisiting_models as rtdl
        layers, dropout = list(self.settings.layers), self.settings.dropout
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
