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
    settings: RtdlMLPSettings

    def build(self, n_features, n_seen):
        with optional_import(self.name, self.settings.requires):
            import rtdl_revisiting_models as rtdl
        layers, dropout = self.settings.layers, self.settings.dropout
        d_outs = (None,) * (len(layers) - 1) + (n_seen,)  # the last block carries the output layer
        blocks = [rtdl.MLP(d_in=d_in, d_out=d_out, n_blocks=1, d_block=d_block, dropout=dropout)
                  for d_in, d_block, d_out in zip((n_features, *layers), layers, d_outs)]
        return nn.Sequential(*blocks)  # (B, F) -> (B, S)
