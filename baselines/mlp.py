"""TabZilla's MLP baseline: 3 hidden layers of 30 ReLU units, Adam lr 7e-4."""

from __future__ import annotations

from torch import nn

from .neural import TorchMethod
from .settings import MLPSettings


class MLPMethod(TorchMethod):
    """A plain multi-layer perceptron (:class:`~.settings.MLPSettings`)."""

    name = "mlp"
    settings: MLPSettings

    def build(self, n_features, n_seen):
        layers, width = [], n_features
        for hidden in self.settings.hidden:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, n_seen))
        return nn.Sequential(*layers)  # (B, F) -> (B, S)
