"""Prediction with local contexts: each group of nearby test rows runs every ensemble member
against its own context, the union of its rows' nearest training rows (see
:mod:`.local_context`).

A group's context holds only some of the classes. EquiTabPFN runs on those classes alone and
gives the others probability 0: by its equivariance this is exactly the network on the local
rows with their classes numbered 0..k-1. TabPFN* does the same up to its class limit and uses
error-correcting output codes (as :class:`~equibench.baselines.ecoc.ECOCClassifier` does)
within a context that holds more classes. Each member's feature transform is fitted on the
context's rows, as a classifier fitted on those rows alone would fit it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..baselines.ecoc import draw_codebook, min_hamming_distance
from ..preprocessing import MemberSpec, MemberTransform
from .local_context import Group, plan_groups
from .official_preprocessing import OfficialTransform
from .prediction import combine_members

#: Test rows grouped at once: k-means and the neighbour search run on this many rows at a
#: time, so memory stays bounded however many rows are predicted.
CHUNK_ROWS = 4096
#: Predicts of at least this many test rows show a progress bar on a terminal's stderr.
PROGRESS_ROWS = 20_000
#: Codebooks drawn for a TabPFN* context past the class limit; the best is kept (as ECOCClassifier).
_CODEBOOK_DRAWS = 20
_EPS = 1e-12


class LocalPrediction:
    """Mixin of the estimators: predictions with local contexts, over their fitted attributes
    ``train_values_``, ``train_labels_``, ``neighbours_``, ``local_seed_``, ``transforms_``
    (the members' specs) and ``encoder_``."""

    def _local_ensemble(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """The ensemble's outputs for the encoded test rows ``values`` (M, F), each (M, K) in
        ``classes_`` order; a class absent from a row's context has probability 0 and logit -inf."""
        n_rows, n_classes = values.shape[0], len(self.classes_)
        result = {"proba": np.zeros((n_rows, n_classes)), "log_proba": np.full((n_rows, n_classes), -np.inf),
                  "logits": np.full((n_rows, n_classes), -np.inf)}
        for rows, present, outputs in self._local_groups(values):
            for name, array in outputs.items():
                result[name][np.ix_(rows, present)] = array
        return result

    def context_summary(self, X, y=None) -> dict[str, float]:
        """How the contexts serve the rows of X, without running the network: "groups" (1 with
        one context for every row), the mean "rows" and "classes" per context and, given the
        rows' labels ``y``, "true_class_absent": the fraction of rows whose class is not in
        their context (they get probability 0 for it)."""
        labels = self.train_labels_.numpy()
        values = self._encoded(X)
        if self.context_ != "local":
            groups = [Group(np.arange(len(values)), np.arange(len(labels)))]
        else:
            groups = [Group(start + g.test_rows, g.context_rows)
                      for start in range(0, len(values), CHUNK_ROWS) for g in self._plan(values, start)]
        present = [np.unique(labels[g.context_rows]) for g in groups]
        summary = {"groups": len(groups), "rows": float(np.mean([len(g.context_rows) for g in groups])),
                   "classes": float(np.mean([len(classes) for classes in present]))}
        if y is not None:
            codes = np.searchsorted(self.classes_, np.asarray(y))
            known = (codes < len(self.classes_)) & (self.classes_[np.minimum(codes, len(self.classes_) - 1)] == y)
            absent = sum(int((~np.isin(codes[g.test_rows], classes) | ~known[g.test_rows]).sum())
                         for g, classes in zip(groups, present))
            summary["true_class_absent"] = absent / len(values)
        return summary

    def _plan(self, values: np.ndarray, start: int) -> list[Group]:
        block = values[start : start + CHUNK_ROWS]
        return plan_groups(self.neighbours_, block, self.local_neighbors, self.local_group_size, self.local_max_rows,
                           self.local_seed_)

    def _local_groups(self, values: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]]:
        """Per group: its test rows (positions in ``values``), the classes its context holds
        (positions in ``classes_``) and the ensemble's outputs on them, each (m, k)."""
        labels = self.train_labels_.numpy()
        counts = self.encoder_.category_counts()
        with _progress(len(values)) as advance:
            for start in range(0, len(values), CHUNK_ROWS):
                block = values[start : start + CHUNK_ROWS]
                for group in self._plan(values, start):
                    present, local_labels = np.unique(labels[group.context_rows], return_inverse=True)
                    outputs = self._group_outputs(self.train_values_[group.context_rows], local_labels, len(present),
                                                  block[group.test_rows], counts)
                    yield start + group.test_rows, present, outputs
                    advance(len(group.test_rows))

    def _group_outputs(self, context_values: np.ndarray, labels: np.ndarray, n_local: int, test_values: np.ndarray,
                       counts: list[int]) -> dict[str, np.ndarray]:
        """The ensemble's outputs (each (m, n_local)) for test rows (m, F) against a context of
        rows (n, F) with labels 0..n_local-1."""
        if n_local == 1:  # one class in the context: it is the answer
            ones = np.ones((len(test_values), 1))
            return {"proba": ones, "log_proba": 0 * ones, "logits": 0 * ones}
        limit = self.model_.class_limit
        if limit is not None and n_local > limit:
            return self._group_codes(context_values, labels, n_local, test_values, counts, limit)
        member_logits = (self._context_logits(transform.spec, context_values, labels, n_local, test_values, counts)
                         for transform in self.transforms_)
        return combine_members(member_logits, self.softmax_temperature)

    def _context_logits(self, spec: MemberSpec, context_values: np.ndarray, labels: np.ndarray, n_local: int,
                        test_values: np.ndarray, counts: list[int]) -> torch.Tensor:
        """One member's logits (m, n_local) float64, in the context's class order: its transform
        fitted on the context rows, the classes rotated by its class shift (TabPFN*) and back."""
        f_max = self.model_.config.f_max
        transform = OfficialTransform(f_max) if self.preprocessing == "official" else MemberTransform(spec, f_max)
        model, dtype, autocast = self._network()
        x_train = transform.fit_transform(context_values, counts).to(self.device_, dtype).unsqueeze(0)  # (1, n, F)
        x_test = transform.transform(test_values).to(dtype)  # (m, F)
        shift = spec.class_shift % n_local
        y_train = torch.from_numpy((labels + shift) % n_local).to(self.device_).unsqueeze(0)  # (1, n)
        chunks = []
        with torch.inference_mode(), self._mixed_precision(autocast):
            for start in range(0, len(x_test), self.batch_size):
                batch = x_test[start : start + self.batch_size].to(self.device_).unsqueeze(0)  # (1, b, F)
                chunks.append(model.forward_chunked(x_train, y_train, batch, n_local)[0].to("cpu", torch.float64))
        return torch.roll(torch.cat(chunks), -shift, dims=-1)  # (m, n_local)

    def _group_codes(self, context_values: np.ndarray, labels: np.ndarray, n_local: int, test_values: np.ndarray,
                     counts: list[int], limit: int) -> dict[str, np.ndarray]:
        """TabPFN* on a context with more classes than it takes: error-correcting output codes,
        one codebook row per run (the members' transforms in turn, no class shift); a class's
        score is the mean log-probability of its symbol where it is not "rest"."""
        rng = np.random.RandomState(self.local_seed_ + n_local)
        redundancy = float(len(self.transforms_))
        codebook = max((draw_codebook(n_local, limit, redundancy, rng) for _ in range(_CODEBOOK_DRAWS)),
                       key=min_hamming_distance)
        rest = limit - 1
        scores, covered = np.zeros((len(test_values), n_local)), np.zeros(n_local)
        for index, row in enumerate(codebook):
            symbols, symbol_labels = np.unique(row[labels], return_inverse=True)
            spec = self.transforms_[index % len(self.transforms_)].spec
            symbol_proba = np.full((len(test_values), limit), _EPS)
            if len(symbols) == 1:
                symbol_proba[:, symbols[0]] = 1.0
            else:
                unshifted = MemberSpec(spec.variant, spec.feature_shift, 0, spec.categorical_encoding)
                logits = self._context_logits(unshifted, context_values, symbol_labels, len(symbols), test_values, counts)
                proba = torch.softmax(logits / self.softmax_temperature, dim=-1).numpy()
                symbol_proba[:, symbols] = np.maximum(proba, _EPS)
            own = row != rest
            scores[:, own] += np.log(symbol_proba[:, row[own]])
            covered[own] += 1
        scores = torch.from_numpy(scores / np.maximum(covered, 1))
        return {"proba": torch.softmax(scores, dim=-1).numpy(), "log_proba": torch.log_softmax(scores, dim=-1).numpy(),
                "logits": scores.numpy()}


class _progress:
    """A progress bar over the predicted rows on a terminal's stderr for long predicts; a
    no-op otherwise. Used as ``with _progress(n) as advance: advance(rows_done)``."""

    def __init__(self, n_rows: int):
        self.n_rows = n_rows
        self.bar = None

    def __enter__(self):
        if self.n_rows < PROGRESS_ROWS or not sys.stderr.isatty():
            return lambda rows: None
        self.bar = Progress(TextColumn("local contexts"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("predict", total=self.n_rows)
        return lambda rows: self.bar.advance(task, rows)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
