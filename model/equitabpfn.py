"""EquiTabPFN: a prior-fitted network that is exactly equivariant to the order of the classes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidInputError
from .config import ModelConfig
from .inference import ChunkPlan, Context, datapoints_chunked, rows_chunked
from .layers import (
    ComponentAttentionBlock,
    DatapointAttentionBlock,
    EquivariantDecoder,
    missing_indicator_features,
    official_missing_indicator_features,
)
from .network import TabularPFN


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


class EquiTabPFN(TabularPFN):
    """Covariate token + one token per class component per row, L bi-attention layers and
    the non-parametric equivariant decoder. Works for any number of classes K >= 1."""

    arch = "equitabpfn"
    class_limit: int | None = None  # any number of classes

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.covariate_encoder = nn.Linear(2 * config.f_max, d)
        self.target_encoder = nn.Linear(1, d)  # the same 1x1 map for every class component
        self.prediction_token = nn.Parameter(torch.randn(d) * 0.02)
        self.layers = nn.ModuleList(EquiTabPFNLayer(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(d) if config.norm_first else nn.Identity()
        self.decoder = EquivariantDecoder(config.decoder_hidden, eps=config.decoder_norm_eps)

    def forward(
        self,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_test: torch.Tensor,
        n_classes: int,
    ) -> torch.Tensor:
        """Class logits of the test rows, (B, M, K) (the shapes: :class:`TabularPFN`). With
        ``min_class_slots`` > K the network runs on that many class slots (the extra ones ghost
        classes) and returns the K real ones."""
        batch, n_train, _ = x_train.shape
        n_test = x_test.shape[1]
        d = self.config.d_model
        slots = self.class_slots(n_classes)  # S >= K
        features = self._features(torch.cat([x_train, x_test], dim=1))
        covariate = self.covariate_encoder(features).unsqueeze(2)  # (B, N+M, 1, d)
        y_onehot = F.one_hot(y_train, slots).to(covariate.dtype)  # (B, N, S)
        train_targets = self.target_encoder(y_onehot.unsqueeze(-1))  # (B, N, S, d)
        test_targets = self.prediction_token.to(covariate.dtype).expand(batch, n_test, slots, d)
        targets = torch.cat([train_targets, test_targets], dim=1)  # (B, N+M, S, d)
        tokens = torch.cat([covariate, targets], dim=2)  # (B, N+M, 1+S, d)
        for layer in self.layers:
            tokens = layer(tokens, n_train)
        flat = self.final_norm(tokens).flatten(2)  # (B, N+M, (1+S)*d)
        return self.decoder(flat[:, :n_train], flat[:, n_train:], y_onehot)[..., :n_classes]  # (B, M, K)

    def class_slots(self, n_classes: int) -> int:
        """Class tokens per row for K = ``n_classes`` classes: max(min_class_slots, K)."""
        return max(self.config.min_class_slots, n_classes)

    def token_slots(self, n_classes: int) -> int:
        """Tokens per row: the covariate and one per class slot."""
        return 1 + self.class_slots(n_classes)

    def forward_flops(self, rows: int, n_train: int, n_classes: int) -> float:
        """With M = rows - N test rows and S = 1 + K tokens per row, each of the L layers: component
        attention (queries of the covariate tokens ``2Rd^2``, keys and values of all tokens ``4RSd^2``,
        scores and weighted values ``4RSd``, the output projection of 2 tokens per row ``4Rd^2``),
        datapoint attention (queries and output ``4RSd^2``, keys and values of the train tokens
        ``4NSd^2``, scores and weighted values ``4RNSd``) and their MLPs (``8RSdh``); around them the
        covariate and target encoders (``4Rfd + 2NKd``) and the decoder (``2MNSd + 2MNK + 4MK *
        decoder_hidden``)."""
        config, n, m, k = self.config, n_train, rows - n_train, n_classes
        d, h, s = config.d_model, config.mlp_hidden, 1 + k
        component = 2 * rows * d * d + 4 * rows * s * d * d + 4 * rows * s * d + 4 * rows * d * d
        datapoint = 4 * rows * s * d * d + 4 * n * s * d * d + 4 * rows * n * s * d
        mlps = 2 * 4 * rows * s * d * h
        decoder = 2 * m * n * s * d + 2 * m * n * k + 4 * m * k * config.decoder_hidden
        return 4 * rows * config.f_max * d + 2 * n * k * d + config.n_layers * (component + datapoint + mlps) + decoder

    # -- the forward in pieces (model/inference.py) ----------------------------------------

    def encode_context(self, x_train: torch.Tensor, y_train: torch.Tensor, n_classes: int,
                       plan: ChunkPlan = ChunkPlan(), store_dtype: torch.dtype | None = None) -> Context:
        """The train side for a training set, computed once: per layer the train rows' keys and
        values, and the final train representations and one-hot labels for the decoder, stored
        in ``store_dtype`` (default: the compute dtype) as each layer produces them."""
        self._check_cacheable(x_train)
        slots = self.class_slots(n_classes)
        y_onehot = self._onehot(y_train, slots)  # (B, N, S)
        tokens = self._tokens(x_train, y_onehot, slots, plan)  # (B, N, 1+S, d)
        tokens, keys_values = self._layers_chunked(tokens, plan, x_train.shape[1], keep=True, keep_dtype=store_dtype)
        return Context(n_classes, keys_values, tokens.flatten(2).to(dtype=store_dtype), y_onehot.to(dtype=store_dtype))

    def context_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers an :meth:`encode_context` of one training set holds: keys and values per
        layer and the final train representations, each N x (1+K) x d, and the N x K labels."""
        slots = self.class_slots(n_classes)
        return (2 * self.config.n_layers + 1) * n_train * (1 + slots) * self.config.d_model + n_train * slots

    def building_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers :meth:`encode_context` works with besides what it keeps, in the compute dtype:
        the token tensor and one layer's keys and values, each N x (1+K) x d."""
        return 3 * n_train * self.token_slots(n_classes) * self.config.d_model

    def embed_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """The decoder's inputs for test rows x_test (B, M, F) against an :meth:`encode_context`:
        their final tokens, (B, M, 1+K, d) (slot 0 the covariate token, slot 1+k class k)."""
        self._check_cacheable(x_test)
        tokens = self._tokens(x_test, None, self.class_slots(context.n_classes), plan)  # (B, M, 1+S, d)
        tokens, _ = self._layers_chunked(tokens, plan, context.n_train, cache=context.keys_values)
        return tokens

    def predict_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        h_test = self.embed_in_context(context, x_test, plan).flatten(2)  # (B, M, (1+K)*d)
        dtype = h_test.dtype  # the cache may be stored in a lower precision
        logits = self.decoder(context.h_train.to(dtype), h_test, context.y_onehot.to(dtype))  # (B, M, S)
        return logits[..., : context.n_classes]  # (B, M, K)

    def forward_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                        plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        n_train = x_train.shape[1]
        if plan.fits(self, n_train, x_test.shape[1], n_classes):
            return self(x_train, y_train, x_test, n_classes)
        tokens, y_onehot = self._all_tokens_chunked(x_train, y_train, x_test, n_classes, plan)
        flat = tokens.flatten(2)  # (B, N+M, (1+S)*d)
        return self.decoder(flat[:, :n_train], flat[:, n_train:], y_onehot)[..., :n_classes]  # (B, M, K)

    def embed_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                      plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """The decoder's inputs for the test rows, (B, M, 1+K, d), in bounded memory, keeping nothing."""
        tokens, _ = self._all_tokens_chunked(x_train, y_train, x_test, n_classes, plan)
        return tokens[:, x_train.shape[1]:]

    def _all_tokens_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                            plan: ChunkPlan) -> tuple[torch.Tensor, torch.Tensor]:
        """The final tokens of train and test rows, (B, N+M, 1+K, d), and the one-hot labels (B, N, K)."""
        batch, n_train = x_train.shape[:2]
        slots = self.class_slots(n_classes)
        y_onehot = self._onehot(y_train, slots)  # (B, N, S)
        tokens = y_onehot.new_empty(batch, n_train + x_test.shape[1], 1 + slots, self.config.d_model)
        rows = torch.cat([x_train, x_test], dim=1) if self._standardised_indicator else None  # the indicator's rows
        self._tokens(x_train, y_onehot, slots, plan, out=tokens[:, :n_train], rows=rows)
        self._tokens(x_test, None, slots, plan, out=tokens[:, n_train:], rows=rows)
        tokens, _ = self._layers_chunked(tokens, plan, n_train)
        return tokens, y_onehot

    @property
    def _standardised_indicator(self) -> bool:
        return self.config.missing_indicator == "standardised"

    def _onehot(self, y_train: torch.Tensor, n_classes: int) -> torch.Tensor:
        return F.one_hot(y_train, n_classes).to(self.covariate_encoder.weight.dtype)

    def _features(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The covariate encoder's input for x (B, R, F): (B, R, 2*f_max); the official
        indicator is standardised over ``rows`` (default: x's own rows)."""
        if self._standardised_indicator:
            return official_missing_indicator_features(x, self.config.f_max, rows)
        return missing_indicator_features(x, self.config.f_max)

    def _check_cacheable(self, x: torch.Tensor) -> None:
        """Refuse non-finite inputs to the cached pieces of a network whose indicator is
        standardised over the train and test rows of one call, which a cache cannot know."""
        if self._standardised_indicator and not torch.isfinite(x).all():
            raise InvalidInputError(
                "this EquiTabPFN network (the authors' released one) standardises its missing-value indicator over the train and test "
                "rows of each call, so a cached train side cannot serve rows with NaN or inf: use "
                "fit_mode='low_memory' (the classifier) or forward_chunked"
            )

    def _tokens(self, x: torch.Tensor, y_onehot: torch.Tensor | None, n_classes: int, plan: ChunkPlan,
                out: torch.Tensor | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Input tokens of train rows (labels given) or test rows (prediction tokens), written
        into ``out`` when given; ``n_classes`` class slots; ``rows``: see :meth:`_features`."""
        # x: (B, R, F), y_onehot: (B, R, K) or None -> (B, R, 1+K, d)
        covariate = self.covariate_encoder(self._features(x, rows))  # (B, R, d)
        batch, rows, d = covariate.shape
        tokens = covariate.new_empty(batch, rows, 1 + n_classes, d) if out is None else out
        tokens[:, :, 0] = covariate
        if y_onehot is None:
            tokens[:, :, 1:] = self.prediction_token.to(covariate.dtype)
            return tokens
        step = plan.rows(n_classes, d, d)
        for start in range(0, rows, step):
            tokens[:, start : start + step, 1:] = self.target_encoder(y_onehot[:, start : start + step].unsqueeze(-1))
        return tokens

    def _layers_chunked(self, tokens: torch.Tensor, plan: ChunkPlan, n_train: int, cache: list | None = None,
                        keep: bool = False, keep_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, list]:
        """The layers and the final norm on ``tokens`` (B, R, 1+K, d), in place; datapoint
        attention against ``cache``'s keys/values or the first ``n_train`` rows' (returned
        per layer with ``keep``)."""
        slots, d = tokens.shape[2:]
        kept = []
        for index, layer in enumerate(self.layers):
            tokens = rows_chunked(layer.components, tokens, plan.rows(slots, d, self.config.mlp_hidden))
            tokens, keys_values = datapoints_chunked(layer.datapoints, tokens, plan, n_train,
                                                     None if cache is None else cache[index], keep, keep_dtype)
            kept.append(keys_values)
        return rows_chunked(self.final_norm, tokens, plan.rows(slots, d, d)), kept
