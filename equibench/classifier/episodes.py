"""Fine-tuning's data: the held-out validation rows and the training episodes, drawn as predict
sees the table.

Nothing here depends on the class names: the validation split draws one permutation of the
rows and takes each class's share from it; an episode's rows, member and order come from the
random state alone. So a relabelled table is split, and fine-tuned, the same way; with an
exactly equivariant network the fine-tuned probabilities are the relabelled ones permuted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .contexts import ContextStrategy


def validation_split(codes: np.ndarray, ratio: float, max_rows: int,
                     rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, validation) row positions of labels ``codes`` (N,): about ``ratio`` of each
    class's rows held out, at most ``max_rows`` in all, every class keeping at least one row for
    training (a class of one row is never held out); blind to the class names (see the module)."""
    order = rng.permutation(len(codes))
    classes, counts = np.unique(codes, return_counts=True)
    share = min(ratio, max_rows / len(codes))
    held_out = np.minimum(np.floor(share * counts + 0.5).astype(int), counts - 1)
    validation = np.sort(np.concatenate([order[codes[order] == c][:n] for c, n in zip(classes, held_out)]))
    return np.setdiff1d(np.arange(len(codes)), validation), validation


#: An episode's most rows (the pretraining datasets' most) and most tokens (rows x tokens per row:
#: EquiTabPFN's 1 + classes), so that a step's time and memory stay bounded (a 2,400-row context of
#: 26 classes took 24 s and 8 GB a step); a local context (at most 500 rows) of up to 31 classes is whole.
MAX_EPISODE_ROWS = 1024
MAX_EPISODE_TOKENS = 1024 * 16


@dataclass(frozen=True)
class Episode:
    """One training step's data: context rows and query rows, transformed by one member's
    preprocessing fitted on the context, with labels 0..n_classes-1 over the context's classes."""

    x_context: torch.Tensor  # (N, F)
    y_context: torch.Tensor  # (N,)
    x_query: torch.Tensor  # (M, F)
    y_query: torch.Tensor  # (M,)
    n_classes: int


class EpisodeSampler:
    """Episodes from a fitted context strategy: a random anchor training row, the context that
    serves it (with local contexts its cluster's neighbourhood; else the one shared context), its
    rows (a random :data:`MAX_EPISODE_ROWS` of them at most, fewer where ``token_slots`` per row would
    pass :data:`MAX_EPISODE_TOKENS`) split at random into context and query rows (``query_ratio`` of
    them queries), one of the ensemble's members fitted on the context rows. The context's classes are the episode's, as in
    predict (a query row of a class the context lacks is dropped); a network with a class limit
    (TabPFN*) trains on a random subset of that many of them, and its member rotates the class ids."""

    def __init__(self, strategy: ContextStrategy, query_ratio: float, rng: np.random.RandomState,
                 token_slots: Callable[[int], int]):
        self.strategy = strategy
        self.query_ratio = query_ratio
        self.rng = rng
        self.token_slots = token_slots  # the network's tokens per row for K classes
        self.owner = strategy.training_row_contexts()  # (N,)

    def draw(self) -> Episode | None:
        """The next episode; None when the drawn context cannot make one (fewer than two classes
        or no query row of its classes)."""
        strategy, rng = self.strategy, self.rng
        rows = strategy.contexts[self.owner[rng.randint(len(self.owner))]]
        n_classes = min(len(np.unique(strategy.labels[rows])), strategy.class_limit or len(rows))
        most = min(MAX_EPISODE_ROWS, MAX_EPISODE_TOKENS // self.token_slots(n_classes))
        rows = rows[rng.permutation(len(rows))[:most]]
        n_query = max(1, int(round(self.query_ratio * len(rows))))
        query, context = rows[:n_query], rows[n_query:]
        spec = strategy.specs[rng.randint(len(strategy.specs))]
        present = np.unique(strategy.labels[context])
        limit = strategy.class_limit
        if limit is not None and len(present) > limit:
            present = np.sort(rng.choice(present, limit, replace=False))
            context = context[np.isin(strategy.labels[context], present)]
        query = query[np.isin(strategy.labels[query], present)]
        if len(present) < 2 or len(query) == 0:
            return None
        n_classes = len(present)
        shift = spec.class_shift % n_classes

        def codes(positions: np.ndarray) -> torch.Tensor:
            return torch.from_numpy((np.searchsorted(present, strategy.labels[positions]) + shift) % n_classes)

        transform = strategy.member_transform(spec)
        x_context = transform.fit_transform(strategy.values[context], strategy.category_counts)
        return Episode(x_context, codes(context), transform.transform(strategy.values[query]), codes(query), n_classes)


def episode_loss(model: torch.nn.Module, episode: Episode, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The mean cross-entropy of the episode's query rows given its context rows (a scalar)."""
    x_context, x_query = (x.to(device, dtype)[None] for x in (episode.x_context, episode.x_query))  # (1, N|M, F)
    logits = model(x_context, episode.y_context.to(device)[None], x_query, episode.n_classes)  # (1, M, K)
    return torch.nn.functional.cross_entropy(logits[0], episode.y_query.to(device))
