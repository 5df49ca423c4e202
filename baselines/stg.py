"""Stochastic Gates (STG, Yamada et al. 2020): embedded feature selection with an MLP.

Each feature j has a gate ``z_j = clamp(mu_j + eps_j + 0.5, 0, 1)`` (a hard sigmoid of a
Gaussian relaxation of a Bernoulli gate, ``eps_j ~ N(0, sigma^2)`` drawn once per batch
and shared by its rows, as in the authors' code) multiplying the input; at eval time
``eps = 0``. The regulariser ``lambda * mean_j Phi((mu_j + 0.5) / sigma)`` is the
expected fraction of open gates (Phi the standard normal CDF). TabZilla defaults:
hidden 60-20 with tanh, lr 0.005, lambda 0.1, sigma 0.5. Written here because the ``stg``
package breaks on Python >= 3.10 and has no ``predict_proba``.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn

from .neural import TorchMethod, mlp
from .settings import STGSettings


class StochasticGates(nn.Module):
    """The gate layer: (B, F) -> (B, F), features scaled by their gates."""

    def __init__(self, n_features: int, sigma: float = 0.5):
        super().__init__()
        self.mu = nn.Parameter(0.01 * torch.randn(n_features))  # (F,), gates start half open
        self.sigma = sigma

    def gates(self) -> torch.Tensor:
        """(F,) gate values: noisy while training, deterministic in eval mode."""
        noise = self.sigma * torch.randn_like(self.mu) if self.training else 0.0
        return torch.clamp(self.mu + noise + 0.5, 0.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gates()  # (B, F) * (F,) -> (B, F)

    def regularizer(self) -> torch.Tensor:
        """Mean probability that a gate is open: mean_j Phi((mu_j + 0.5) / sigma)."""
        z = (self.mu + 0.5) / self.sigma
        return (0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))).mean()


class STGMethod(TorchMethod):
    """:class:`~.settings.STGSettings`. Early stopping watches the validation cross-entropy
    (without the regulariser). Fitted: ``gate_values_`` (F,), the eval-time gates (0 =
    feature dropped)."""

    settings: STGSettings

    def build(self, n_features, n_seen):
        gates = StochasticGates(n_features, self.settings.sigma)
        # gates followed by a tanh MLP: (B, F) -> (B, F) -> (B, S) logits
        return nn.Sequential(OrderedDict(gates=gates, mlp=mlp(n_features, self.settings.hidden, n_seen, nn.Tanh)))

    def extra_loss(self):
        lam = self.settings.lam
        return lambda: lam * self.module_.gates.regularizer()

    def _fit(self, X, y, X_val, y_val, n_seen):
        super()._fit(X, y, X_val, y_val, n_seen)
        with torch.no_grad():
            self.gate_values_ = self.module_.gates.eval().gates().cpu().numpy()
