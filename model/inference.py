"""Inference in pieces, for fitted classifiers: the same function as the networks' forward,
computed so that work is reused and memory stays bounded.

- **Fit once, predict many.** Test rows attend to train rows only and train rows never see
  test rows, so the train side of every layer does not depend on the test rows.
  :func:`encode_context` runs the train rows once and returns, per datapoint-attention
  block, the train rows' keys and values (plus, for EquiTabPFN, their final representations
  for the decoder); :func:`predict_in_context` runs any test rows against that context.
- **Bounded memory.** Component attention, the MLPs and the LayerNorms act on each row
  independently, and datapoint attention on each slot (class component) independently.
  :func:`forward_chunked` and the two functions above update the token tensor in place, a
  chunk of rows or a chunk of slots at a time (see :class:`ChunkPlan`), so that memory is
  one token tensor plus bounded temporaries instead of several full-size intermediates;
  a block whose work fits one chunk runs in one piece, as the forward does.

Inference only: tensors are updated in place, so run these under ``torch.inference_mode()``
or ``torch.no_grad()``. Results equal ``model(x_train, y_train, x_test, n_classes)`` to
floating-point tolerance (matrix products over different chunk shapes round differently).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InvalidInputError
from .layers import ComponentAttentionBlock, DatapointAttentionBlock, missing_indicator_features
from .tabpfn_star import TooManyClassesError


class ChunkPlan:
    """How many rows (row-wise work) and slots (datapoint attention) to process at once so
    that no temporary holds more than about ``max_elements`` numbers."""

    def __init__(self, max_elements: int = 2**24):
        if max_elements < 1:
            raise InvalidInputError(f"max_elements must be positive, got {max_elements}")
        self.max_elements = max_elements

    def rows(self, slots: int, width: int, hidden: int) -> int:
        # a row's largest temporary is the MLP's hidden activations: slots x hidden
        return max(1, self.max_elements // max(1, slots * max(hidden, 3 * width)))

    def slots(self, rows: int, n_train: int, width: int, hidden: int) -> int:
        # per slot: the rows' query, output and MLP hidden activations, the train keys/values;
        # the fused attention kernel works through the scores in blocks, never all at once
        return max(1, self.max_elements // max(1, rows * (hidden + 3 * width) + 2 * n_train * width))


@dataclass
class Context:
    """The train side of a network for one training set, reusable by any test rows."""

    n_classes: int
    keys_values: list[tuple[torch.Tensor, torch.Tensor]]  # per datapoint block: each (B, S, heads, N, head_dim)
    h_train: torch.Tensor | None = None  # EquiTabPFN: (B, N, (1+K)*d) final train representations
    y_onehot: torch.Tensor | None = None  # EquiTabPFN: (B, N, K)

    def nbytes(self) -> int:
        tensors = [t for pair in self.keys_values for t in pair] + [t for t in (self.h_train, self.y_onehot) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)


# -- one block, on part of the rows or slots -----------------------------------------------


def train_keys_values(block: DatapointAttentionBlock, train_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A datapoint block's keys (QK-normalised when the block is) and values of the train rows."""
    # train_tokens: (B, N, S, d) -> key, value: each (B, S, heads, N, head_dim)
    batch, n_train, slots, width = train_tokens.shape
    heads = block.n_heads
    key_value = block.key_value(block._attention_input(train_tokens))
    key, value = key_value.view(batch, n_train, slots, 2, heads, width // heads).permute(3, 0, 2, 4, 1, 5)
    if block.qk_norm:
        key = block.key_norm(key)
    return key, value


def attend_to_train(
    block: DatapointAttentionBlock, tokens: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """A datapoint block's output for rows that attend to the given train keys and values."""
    # tokens: (B, R, S, d); key, value: (B, S, heads, N, head_dim) -> (B, R, S, d)
    batch, rows, slots, width = tokens.shape
    heads, head_dim = block.n_heads, width // block.n_heads
    query = block.query(block._attention_input(tokens)).view(batch, rows, slots, heads, head_dim)
    query = query.permute(0, 2, 3, 1, 4).reshape(batch * slots, heads, rows, head_dim)
    if block.qk_norm:
        query = block.query_norm(query)
    n_train = key.shape[3]
    key = key.reshape(batch * slots, heads, n_train, head_dim)  # 4-D: torch's fused CPU kernel (5-D falls back)
    value = value.reshape(batch * slots, heads, n_train, head_dim)
    attended = F.scaled_dot_product_attention(query, key, value)  # (B*S, heads, R, head_dim)
    attended = attended.view(batch, slots, heads, rows, head_dim).permute(0, 3, 1, 2, 4).reshape(batch, rows, slots, width)
    return block._finish(tokens, block.out(attended))


def _components(block: ComponentAttentionBlock, tokens: torch.Tensor, plan: ChunkPlan) -> torch.Tensor:
    # tokens: (B, R, 1+K, d) -> (B, R, 1+K, d): in one piece when it fits the plan, else
    # updated in place a chunk of rows at a time (rows are independent)
    step = plan.rows(tokens.shape[2], tokens.shape[3], block.mlp[0].out_features)
    if step >= tokens.shape[1]:
        return block(tokens)
    for start in range(0, tokens.shape[1], step):
        tokens[:, start : start + step] = block(tokens[:, start : start + step])
    return tokens


def _datapoints(
    block: DatapointAttentionBlock,
    tokens: torch.Tensor,
    plan: ChunkPlan,
    n_train: int,
    cached: tuple[torch.Tensor, torch.Tensor] | None = None,
    keep: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """The datapoint block on ``tokens`` (B, R, S, d): in one piece when it fits the plan,
    else in place a chunk of slots at a time (slots are independent). Keys/values come from
    ``cached`` or else from the first ``n_train`` rows of ``tokens``; with ``keep``, the
    latter are returned for all slots. Returns (tokens, kept keys/values or None)."""
    batch, rows, slots, width = tokens.shape
    step = plan.slots(rows, n_train, width, block.mlp[0].out_features)
    if step >= slots:
        key, value = cached if cached is not None else train_keys_values(block, tokens[:, :n_train])
        return attend_to_train(block, tokens, key, value), (key, value) if keep else None
    kept = None
    for start in range(0, slots, step):
        chunk = slice(start, start + step)
        if cached is not None:
            key, value = cached[0][:, chunk], cached[1][:, chunk]
        else:
            key, value = train_keys_values(block, tokens[:, :n_train, chunk])
            if keep:
                if kept is None:
                    kept = (key.new_empty(batch, slots, *key.shape[2:]), value.new_empty(batch, slots, *value.shape[2:]))
                kept[0][:, chunk], kept[1][:, chunk] = key, value
        tokens[:, :, chunk] = attend_to_train(block, tokens[:, :, chunk], key, value)
    return tokens, kept


def _final_norm(norm: nn.Module, tokens: torch.Tensor, plan: ChunkPlan) -> torch.Tensor:
    step = plan.rows(tokens.shape[2], tokens.shape[3], tokens.shape[3])
    if isinstance(norm, nn.Identity) or step >= tokens.shape[1]:
        return norm(tokens)
    for start in range(0, tokens.shape[1], step):
        tokens[:, start : start + step] = norm(tokens[:, start : start + step])
    return tokens


# -- EquiTabPFN ----------------------------------------------------------------------------


def _equi_tokens(model: nn.Module, x: torch.Tensor, y_onehot: torch.Tensor | None, n_classes: int,
                 plan: ChunkPlan, out: torch.Tensor | None = None) -> torch.Tensor:
    """EquiTabPFN's input tokens of train rows (labels given) or test rows (prediction
    tokens), written into ``out`` when given."""
    # x: (B, R, F), y_onehot: (B, R, K) or None -> (B, R, 1+K, d)
    covariate = model.covariate_encoder(missing_indicator_features(x, model.config.f_max))  # (B, R, d)
    batch, rows, d = covariate.shape
    tokens = covariate.new_empty(batch, rows, 1 + n_classes, d) if out is None else out
    tokens[:, :, 0] = covariate
    if y_onehot is None:
        tokens[:, :, 1:] = model.prediction_token.to(covariate.dtype)
        return tokens
    step = plan.rows(n_classes, d, d)
    for start in range(0, rows, step):
        tokens[:, start : start + step, 1:] = model.target_encoder(y_onehot[:, start : start + step].unsqueeze(-1))
    return tokens


def _onehot(model: nn.Module, y_train: torch.Tensor, n_classes: int) -> torch.Tensor:
    return F.one_hot(y_train, n_classes).to(model.covariate_encoder.weight.dtype)


def _equi_layers(model: nn.Module, tokens: torch.Tensor, plan: ChunkPlan, n_train: int,
                 cache: list | None = None, keep: bool = False) -> tuple[torch.Tensor, list]:
    kept = []
    for index, layer in enumerate(model.layers):
        tokens = _components(layer.components, tokens, plan)
        tokens, keys_values = _datapoints(layer.datapoints, tokens, plan, n_train, None if cache is None else cache[index], keep)
        kept.append(keys_values)
    return _final_norm(model.final_norm, tokens, plan), kept


# -- TabPFN* -------------------------------------------------------------------------------


def _star_tokens(model: nn.Module, x: torch.Tensor, y_train: torch.Tensor | None) -> torch.Tensor:
    # x: (B, R, F), y_train: (B, R) or None -> (B, R, 1, d)
    tokens = model.covariate_encoder(missing_indicator_features(x, model.config.f_max))
    if y_train is not None:
        tokens = tokens + model.target_encoder(F.one_hot(y_train, model.config.max_classes).to(tokens.dtype))
    return tokens.unsqueeze(2)


def _star_check(model: nn.Module, n_classes: int) -> None:
    if n_classes > model.config.max_classes:
        raise TooManyClassesError.for_counts(model.config.max_classes, n_classes)


# -- the three entry points ------------------------------------------------------------------


def encode_context(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, n_classes: int,
                   plan: ChunkPlan | None = None) -> Context:
    """The train side of ``model`` for a training set, computed once.

    x_train: (B, N, F) normalised features; y_train: (B, N) class ids in [0, n_classes).
    """
    plan = plan or ChunkPlan()
    n_train = x_train.shape[1]
    if model.arch == "equitabpfn":
        y_onehot = _onehot(model, y_train, n_classes)
        tokens = _equi_tokens(model, x_train, y_onehot, n_classes, plan)  # (B, N, 1+K, d)
        tokens, keys_values = _equi_layers(model, tokens, plan, n_train, keep=True)
        return Context(n_classes, keys_values, tokens.flatten(2), y_onehot)
    _star_check(model, n_classes)
    tokens = _star_tokens(model, x_train, y_train)  # (B, N, 1, d)
    keys_values = []
    for block in model.blocks:
        tokens, kept = _datapoints(block, tokens, plan, n_train, keep=True)
        keys_values.append(kept)
    return Context(n_classes, keys_values)


def predict_in_context(model: nn.Module, context: Context, x_test: torch.Tensor,
                       plan: ChunkPlan | None = None) -> torch.Tensor:
    """Class logits (B, M, K) of test rows x_test (B, M, F) against a :func:`encode_context`."""
    plan = plan or ChunkPlan()
    n_train = context.keys_values[0][0].shape[3]
    if model.arch == "equitabpfn":
        tokens = _equi_tokens(model, x_test, None, context.n_classes, plan)  # (B, M, 1+K, d)
        tokens, _ = _equi_layers(model, tokens, plan, n_train, cache=context.keys_values)
        return model.decoder(context.h_train, tokens.flatten(2), context.y_onehot)  # (B, M, K)
    tokens = _star_tokens(model, x_test, None)  # (B, M, 1, d)
    for block, cached in zip(model.blocks, context.keys_values):
        tokens, _ = _datapoints(block, tokens, plan, n_train, cached)
    return model.decoder(model.final_norm(tokens[:, :, 0]))[..., : context.n_classes]  # (B, M, K)


def forward_chunked(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                    n_classes: int, plan: ChunkPlan | None = None) -> torch.Tensor:
    """``model(x_train, y_train, x_test, n_classes)`` in bounded memory, keeping nothing;
    the model's own forward when its blocks' work fits one chunk of the plan."""
    plan = plan or ChunkPlan()
    n_train = x_train.shape[1]
    rows, slots = n_train + x_test.shape[1], 1 + n_classes if model.arch == "equitabpfn" else 1
    width, hidden = model.config.d_model, model.config.mlp_hidden
    if plan.rows(slots, width, hidden) >= rows and plan.slots(rows, n_train, width, hidden) >= slots:
        return model(x_train, y_train, x_test, n_classes)
    if model.arch == "equitabpfn":
        y_onehot = _onehot(model, y_train, n_classes)
        batch, n_test = x_test.shape[:2]
        tokens = y_onehot.new_empty(batch, n_train + n_test, 1 + n_classes, model.config.d_model)  # (B, N+M, 1+K, d)
        _equi_tokens(model, x_train, y_onehot, n_classes, plan, out=tokens[:, :n_train])
        _equi_tokens(model, x_test, None, n_classes, plan, out=tokens[:, n_train:])
        tokens, _ = _equi_layers(model, tokens, plan, n_train)
        flat = tokens.flatten(2)  # (B, N+M, (1+K)*d)
        return model.decoder(flat[:, :n_train], flat[:, n_train:], y_onehot)  # (B, M, K)
    _star_check(model, n_classes)
    tokens = torch.cat([_star_tokens(model, x_train, y_train), _star_tokens(model, x_test, None)], dim=1)
    for block in model.blocks:
        tokens, _ = _datapoints(block, tokens, plan, n_train)
    return model.decoder(model.final_norm(tokens[:, n_train:, 0]))[..., :n_classes]  # (B, M, K)
