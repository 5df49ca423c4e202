"""TabZilla's rtdl-ResNet baseline (Gorishniy et al. 2021): ``rtdl_revisiting_models.ResNet``
with 2 blocks of width 128, hidden width 256, dropout 0.25 (hidden) / 0.1 (residual),
lr 1e-3."""

from __future__ import annotations

from .base import require
from .neural import TorchMethod


class RtdlResNetMethod(TorchMethod):
    """Settings: ``n_blocks`` (2), ``d_block`` (128), ``d_hidden`` (256), ``dropout1``
    (0.25), ``dropout2`` (0.1) plus those of :class:`~.neural.TorchMethod` (lr 1e-3)."""

    name = "rtdl-resnet"
    lr = 1e-3

    def build(self, n_features, n_seen):
        rtdl = require(self.name, "rtdl_revisiting_models", "rtdl-revisiting-models")
        return rtdl.ResNet(  # (B, F) -> (B, S); batch-normalised blocks
            d_in=n_features,
            d_out=n_seen,
            n_blocks=self._setting("n_blocks", 2),
            d_block=self._setting("d_block", 128),
            d_hidden=self._setting("d_hidden", 256),
            d_hidden_multiplier=None,  # keyword-only without a default in 0.0.2
            dropout1=self._setting("dropout1", 0.25),
            dropout2=self._setting("dropout2", 0.1),
        )
