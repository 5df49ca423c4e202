"""TabPFN*: the non-equivariant TabPFN-v1-style comparison model on the same blocks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import TooManyClassesError
from .config import ModelConfig
from .layers import DatapointAttentionBlock, missing_indicator_features


class TabPFNStar(nn.Module):
    """One token per row: x-embedding plus (train rows) a dense embedding of the
    ``max_classes``-slot one-hot target; 2 * n_layers datapoint-attention blocks (the same
    block count as EquiTabPFN, hence comparable parameters); MLP decoder to
    ``max_classes`` logits, of which the first K are returned."""

    arch = "tabpfn-star"

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.covariate_encoder = nn.Linear(2 * config.f_max, d)
        self.target_encoder = nn.Linear(config.max_classes, d)
        self.blocks = nn.ModuleList(
            DatapointAttentionBlock(d, config.n_heads, config.mlp_hidden, config.norm_first, config.qk_norm)
            for _ in range(2 * config.n_layers)
        )
        self.final_norm = nn.LayerNorm(d) if config.norm_first else nn.Identity()
        self.decoder = nn.Sequential(
            nn.Linear(d, config.mlp_hidden), nn.GELU(), nn.Linear(config.mlp_hidden, config.max_classes)
        )

    def forward(
        self,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_test: torch.Tensor,
        n_classes: int,
    ) -> torch.Tensor:
        """Class logits of the test rows; same contract as :meth:`EquiTabPFN.forward`."""
        if n_classes > self.config.max_classes:
            raise TooManyClassesError.for_counts(self.config.max_classes, n_classes)
        n_train = x_train.shape[1]
        features = missing_indicator_features(torch.cat([x_train, x_test], dim=1), self.config.f_max)
        tokens = self.covariate_encoder(features)  # (B, N+M, d)
        y_onehot = F.one_hot(y_train, self.config.max_classes).to(tokens.dtype)  # (B, N, 10)
        train_tokens = tokens[:, :n_train] + self.target_encoder(y_onehot)  # (B, N, d)
        tokens = torch.cat([train_tokens, tokens[:, n_train:]], dim=1).unsqueeze(2)  # (B, N+M, 1, d)
        for block in self.blocks:
            tokens = block(tokens, n_train)
        return self.decoder(self.final_norm(tokens[:, n_train:, 0]))[..., :n_classes]  # (B, M, K)
