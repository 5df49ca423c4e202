"""TabZilla's rtdl-ResNet baseline (Gorishniy et al. 2021): ``rtdl_revisiting_models.ResNet``
with 2 blocks of width 128, hidden width 256, dropout 0.25 (hidden) / 0.1 (residual),
lr 1e-3."""

from __future__ import annotations

from .base import optional_import
from .neural import TorchMethod
from .settings import RtdlResNetSettings


class RtdlResNetMethod(TorchMethod):
    settings: RtdlResNetSettings

    def build(self, n_features, n_seen):
        with optional_import(self.name, self.settings.requires):
            import rtdl_revisiting_models as rtdl
        s = self.settings
        return rtdl.ResNet(  # (B, F) -> (B, S); batch-normalised blocks
            d_in=n_features, d_out=n_seen, n_blocks=s.n_blocks, d_block=s.d_block, d_hidden=s.d_hidden,
            d_hidden_multiplier=None,  # keyword-only without a default in 0.0.2
            dropout1=s.dropout1, dropout2=s.dropout2,
        )
