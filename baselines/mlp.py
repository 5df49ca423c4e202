"""TabZilla's MLP baseline: 3 hidden layers of 30 ReLU units, Adam lr 7e-4."""

from __future__ import annotations

from torch import nn

from .neural import TorchMethod


class MLPMethod(TorchMethod):
    """A plain multi-layer perceptron. Settings: ``hidden`` (layer widths, default
    ``(30, 30, 30)``) plus those of :class:`~.neural.TorchMethod` (lr default 7e-4)."""

    name = "mlp"
    lr = 7e-4

    def build(self, n_features, n_seen):
        layers, width = [], n_features
        for hidden in self._setting("hidden", (30, 30, 30)):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, n_seen))
        return nn.Sequential(*layers)  # (B, F) -> (B, S)
