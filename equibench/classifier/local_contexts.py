"""Local contexts, for tables past the context cap: the training rows clustered at fit, each
cluster's context the union of its rows' nearest training rows, each test row served by the
context of the cluster of its nearest training row (whose own nearest rows are therefore in its
context). The neighbours are found in a distance space of the training rows
(:class:`NeighbourIndex`, an exact brute-force search).

A context holds only some of the classes. EquiTabPFN runs on those classes alone and gives the
others probability 0: by its equivariance this is exactly the network on the local rows with
their classes numbered 0..k-1. TabPFN* does the same up to its class limit and uses
error-correcting output codes within a context that holds more classes.
"""

from __future__ import annotations

import numpy as np
from sklearn import config_context
from sklearn.cluster import MiniBatchKMeans
from sklearn.neighbors import NearestNeighbors

from ..preprocessing import stratified_subsample
from .contexts import ContextStrategy

#: The defaults of ``local_neighbors`` (nearest training rows each training row brings to its
#: cluster's context), ``local_cluster_size`` (training rows per cluster) and ``local_max_rows``
#: (the most rows of a local context), chosen by the ablation of benchmarks/large_tables.py (docs/BENCHMARKS.md).
LOCAL_NEIGHBORS = 20
LOCAL_CLUSTER_SIZE = 125
LOCAL_MAX_ROWS = 500
#: The neighbour search computes distances in blocks of at most this many MB (scikit-learn's
#: ``working_memory``, 1024 by default), so its memory does not grow with the training rows.
NEIGHBOUR_MEMORY_MB = 128
#: Standardised values are clipped to +-FAR in the distance space (float32 holds them).
FAR = 1e6


def uses_local_context(context: str, n_train: int, max_train_rows: int, ignore_pretraining_limits: bool) -> bool:
    """Whether a classifier with these parameters, fitted on ``n_train`` rows, uses local
    contexts: ``context="local"``, or "auto" above ``max_train_rows`` (unless every row is to
    be the context, ``ignore_pretraining_limits``)."""
    return context == "local" or (context == "auto" and n_train > max_train_rows and not ignore_pretraining_limits)


class NeighbourIndex:
    """The training rows in a distance space and a nearest-neighbour index over them.

    Each column is standardised by its mean and standard deviation over the training rows
    (columns with no spread by 1); NaN and +-inf, which the classifier passes to the network's
    missing-value indicator, sit at the column mean here. Ordinal codes of categorical columns
    count as numbers, as the classifier's ordinal encoding presents them; a standardised value
    beyond ``FAR`` counts as ``FAR``. It is a function of the encoded rows alone, so holders
    rebuild it from them (pickles and fit states keep the rows, not the index).
    """

    def fit(self, values: np.ndarray) -> NeighbourIndex:
        # values: (N, F) encoded training rows
        finite = np.isfinite(values)
        clean = np.where(finite, values, 0.0)
        count = np.maximum(finite.sum(axis=0), 1)
        self.mean_ = clean.sum(axis=0) / count  # (F,)
        spread = np.sqrt((np.where(finite, values - self.mean_, 0.0) ** 2).sum(axis=0) / count)
        self.scale_ = np.where(spread > 0, spread, 1.0)  # (F,)
        self.points_ = self.transform(values)  # (N, F) float32
        # brute force (BLAS distance blocks): measured faster than scikit-learn's kd-tree (3x on
        # adult) and faiss-cpu's exact flat index on the large suite (docs/BENCHMARKS.md)
        self.index_ = NearestNeighbors(algorithm="brute").fit(self.points_)
        return self

    def transform(self, values: np.ndarray) -> np.ndarray:
        """Rows (n, F) in the distance space, (n, F) float32."""
        scaled = (values - self.mean_) / self.scale_
        # values beyond float32 (1e300) stay finite: far out, not at infinity
        return np.clip(np.where(np.isfinite(scaled), scaled, 0.0), -FAR, FAR).astype(np.float32)

    def neighbours(self, points: np.ndarray, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n_neighbors`` nearest training rows of each point (m, F), nearest first:
        distances (m, k) and training-row positions (m, k)."""
        with config_context(working_memory=NEIGHBOUR_MEMORY_MB):  # distance blocks of at most this size
            return self.index_.kneighbors(points, n_neighbors=min(n_neighbors, len(self.points_)))


def union_context(distances: np.ndarray, indices: np.ndarray, max_rows: int) -> np.ndarray:
    """The training rows that are among the nearest of any of a cluster's rows, nearest first
    (by their best rank among the cluster's rows, then distance), at most ``max_rows``."""
    # distances, indices: (m, k) -> (n,) with n <= min(max_rows, m * k)
    ranks = np.broadcast_to(np.arange(indices.shape[1]), indices.shape)
    order = np.lexsort((distances.ravel(), ranks.ravel()))
    candidates = indices.ravel()[order]
    _, first = np.unique(candidates, return_index=True)
    return candidates[np.sort(first)][:max_rows]


class LocalContexts(ContextStrategy):
    """One context per cluster of about ``cluster_size`` training rows (k-means, seeded): the
    union of its rows' ``n_neighbors`` nearest training rows, nearest first, at most
    ``max_rows``. A test row is served by the cluster of its nearest training row."""

    name = "local"

    def __init__(self, *, n_neighbors: int, cluster_size: int, max_rows: int, **common):
        super().__init__(**common)
        self.n_neighbors = n_neighbors
        self.cluster_size = cluster_size
        self.max_rows = max_rows

    def _plan(self, values: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
        self.assignments = np.zeros(len(labels), dtype=np.int64)  # each training row's cluster
        self.index = self._index()
        if self.index is None:  # no column varies: nothing is nearer than anything else
            return [stratified_subsample(labels, self.max_rows, np.random.RandomState(self.seed))]
        points = self.index.points_
        n_clusters = -(-len(points) // self.cluster_size)
        if n_clusters > 1:
            kmeans = MiniBatchKMeans(n_clusters, n_init=1, batch_size=4096, random_state=self.seed).fit(points)
            # the clusters that have rows, numbered 0..G-1
            self.assignments = np.unique(kmeans.labels_, return_inverse=True)[1].astype(np.int64)
        distances, indices = self.index.neighbours(points, self.n_neighbors)  # (N, k) each
        members = np.split(np.argsort(self.assignments, kind="stable"), np.cumsum(np.bincount(self.assignments))[:-1])
        return [union_context(distances[rows], indices[rows], self.max_rows) for rows in members]

    def route(self, values: np.ndarray) -> list[tuple[int, np.ndarray]]:
        if self.assignments.max(initial=0) == 0:
            return [(0, np.arange(len(values)))]
        _, nearest = self.index.neighbours(self.index.transform(values), 1)  # (m, 1)
        clusters = self.assignments[nearest[:, 0]]  # the cluster of each row's nearest training row
        return [(int(cluster), np.flatnonzero(clusters == cluster)) for cluster in np.unique(clusters)]

    def training_row_contexts(self) -> np.ndarray:
        return self.assignments  # each training row's cluster

    def _describe(self) -> str:
        return f"{len(self.contexts)} local contexts of {np.mean([len(c) for c in self.contexts]):.0f} rows on average"

    def _index(self) -> NeighbourIndex | None:
        """The neighbour index of the encoded training rows (a function of them); None without columns."""
        return NeighbourIndex().fit(self.values) if self.values.shape[1] else None

    def __getstate__(self):
        return {**super().__getstate__(), "index": None}  # rebuilt from the rows on load

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.index = self._index()

    def state_arrays(self) -> dict[str, np.ndarray]:
        return {**super().state_arrays(), "assignments": self.assignments,
                "context_rows": np.concatenate(self.contexts), "context_sizes": np.asarray([len(c) for c in self.contexts])}

    def _restore_contexts(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.assignments = arrays["assignments"]
        self.index = self._index()
        return np.split(arrays["context_rows"], np.cumsum(arrays["context_sizes"])[:-1])
