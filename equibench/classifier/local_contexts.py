"""Local contexts, for tables past the context cap: the training rows clustered at fit, each
cluster's context the union of its rows' nearest training rows, each test row served by the
context of the cluster of its nearest training row (see :mod:`.neighbours`).

A context holds only some of the classes. EquiTabPFN runs on those classes alone and gives the
others probability 0: by its equivariance this is exactly the network on the local rows with
their classes numbered 0..k-1. TabPFN* does the same up to its class limit and uses
error-correcting output codes within a context that holds more classes.
"""

from __future__ import annotations

import numpy as np

from ..preprocessing import stratified_subsample
from .contexts import ContextStrategy
from .neighbours import NeighbourIndex, clusters_of, training_clusters

#: The defaults of ``local_neighbors`` (nearest training rows each training row brings to its
#: cluster's context), ``local_cluster_size`` (training rows per cluster) and ``local_max_rows``
#: (the most rows of a local context), chosen by the ablation of benchmarks/large_tables.py (docs/BENCHMARKS.md).
LOCAL_NEIGHBORS = 20
LOCAL_CLUSTER_SIZE = 125
LOCAL_MAX_ROWS = 500


def uses_local_context(context: str, n_train: int, max_train_rows: int, ignore_pretraining_limits: bool = False) -> bool:
    """Whether a classifier with these parameters, fitted on ``n_train`` rows, uses local
    contexts: ``context="local"``, or "auto" above ``max_train_rows`` (unless every row is to
    be the context, ``ignore_pretraining_limits``)."""
    return context == "local" or (context == "auto" and n_train > max_train_rows and not ignore_pretraining_limits)


class LocalContexts(ContextStrategy):
    """One context per cluster of about ``cluster_size`` training rows: the union of its rows'
    ``n_neighbors`` nearest training rows, nearest first, at most ``max_rows``."""

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
        self.assignments, contexts = training_clusters(self.index, self.n_neighbors, self.cluster_size, self.max_rows,
                                                       self.seed)
        return contexts

    def route(self, values: np.ndarray) -> list[tuple[int, np.ndarray]]:
        return clusters_of(self.index, values, self.assignments)

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
