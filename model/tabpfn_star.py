"""TabPFN*: the non-equivariant TabPFN-v1-style comparison model on the same blocks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import TooManyClassesError
from .config import ModelConfig
from .inference import ChunkPlan, Context, datapoints_chunked
from .layers import DatapointAttentionBlock, missing_indicator_features
from .network import TabularPFN


class TabPFNStar(TabularPFN):
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

    @property
    def class_limit(self) -> int:
        """The most classes it takes: its one-hot target and output slots."""
        return self.config.max_classes

    def forward(
        self,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_test: torch.Tensor,
        n_classes: int,
    ) -> torch.Tensor:
        self._check_classes(n_classes)
        n_train = x_train.shape[1]
        features = missing_indicator_features(torch.cat([x_train, x_test], dim=1), self.config.f_max)
        tokens = self.covariate_encoder(features)  # (B, N+M, d)
        y_onehot = F.one_hot(y_train, self.config.max_classes).to(tokens.dtype)  # (B, N, 10)
        train_tokens = tokens[:, :n_train] + self.target_encoder(y_onehot)  # (B, N, d)
        tokens = torch.cat([train_tokens, tokens[:, n_train:]], dim=1).unsqueeze(2)  # (B, N+M, 1, d)
        for block in self.blocks:
            tokens = block(tokens, n_train)
        return self.decoder(self.final_norm(tokens[:, n_train:, 0]))[..., :n_classes]  # (B, M, K)

    def token_slots(self, n_classes: int) -> int:
        return 1

    def forward_flops(self, rows: int, n_train: int, n_classes: int) -> float:
        """EquiTabPFN's datapoint-attention block with one token per row, 2L times; the covariate and
        target encoders ``4Rfd + 2N * max_classes * d`` and the decoder MLP ``2M(dh + h * max_classes)``."""
        config, n, d, h = self.config, n_train, self.config.d_model, self.config.mlp_hidden
        block = 4 * rows * d * d + 4 * n * d * d + 4 * rows * n * d + 4 * rows * d * h
        decoder = 2 * (rows - n) * (d * h + h * config.max_classes)
        return 4 * rows * config.f_max * d + 2 * n * config.max_classes * d + 2 * config.n_layers * block + decoder

    # -- the forward in pieces (model/inference.py) ----------------------------------------

    def encode_context(self, x_train: torch.Tensor, y_train: torch.Tensor, n_classes: int,
                       plan: ChunkPlan = ChunkPlan(), store_dtype: torch.dtype | None = None) -> Context:
        """The train side for a training set, computed once: per block the train rows' keys
        and values, stored in ``store_dtype`` (default: the compute dtype) block by block."""
        self._check_classes(n_classes)
        tokens = self._tokens(x_train, y_train)  # (B, N, 1, d)
        keys_values = []
        for block in self.blocks:
            tokens, kept = datapoints_chunked(block, tokens, plan, x_train.shape[1], keep=True, keep_dtype=store_dtype)
            keys_values.append(kept)
        return Context(n_classes, keys_values)

    def context_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers an :meth:`encode_context` of one training set holds: keys and values of
        N x d per block, whatever K."""
        return 2 * len(self.blocks) * n_train * self.config.d_model

    def building_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers :meth:`encode_context` works with besides what it keeps, in the compute dtype:
        the token tensor and one block's keys and values, each N x d."""
        return 3 * n_train * self.config.d_model

    def embed_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """The decoder's inputs (B, M, d) for test rows x_test (B, M, F) against an :meth:`encode_context`."""
        tokens = self._tokens(x_test, None)  # (B, M, 1, d)
        for block, cached in zip(self.blocks, context.keys_values):
            tokens, _ = datapoints_chunked(block, tokens, plan, context.n_train, cached)
        return self.final_norm(tokens[:, :, 0])  # (B, M, d)

    def predict_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        return self.decoder(self.embed_in_context(context, x_test, plan))[..., : context.n_classes]  # (B, M, K)

    def forward_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                        plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        if plan.fits(self, x_train.shape[1], x_test.shape[1], n_classes):
            return self(x_train, y_train, x_test, n_classes)
        return self.decoder(self.embed_chunked(x_train, y_train, x_test, n_classes, plan))[..., :n_classes]  # (B, M, K)

    def embed_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                      plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """The decoder's inputs for the test rows, (B, M, d), in bounded memory, keeping nothing."""
        self._check_classes(n_classes)
        n_train = x_train.shape[1]
        tokens = torch.cat([self._tokens(x_train, y_train), self._tokens(x_test, None)], dim=1)  # (B, N+M, 1, d)
        for block in self.blocks:
            tokens, _ = datapoints_chunked(block, tokens, plan, n_train)
        return self.final_norm(tokens[:, n_train:, 0])  # (B, M, d)

    def _check_classes(self, n_classes: int) -> None:
        if n_classes > self.class_limit:
            raise TooManyClassesError.for_counts(self.class_limit, n_classes)

    def _tokens(self, x: torch.Tensor, y_train: torch.Tensor | None) -> torch.Tensor:
        """Input tokens of train rows (labels given) or test rows."""
        # x: (B, R, F), y_train: (B, R) or None -> (B, R, 1, d)
        tokens = self.covariate_encoder(missing_indicator_features(x, self.config.f_max))
        if y_train is not None:
            tokens = tokens + self.target_encoder(F.one_hot(y_train, self.config.max_classes).to(tokens.dtype))
        return tokens.unsqueeze(2)
