"""The nearest-neighbour side of local contexts: the training rows in a distance space, their
clusters and each cluster's context, and the routing of a test row to its cluster.

A fitted :class:`NeighbourIndex` holds the training rows in a distance space (the encoded
columns standardised) and a scikit-learn ``NearestNeighbors`` index over them (exact, brute
force). :func:`training_clusters` groups the training rows by k-means into clusters of about
``cluster_size`` rows; a cluster's context is the union of its rows' ``n_neighbors`` nearest
training rows, nearest first, at most ``max_rows``. :func:`clusters_of` routes each test row to
the cluster of its nearest training row (whose own nearest rows are therefore in its context):
a row's context depends on that row alone.
"""

from __future__ import annotations

import numpy as np
from sklearn import config_context
from sklearn.cluster import MiniBatchKMeans
from sklearn.neighbors import NearestNeighbors

#: The neighbour search computes distances in blocks of at most this many MB (scikit-learn's
#: ``working_memory``, 1024 by default), so its memory does not grow with the training rows.
NEIGHBOUR_MEMORY_MB = 128
#: Standardised values are clipped to +-FAR in the distance space (float32 holds them).
FAR = 1e6


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


def training_clusters(index: NeighbourIndex, n_neighbors: int, cluster_size: int, max_rows: int,
                      seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """The training rows clustered by k-means (seeded) into groups of about ``cluster_size`` rows,
    and each cluster's context: the union of its rows' ``n_neighbors`` nearest training rows
    (at most ``max_rows``). Returns each training row's cluster (N,) and the contexts of the
    clusters that have rows."""
    points = index.points_
    n_clusters = -(-len(points) // cluster_size)
    if n_clusters <= 1:
        labels = np.zeros(len(points), dtype=np.int64)
    else:
        labels = MiniBatchKMeans(n_clusters, n_init=1, batch_size=4096, random_state=seed).fit(points).labels_
    _, labels = np.unique(labels, return_inverse=True)  # the clusters that have rows, numbered 0..G-1
    distances, indices = index.neighbours(points, n_neighbors)  # (N, k) each
    order = np.argsort(labels, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(labels))[:-1])
    return labels.astype(np.int64), [union_context(distances[rows], indices[rows], max_rows) for rows in members]


def clusters_of(index: NeighbourIndex, values: np.ndarray, assignments: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The test rows ``values`` (m, F encoded) by the cluster of their nearest training row
    (``assignments``: each training row's cluster): (cluster, its rows) for each cluster that
    serves rows."""
    if assignments.max(initial=0) == 0:
        return [(0, np.arange(len(values)))]
    _, nearest = index.neighbours(index.transform(values), 1)  # (m, 1)
    clusters = assignments[nearest[:, 0]]
    return [(int(cluster), np.flatnonzero(clusters == cluster)) for cluster in np.unique(clusters)]
