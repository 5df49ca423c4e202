"""Building blocks shared by EquiTabPFN and TabPFN*.

Token tensors are laid out as ``(B, R, S, d)``: B datasets, R = N + M rows (the first N
are train rows), S slots per row (1 + K for EquiTabPFN, 1 for TabPFN*), width d.
Blocks are post-LayerNorm by default (the paper's: ``x = LN(x + attention(x));
x = LN(x + MLP(x))``) or pre-LayerNorm (``x = x + attention(LN(x)); x = x + MLP(LN(x))``);
optionally queries and keys are RMS-normalised per head (QK-norm). Every normalisation acts
on one token at a time, so neither option touches the class-order equivariance.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidInputError


def missing_indicator_features(x: torch.Tensor, f_max: int) -> torch.Tensor:
    """``[x ; indicator(x)]`` zero-padded to ``f_max`` features each.

    Non-finite entries become 0 in the value half; the indicator half holds 1 for NaN,
    2 for +inf, -2 for -inf and 0 otherwise.
    """
    # x: (..., F) with F <= f_max  ->  (..., 2 * f_max)
    indicator = torch.isnan(x).to(x.dtype) + 2 * torch.isposinf(x).to(x.dtype)
    indicator = indicator - 2 * torch.isneginf(x).to(x.dtype)
    return _padded(torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), indicator, f_max)


def official_missing_indicator_features(x: torch.Tensor, f_max: int, rows: torch.Tensor | None = None) -> torch.Tensor:
    """``[x ; indicator(x)]`` zero-padded to ``f_max`` features each, as the authors' released
    network computes them.

    NaN becomes 0 in the value half and +-inf the largest finite number of the dtype. The
    indicator codes NaN as -1, +inf as +1, -inf as +2 and is standardised per dataset and
    column over ``rows`` (default: the rows of ``x``; the forward passes all train and test
    rows): minus the mean, divided by the unbiased std + 1e-6, clipped to +-100. A column
    without non-finite values, or non-finite everywhere, gets an indicator of 0 (so does a
    single row, where the unbiased std is undefined: the cached pieces pass one test row).
    """
    # x: (B, R, F), rows: (B, R', F) with F <= f_max  ->  (B, R, 2 * f_max)
    def codes(t: torch.Tensor) -> torch.Tensor:
        return (2 * torch.isneginf(t) + torch.isposinf(t) - torch.isnan(t).to(torch.int64)).to(t.dtype)

    reference = codes(x if rows is None else rows)  # (B, R', F)
    mean = reference.mean(dim=-2, keepdim=True)
    # unbiased, as the official code; 0 for a single row
    std = reference.std(dim=-2, keepdim=True) if reference.shape[-2] > 1 else torch.zeros_like(mean)
    std = std + 1e-6
    indicator = ((codes(x) - mean) / std).clamp(-100, 100)
    return _padded(torch.nan_to_num(x, nan=0.0), indicator, f_max)


def _padded(values: torch.Tensor, indicator: torch.Tensor, f_max: int) -> torch.Tensor:
    """``[values ; indicator]``, each zero-padded to ``f_max`` features."""
    n_features = values.shape[-1]
    if n_features > f_max:
        raise InvalidInputError(
            f"got {n_features} features but the model takes at most {f_max}; "
            "reduce the features first (the classifiers do this automatically)"
        )
    pad = (0, f_max - n_features)
    return torch.cat([F.pad(values, pad), F.pad(indicator, pad)], dim=-1)


class _ResidualBlock(nn.Module):
    """Attention projections plus the residual MLP shared by both block kinds."""

    def __init__(self, d_model: int, n_heads: int, mlp_hidden: int, norm_first: bool = False, qk_norm: bool = False):
        super().__init__()
        self.n_heads = n_heads
        self.norm_first = norm_first
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm_attention = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, d_model))
        self.norm_mlp = nn.LayerNorm(d_model)
        if qk_norm:
            self.query_norm = nn.RMSNorm(d_model // n_heads)
            self.key_norm = nn.RMSNorm(d_model // n_heads)
        self.qk_norm = qk_norm

    def _attention_input(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(tokens) if self.norm_first else tokens

    def _finish(self, tokens: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            tokens = tokens + update
            return tokens + self.mlp(self.norm_mlp(tokens))
        tokens = self.norm_attention(tokens + update)
        return self.norm_mlp(tokens + self.mlp(tokens))


class DatapointAttentionBlock(_ResidualBlock):
    """Attention across rows within each slot; every row attends to the train rows only.

    Keys and values are computed from the first ``n_train`` rows only, so no
    (N+M) x (N+M) mask is ever built and test rows never see each other. The forward's
    pieces (:meth:`queries`, :meth:`keys_values`, :meth:`attend`) also serve the cached and
    chunked inference of :mod:`.inference`.
    """

    def forward(self, tokens: torch.Tensor, n_train: int) -> torch.Tensor:
        # tokens: (B, R, S, d) -> (B, R, S, d)
        inputs = self._attention_input(tokens)
        query = self.queries(inputs)  # before the keys: autograd then sums the inputs' gradients in that order
        return self.attend(tokens, query, *self.keys_values(inputs[:, :n_train]))

    def queries(self, inputs: torch.Tensor) -> torch.Tensor:
        """The rows' queries (QK-normalised when the block is) from their attention inputs."""
        # inputs: (B, R, S, d) -> (B*S, heads, R, head_dim)
        batch, rows, slots, width = inputs.shape
        heads, head_dim = self.n_heads, width // self.n_heads
        query = self.query(inputs).view(batch, rows, slots, heads, head_dim)
        query = query.permute(0, 2, 3, 1, 4).reshape(batch * slots, heads, rows, head_dim)
        return self.query_norm(query) if self.qk_norm else query

    def keys_values(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The train rows' keys (QK-normalised when the block is) and values from their attention inputs."""
        # inputs: (B, N, S, d) -> key, value: each (B, S, heads, N, head_dim)
        batch, n_train, slots, width = inputs.shape
        key_value = self.key_value(inputs).view(batch, n_train, slots, 2, self.n_heads, width // self.n_heads)
        key, value = key_value.permute(3, 0, 2, 4, 1, 5)
        return self.key_norm(key) if self.qk_norm else key, value

    def attend(self, tokens: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """The block's output for rows (their ``queries``) that attend to the given train keys and values."""
        # tokens: (B, R, S, d); query: (B*S, heads, R, head_dim); key, value: (B, S, heads, N, head_dim)
        batch, rows, slots, width = tokens.shape
        heads, head_dim, n_train = self.n_heads, width // self.n_heads, key.shape[3]
        key = key.reshape(batch * slots, heads, n_train, head_dim)  # 4-D: torch's fused CPU kernel (5-D falls back)
        value = value.reshape(batch * slots, heads, n_train, head_dim)
        attended = F.scaled_dot_product_attention(query, key, value)  # (B*S, heads, R, head_dim)
        attended = attended.view(batch, slots, heads, rows, head_dim).permute(0, 3, 1, 2, 4)
        return self._finish(tokens, self.out(attended.reshape(batch, rows, slots, width)))


class ComponentAttentionBlock(_ResidualBlock):
    """Attention across the 1+K slots of each row.

    The covariate token (slot 0) attends to all slots; each target token attends only to
    the covariate token. A softmax over a single key is 1, so a target token's attention
    output is exactly the covariate token's value: no scores are computed for target
    tokens and the cost stays linear in K.
    """

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # tokens: (B, R, 1+K, d) -> (B, R, 1+K, d)
        batch, rows, slots, width = tokens.shape
        heads = self.n_heads
        head_dim = width // heads
        inputs = self._attention_input(tokens)
        query = self.query(inputs[:, :, 0]).view(batch * rows, heads, 1, head_dim)
        key_value = self.key_value(inputs).view(batch * rows, slots, 2, heads, head_dim)
        key, value = key_value.permute(2, 0, 3, 1, 4)  # each (B*R, heads, 1+K, head_dim)
        if self.qk_norm:
            query, key = self.query_norm(query), self.key_norm(key)
        covariate_out = F.scaled_dot_product_attention(query, key, value)  # (B*R, heads, 1, hd)
        target_out = value[:, :, :1]  # the covariate token's value, (B*R, heads, 1, hd)
        both = torch.cat([covariate_out, target_out], dim=2).transpose(1, 2)
        projected = self.out(both.reshape(batch, rows, 2, width))  # (B, R, 2, d)
        update = torch.cat(
            [projected[:, :, :1], projected[:, :, 1:].expand(batch, rows, slots - 1, width)], dim=2
        )
        return self._finish(tokens, update)


class EquivariantDecoder(nn.Module):
    """Non-parametric decoder: attention over train rows with raw one-hot targets as values,
    plus a pointwise residual MLP applied to each class score independently (its LayerNorm's
    ``eps`` is 1.0 in the official network)."""

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.residual = nn.Sequential(
            nn.Linear(1, hidden), nn.LayerNorm(hidden, eps=eps), nn.GELU(), nn.Linear(hidden, 1)
        )

    def forward(
        self, h_train: torch.Tensor, h_test: torch.Tensor, y_train_onehot: torch.Tensor
    ) -> torch.Tensor:
        # h_train: (B, N, (1+K)*d), h_test: (B, M, (1+K)*d), y_train_onehot: (B, N, K)
        # SDPA's default scale is 1/sqrt((1+K)*d), the paper's temperature.
        scores = F.scaled_dot_product_attention(
            h_test.unsqueeze(1), h_train.unsqueeze(1), y_train_onehot.unsqueeze(1)
        ).squeeze(1)  # (B, M, K)
        return scores + self.residual(scores.unsqueeze(-1)).squeeze(-1)  # (B, M, K)
