"""TabZilla's MLP baseline: 3 hidden layers of 30 ReLU units, Adam lr 7e-4."""

from __future__ import annotations

from .neural import TorchMethod, mlp
from .settings import MLPSettings


class MLPMethod(TorchMethod):
    settings: MLPSettings

    def build(self, n_features, n_seen):
        return mlp(n_features, self.settings.hidden, n_seen)  # (B, F) -> (B, S)
