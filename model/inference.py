"""Inference in pieces, for fitted classifiers: the same function as the networks' forward,
computed so that work is reused and memory stays bounded. Each network composes these
pieces in three methods, ``encode_context``, ``predict_in_context`` and ``forward_chunked``.

- **Fit once, predict many.** Test rows attend to train rows only and train rows never see
  test rows, so the train side of every layer does not depend on the test rows.
  ``network.encode_context`` runs the train rows once and returns a :class:`Context`: per
  datapoint-attention block, the train rows' keys and values (plus, for EquiTabPFN, their
  final representations for the decoder); ``network.predict_in_context`` runs any test rows
  against it.
- **Bounded memory.** Component attention, the MLPs and the LayerNorms act on each row
  independently, and datapoint attention on each slot (class component) independently.
  ``network.forward_chunked`` and the two methods above update the token tensor in place, a
  chunk of rows or a chunk of slots at a time (see :class:`ChunkPlan`), so that memory is
  one token tensor plus bounded temporaries instead of several full-size intermediates;
  a block whose work fits one chunk runs in one piece, as the forward does.

Inference only: tensors are updated in place, so run these under ``torch.inference_mode()``
or ``torch.no_grad()``. Results equal ``network(x_train, y_train, x_test, n_classes)`` to
floating-point tolerance (matrix products over different chunk shapes round differently).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .layers import DatapointAttentionBlock


@dataclass(frozen=True)
class ChunkPlan:
    """How many rows (row-wise work) and slots (datapoint attention) to process at once so
    that no temporary holds more than about ``max_elements`` numbers."""

    max_elements: int = 2**24

    def rows(self, slots: int, width: int, hidden: int) -> int:
        # a row's largest temporary is the MLP's hidden activations: slots x hidden
        return max(1, self.max_elements // max(1, slots * max(hidden, 3 * width)))

    def slots(self, rows: int, n_train: int, width: int, hidden: int) -> int:
        # per slot: the rows' query, output and MLP hidden activations, the train keys/values;
        # the fused attention kernel works through the scores in blocks, never all at once
        return max(1, self.max_elements // max(1, rows * (hidden + 3 * width) + 2 * n_train * width))

    def fits(self, network: nn.Module, n_train: int, n_test: int, n_classes: int) -> bool:
        """Whether every block of ``network``'s forward fits one chunk (then it runs as is)."""
        rows, slots = n_train + n_test, network.token_slots(n_classes)
        width, hidden = network.config.d_model, network.config.mlp_hidden
        return self.rows(slots, width, hidden) >= rows and self.slots(rows, n_train, width, hidden) >= slots


@dataclass
class Context:
    """The train side of a network for one training set, reusable by any test rows."""

    n_classes: int
    keys_values: list[tuple[torch.Tensor, torch.Tensor]]  # per datapoint block: each (B, S, heads, N, head_dim)
    h_train: torch.Tensor | None = None  # EquiTabPFN: (B, N, (1+K)*d) final train representations
    y_onehot: torch.Tensor | None = None  # EquiTabPFN: (B, N, K)

    @property
    def n_train(self) -> int:
        return self.keys_values[0][0].shape[3]

    def _tensors(self) -> list[torch.Tensor]:
        return [t for pair in self.keys_values for t in pair] + [t for t in (self.h_train, self.y_onehot) if t is not None]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._tensors())

    def to(self, device: torch.device | str) -> Context:
        """A copy on ``device``."""
        h_train, y_onehot = (None if t is None else t.to(device) for t in (self.h_train, self.y_onehot))
        return Context(self.n_classes, [(key.to(device), value.to(device)) for key, value in self.keys_values],
                       h_train, y_onehot)


# -- one block, on part of the rows or slots -----------------------------------------------


def train_keys_values(block: DatapointAttentionBlock, train_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A datapoint block's keys and values of the train rows, each (B, S, heads, N, head_dim)."""
    return block.keys_values(block._attention_input(train_tokens))


def attend_to_train(
    block: DatapointAttentionBlock, tokens: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> torch.Tensor:
    """A datapoint block's output for rows that attend to the given train keys and values."""
    return block.attend(tokens, block.queries(block._attention_input(tokens)), key, value)


def rows_chunked(module: nn.Module, tokens: torch.Tensor, step: int) -> torch.Tensor:
    """``module``, which acts on each row of ``tokens`` (B, R, S, d) alone: in one piece when
    ``step`` covers the rows, else in place ``step`` rows at a time."""
    if isinstance(module, nn.Identity) or step >= tokens.shape[1]:
        return module(tokens)
    for start in range(0, tokens.shape[1], step):
        tokens[:, start : start + step] = module(tokens[:, start : start + step])
    return tokens


def datapoints_chunked(
    block: DatapointAttentionBlock,
    tokens: torch.Tensor,
    plan: ChunkPlan,
    n_train: int,
    cached: tuple[torch.Tensor, torch.Tensor] | None = None,
    keep: bool = False,
    keep_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """The datapoint block on ``tokens`` (B, R, S, d): in one piece when it fits the plan,
    else in place a chunk of slots at a time (slots are independent). Keys/values come from
    ``cached`` or else from the first ``n_train`` rows of ``tokens``; with ``keep``, the
    latter are returned for all slots, stored in ``keep_dtype`` (default: the tokens') chunk
    by chunk, so that a lower-precision cache never holds a full-precision copy. Returns
    (tokens, kept keys/values or None)."""
    batch, rows, slots, width = tokens.shape
    step = plan.slots(rows, n_train, width, block.mlp[0].out_features)
    if step >= slots:
        if cached is not None:  # stored in the cache's dtype, computed in the tokens'
            key, value = cached[0].to(tokens.dtype), cached[1].to(tokens.dtype)
        else:
            key, value = train_keys_values(block, tokens[:, :n_train])
        kept = (key.to(dtype=keep_dtype), value.to(dtype=keep_dtype)) if keep else None
        return attend_to_train(block, tokens, key, value), kept
    kept = None
    for start in range(0, slots, step):
        chunk = slice(start, start + step)
        if cached is not None:
            key, value = cached[0][:, chunk].to(tokens.dtype), cached[1][:, chunk].to(tokens.dtype)
        else:
            key, value = train_keys_values(block, tokens[:, :n_train, chunk])
            if keep:
                if kept is None:
                    dtype = keep_dtype or key.dtype
                    kept = (key.new_empty(batch, slots, *key.shape[2:], dtype=dtype),
                            value.new_empty(batch, slots, *value.shape[2:], dtype=dtype))
                kept[0][:, chunk], kept[1][:, chunk] = key, value
        tokens[:, :, chunk] = attend_to_train(block, tokens[:, :, chunk], key, value)
    return tokens, kept
