"""Prediction with local contexts: each group of nearby test rows runs the network against its
own context, the union of its rows' nearest training rows (see :mod:`.local_context`).

A group's context holds only some of the classes. EquiTabPFN runs on those classes alone and
gives the others probability 0: by its equivariance this is exactly the network on the local
rows with their classes numbered 0..k-1. TabPFN* does the same up to its class limit and uses
error-correcting output codes (as :class:`~equibench.classifier.ecoc.ECOCClassifier` does)
within a context that holds more classes. Each *run* (a member, or a codebook row) fits its
feature transform on the context's rows, as a classifier fitted on those rows alone would.

``fit_mode="low_memory"`` groups the test rows of each predict by k-means; ``"fit_with_cache"``
clusters the training rows at fit, encodes each cluster's context once per run, and serves
each test row from its nearest cluster's context (a row's prediction then depends on it alone).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..errors import InvalidInputError
from ..preprocessing import MemberSpec, MemberTransform
from .ecoc import draw_codebook, min_hamming_distance
from .local_context import Group, cluster_contexts, plan_groups, route_to_clusters
from .official_preprocessing import OfficialTransform
from .prediction import combine_members, test_batches

#: Test rows grouped at once: k-means and the neighbour search run on this many rows at a
#: time, so memory stays bounded however many rows are predicted.
CHUNK_ROWS = 4096
#: Predicts of at least this many test rows show a progress bar on a terminal's stderr.
PROGRESS_ROWS = 20_000
#: ``fit_with_cache``: training rows per cluster, as a fraction of ``local_max_rows``.
CLUSTER_FRACTION = 4
#: Codebooks drawn for a TabPFN* context past the class limit; the best is kept (as ECOCClassifier).
_CODEBOOK_DRAWS = 20
_EPS = 1e-12


@dataclass(frozen=True)
class Run:
    """One network pass over a local context: a member's transform, the context rows' labels
    for this pass (0..n_classes-1) and the class rotation to undo."""

    spec: MemberSpec
    labels: np.ndarray  # (n,)
    n_classes: int
    shift: int = 0


@dataclass(frozen=True)
class RunPlan:
    """The runs of one context; with ``codebook`` (TabPFN* past its class limit), run i is
    codebook row i, whose symbols present in the context are ``symbols[i]``."""

    runs: list[Run]
    codebook: np.ndarray | None = None  # (rows, n_local)
    symbols: list[np.ndarray] | None = None


class LocalPrediction:
    """Mixin of the estimators: predictions with local contexts, over their fitted attributes
    ``train_values_``, ``train_labels_``, ``neighbours_``, ``local_seed_``, ``transforms_``
    (the members' specs), ``encoder_`` and, with ``fit_with_cache``, ``cluster_centroids_``,
    ``cluster_contexts_`` and ``contexts_``."""

    # -- what serves which rows ----------------------------------------------------------

    def context_summary(self, X, y=None) -> dict[str, float]:
        """How the contexts serve the rows of X, without running the network: "groups" (1 with
        one context for every row), the mean "rows" and "classes" per context and, given the
        rows' labels ``y``, "true_class_absent": the fraction of rows whose class is not in
        their context (they get probability 0 for it)."""
        labels = self.train_labels_.numpy()
        values = self._encoded(X)
        groups = list(self._groups(values)) if self.context_ == "local" else \
            [Group(np.arange(len(values)), np.arange(len(labels)))]
        present = [np.unique(labels[g.context_rows]) for g in groups]
        summary = {"groups": len(groups), "rows": float(np.mean([len(g.context_rows) for g in groups])),
                   "classes": float(np.mean([len(classes) for classes in present]))}
        if y is not None:
            y = np.asarray(y)
            codes = np.minimum(np.searchsorted(self.classes_, y), len(self.classes_) - 1)
            known = self.classes_[codes] == y
            absent = sum(int((~np.isin(codes[g.test_rows], classes) | ~known[g.test_rows]).sum())
                         for g, classes in zip(groups, present))
            summary["true_class_absent"] = absent / len(values)
        return summary

    def _groups(self, values: np.ndarray) -> Iterator[Group]:
        """The groups of the encoded test rows ``values`` (positions in ``values``) and their contexts."""
        if self.fit_mode == "fit_with_cache":  # the training clusters, fixed at fit
            for cluster, rows in route_to_clusters(self.neighbours_, values, self.cluster_centroids_):
                yield Group(rows, self.cluster_contexts_[cluster])
            return
        for start in range(0, len(values), CHUNK_ROWS):
            block = values[start : start + CHUNK_ROWS]
            for group in plan_groups(self.neighbours_, block, self.local_neighbors, self.local_group_size,
                                     self.local_max_rows, self.local_seed_):
                yield Group(start + group.test_rows, group.context_rows)

    # -- fit_with_cache ------------------------------------------------------------------

    def _plan_clusters(self) -> None:
        """fit_with_cache: the training-row clusters and their contexts (cheap; no network)."""
        cluster_size = max(1, self.local_max_rows // CLUSTER_FRACTION)
        self.cluster_centroids_, self.cluster_contexts_ = cluster_contexts(
            self.neighbours_, self.local_neighbors, cluster_size, self.local_max_rows, self.local_seed_)

    def _local_cache_numel(self) -> int:
        """Numbers the cached contexts of every cluster and run hold (see ``context_numel``)."""
        labels = self.train_labels_.numpy()
        total = 0
        for context_rows in self.cluster_contexts_:
            present, local_labels = np.unique(labels[context_rows], return_inverse=True)
            if len(present) > 1:
                total += sum(self.model_.context_numel(len(context_rows), run.n_classes)
                             for run in self._plan_runs(local_labels, len(present)).runs)
        return total

    def _encode_local_contexts(self) -> list:
        """fit_with_cache: per cluster, per run, its fitted transform and encoded context."""
        labels = self.train_labels_.numpy()
        counts = self.encoder_.category_counts()
        model, dtype, autocast = self._network()
        contexts = []
        for context_rows in self.cluster_contexts_:
            present, local_labels = np.unique(labels[context_rows], return_inverse=True)
            cached = []
            if len(present) > 1:
                for run in self._plan_runs(local_labels, len(present)).runs:
                    transform = self._run_transform(run.spec)
                    x_train = transform.fit_transform(self.train_values_[context_rows], counts)
                    x_train = x_train.to(self.device_, dtype).unsqueeze(0)  # (1, n, F)
                    y_train = torch.from_numpy(run.labels).to(self.device_).unsqueeze(0)  # (1, n)
                    with torch.inference_mode(), self._mixed_precision(autocast):
                        context = model.encode_context(x_train, y_train, run.n_classes, store_dtype=self._cache_dtype())
                    cached.append((transform, context))
            contexts.append(cached)
        return contexts

    # -- prediction ----------------------------------------------------------------------

    def _local_ensemble(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """The ensemble's outputs for the encoded test rows ``values`` (M, F), each (M, K) in
        ``classes_`` order; a class absent from a row's context has probability 0 and logit -inf."""
        n_rows, n_classes = values.shape[0], len(self.classes_)
        result = {"proba": np.zeros((n_rows, n_classes)), "log_proba": np.full((n_rows, n_classes), -np.inf),
                  "logits": np.full((n_rows, n_classes), -np.inf)}
        labels = self.train_labels_.numpy()
        counts = self.encoder_.category_counts()
        with _progress(n_rows) as advance:
            for group, cache in self._groups_and_caches(values):
                present, local_labels = np.unique(labels[group.context_rows], return_inverse=True)
                outputs = self._group_outputs(self.train_values_[group.context_rows], local_labels, len(present),
                                              values[group.test_rows], counts, cache)
                for name, array in outputs.items():
                    result[name][np.ix_(group.test_rows, present)] = array
                advance(len(group.test_rows))
        return result

    def _groups_and_caches(self, values: np.ndarray) -> Iterator[tuple[Group, list | None]]:
        """Each group of the encoded test rows with its cluster's encoded runs (fit_with_cache,
        encoded again here after unpickling or load_from_fit_state) or None."""
        if self.fit_mode != "fit_with_cache":
            yield from ((group, None) for group in self._groups(values))
            return
        if getattr(self, "contexts_", None) is None:
            self.contexts_ = self._encode_local_contexts()
        for cluster, rows in route_to_clusters(self.neighbours_, values, self.cluster_centroids_):
            yield Group(rows, self.cluster_contexts_[cluster]), self.contexts_[cluster]

    def _local_raw_logits(self, values: np.ndarray) -> np.ndarray:
        """Each member's logits before the temperature, (n_estimators, M, K) in ``classes_``
        order, -inf for the classes a row's context lacks (0 for the one class of a one-class
        context). A TabPFN* context past its class limit has no member logits (output codes): refused."""
        n_members, n_classes = len(self.transforms_), len(self.classes_)
        raw = np.full((n_members, values.shape[0], n_classes), -np.inf)
        labels = self.train_labels_.numpy()
        counts = self.encoder_.category_counts()
        for group, cache in self._groups_and_caches(values):
            present, local_labels = np.unique(labels[group.context_rows], return_inverse=True)
            if len(present) == 1:
                raw[:, group.test_rows, present[0]] = 0.0
                continue
            plan = self._plan_runs(local_labels, len(present))
            if plan.codebook is not None:
                raise InvalidInputError(
                    f"a local context of {len(present)} classes went through output codes (TabPFN* takes at most "
                    f"{self.model_.class_limit}), so its rows have no per-member logits; use predict_logits or "
                    "predict_proba, or context='subsample'"
                )
            test_values, context_values = values[group.test_rows], self.train_values_[group.context_rows]
            for index, run in enumerate(plan.runs):
                logits = self._run_logits(run, context_values, test_values, counts, None if cache is None else cache[index])
                raw[np.ix_([index], group.test_rows, present)] = logits.numpy()[None]
        return raw

    def _plan_runs(self, labels: np.ndarray, n_local: int) -> RunPlan:
        """The runs of a context whose rows have ``labels`` 0..n_local-1 (n_local >= 2): one per
        member (TabPFN*'s rotating the classes), or past TabPFN*'s class limit one per row of a
        seeded codebook (the members' transforms in turn, no rotation)."""
        limit = self.model_.class_limit
        if limit is None or n_local <= limit:
            runs = []
            for transform in self.transforms_:
                shift = transform.spec.class_shift % n_local
                runs.append(Run(transform.spec, (labels + shift) % n_local, n_local, shift))
            return RunPlan(runs)
        rng = np.random.RandomState((self.local_seed_ + n_local) % 2**32)
        codebook = max((draw_codebook(n_local, limit, float(len(self.transforms_)), rng) for _ in range(_CODEBOOK_DRAWS)),
                       key=min_hamming_distance)
        runs, symbols = [], []
        for index, row in enumerate(codebook):
            present, symbol_labels = np.unique(row[labels], return_inverse=True)
            spec = self.transforms_[index % len(self.transforms_)].spec
            unshifted = MemberSpec(spec.variant, spec.feature_shift, 0, spec.categorical_encoding)
            runs.append(Run(unshifted, symbol_labels, len(present)))
            symbols.append(present)
        return RunPlan(runs, codebook, symbols)

    def _group_outputs(self, context_values: np.ndarray, labels: np.ndarray, n_local: int, test_values: np.ndarray,
                       counts: list[int], cache: list | None = None) -> dict[str, np.ndarray]:
        """The ensemble's outputs (each (m, n_local)) for test rows (m, F) against a context of
        rows (n, F) with labels 0..n_local-1; ``cache``: the context's encoded runs."""
        if n_local == 1:  # one class in the context: it is the answer
            ones = np.ones((len(test_values), 1))
            return {"proba": ones, "log_proba": 0 * ones, "logits": 0 * ones}
        plan = self._plan_runs(labels, n_local)
        logits = [self._run_logits(run, context_values, test_values, counts, None if cache is None else cache[i])
                  for i, run in enumerate(plan.runs)]
        if plan.codebook is None:
            return combine_members(logits, self.softmax_temperature)
        return self._decode(plan, logits, len(test_values), n_local)

    def _decode(self, plan: RunPlan, logits: list[torch.Tensor], n_rows: int, n_local: int) -> dict[str, np.ndarray]:
        """Error-correcting output codes: a class's score is the mean log-probability of its
        symbol over the codebook rows where it is not "rest"; the probabilities their softmax."""
        limit = self.model_.class_limit
        rest = limit - 1
        scores, covered = np.zeros((n_rows, n_local)), np.zeros(n_local)
        for row, present, run_logits in zip(plan.codebook, plan.symbols, logits):
            symbol_proba = np.full((n_rows, limit), _EPS)
            symbol_proba[:, present] = np.maximum(torch.softmax(run_logits / self.softmax_temperature, -1).numpy(), _EPS)
            own = row != rest
            scores[:, own] += np.log(symbol_proba[:, row[own]])
            covered[own] += 1
        scores = torch.from_numpy(scores / np.maximum(covered, 1))
        return {"proba": torch.softmax(scores, dim=-1).numpy(), "log_proba": torch.log_softmax(scores, dim=-1).numpy(),
                "logits": scores.numpy()}

    def _run_transform(self, spec: MemberSpec):
        f_max = self.model_.config.f_max
        return OfficialTransform(f_max) if self.preprocessing == "official" else MemberTransform(spec, f_max)

    def _run_logits(self, run: Run, context_values: np.ndarray, test_values: np.ndarray, counts: list[int],
                    cached=None) -> torch.Tensor:
        """One run's logits (m, run.n_classes) float64, its class rotation undone: against the
        cached (transform, context) when given, else the transform fitted on the context rows."""
        model, dtype, autocast = self._network()
        if cached is not None:
            transform, context = cached
        else:
            transform = self._run_transform(run.spec)
            x_train = transform.fit_transform(context_values, counts).to(self.device_, dtype).unsqueeze(0)  # (1, n, F)
            y_train = torch.from_numpy(run.labels).to(self.device_).unsqueeze(0)  # (1, n)
        x_test = transform.transform(test_values).to(dtype)  # (m, F)
        chunks = []
        with torch.inference_mode(), self._mixed_precision(autocast):
            for batch, n_real in test_batches(x_test, self.batch_size, self.device_):  # (1, b, F)
                if cached is not None:
                    out = model.predict_in_context(context, batch)[0]
                else:
                    out = model.forward_chunked(x_train, y_train, batch, run.n_classes)[0]
                chunks.append(out[:n_real].to("cpu", torch.float64))
        return torch.roll(torch.cat(chunks), -run.shift, dims=-1)  # (m, n_classes)


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
