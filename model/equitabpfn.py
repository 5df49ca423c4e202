"""EquiTabPFN: a prior-fitted network that is exactly equivariant to the order of the classes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .layers import (
    ComponentAttentionBlock,
    DatapointAttentionBlock,
    EquivariantDecoder,
    missing_indicator_features,
)


class EquiTabPFNLayer(nn.Module):
    """Component attention within each row, then datapoint attention within each slot."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        options = {"norm_first": config.norm_first, "qk_norm": config.qk_norm}
        self.components = ComponentAttentionBlock(config.d_model, config.n_heads, config.mlp_hidden, **options)
        self.datapoints = DatapointAttentionBlock(config.d_model, config.n_heads, config.mlp_hidden, **options)

    def forward(self, tokens: torch.Tensor, n_train: int) -> torch.Tensor:
        # tokens: (B, N+M, 1+K, d) -> (B, N+M, 1+K, d)
        return self.datapoints(self.components(tokens), n_train)


class EquiTabPFN(nn.Module):
    """Covariate token + one token per class component per row, L bi-attention layers and
    the non-parametric equivariant decoder. Works for any number of classes K >= 1."""

    arch = "equitabpfn"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.covariate_encoder = nn.Linear(2 * config.f_max, d)
        self.target_encoder = nn.Linear(1, d)  # the same 1x1 map for every class component
        self.prediction_token = nn.Parameter(torch.randn(d) * 0.02)
        self.layers = nn.ModuleList(EquiTabPFNLayer(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(d) if config.norm_first else nn.Identity()
        self.decoder = EquivariantDecoder(config.decoder_hidden)

    def forward(
        self,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_test: torch.Tensor,
        n_classes: int,
    ) -> torch.Tensor:
        """Class logits of the test rows.

        x_train: (B, N, F) and x_test: (B, M, F) normalised features, F <= f_max, NaN/inf
        allowed; y_train: (B, N) int64 class ids in [0, n_classes). Returns (B, M, K).
        """
        batch, n_train, _ = x_train.shape
        n_test = x_test.shape[1]
        d = self.config.d_model
        features = missing_indicator_features(torch.cat([x_train, x_test], dim=1), self.config.f_max)
        covariate = self.covariate_encoder(features).unsqueeze(2)  # (B, N+M, 1, d)
        y_onehot = F.one_hot(y_train, n_classes).to(covariate.dtype)  # (B, N, K)
        train_targets = self.target_encoder(y_onehot.unsqueeze(-1))  # (B, N, K, d)
        test_targets = self.prediction_token.to(covariate.dtype).expand(batch, n_test, n_classes, d)
        targets = torch.cat([train_targets, test_targets], dim=1)  # (B, N+M, K, d)
        tokens = torch.cat([covariate, targets], dim=2)  # (B, N+M, 1+K, d)
        for layer in self.layers:
            tokens = layer(tokens, n_train)
        flat = self.final_norm(tokens).flatten(2)  # (B, N+M, (1+K)*d)
        return self.decoder(flat[:, :n_train], flat[:, n_train:], y_onehot)  # (B, M, K)
