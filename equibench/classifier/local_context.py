"""Local contexts for tables past the context cap: each group of nearby test rows gets the
union of its rows' nearest training rows as its context.

A fitted :class:`NeighbourIndex` holds the training rows in a distance space (the encoded
columns, standardised, non-finite values at the column mean) and a scikit-learn
``NearestNeighbors`` index over them (exact, brute force). :func:`plan_groups` groups the test rows by k-means
(about ``group_size`` rows a group) and gives each group its context: its rows' nearest
training rows, nearest first, at most ``max_rows`` of them. The grouping depends only on the
rows predicted together and the seed, so the same rows and seed give the same groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn import config_context
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.metrics import pairwise_distances_argmin
from sklearn.neighbors import NearestNeighbors

# ``context`` (``context_rules.CONTEXTS``, shared with the run options, which take the same names): "auto" =
# "local" above ``max_train_rows`` training rows, "subsample" up to it; "subsample" = one
# context for every test row (a stratified subsample above the cap); "local" = a context per
# group of test rows, from their nearest training rows.
#: The defaults of ``local_neighbors`` (nearest training rows per test row), ``local_group_size``
#: (test rows per group) and ``local_max_rows`` (the most rows of a local context), chosen by
#: the ablation of benchmarks/large_tables.py (docs/BENCHMARKS.md).
LOCAL_NEIGHBORS = 20
LOCAL_GROUP_SIZE = 25
LOCAL_MAX_ROWS = 1000
#: The neighbour search computes distances in blocks of at most this many MB (scikit-learn's
#: ``working_memory``, 1024 by default), so its memory does not grow with the training rows.
NEIGHBOUR_MEMORY_MB = 128


def uses_local_context(context: str, n_train: int, max_train_rows: int, ignore_pretraining_limits: bool = False) -> bool:
    """Whether a classifier with these parameters, fitted on ``n_train`` rows, uses local
    contexts: ``context="local"``, or "auto" above ``max_train_rows`` (unless every row is to
    be the context, ``ignore_pretraining_limits``)."""
    return context == "local" or (context == "auto" and n_train > max_train_rows and not ignore_pretraining_limits)


@dataclass(frozen=True)
class Group:
    """Test rows that share one context."""

    test_rows: np.ndarray  # (m,) positions among the rows predicted together
    context_rows: np.ndarray  # (n,) positions among the training rows, nearest first


class NeighbourIndex:
    """The training rows in a distance space and a nearest-neighbour index over them.

    Each column is standardised by its mean and standard deviation over the training rows
    (columns with no spread by 1); NaN and +-inf, which the classifier passes to the network's
    missing-value indicator, sit at the column mean here. Ordinal codes of categorical columns
    count as numbers, as the classifier's ordinal encoding presents them. Neither the rows in
    the distance space nor the index are pickled: :meth:`restore` rebuilds them from the
    encoded rows (the estimator does so when it is unpickled or loaded from a fit state).
    """

    def fit(self, values: np.ndarray) -> NeighbourIndex:
        # values: (N, F) encoded training rows
        finite = np.isfinite(values)
        clean = np.where(finite, values, 0.0)
        count = np.maximum(finite.sum(axis=0), 1)
        self.mean_ = clean.sum(axis=0) / count  # (F,)
        spread = np.sqrt((np.where(finite, values - self.mean_, 0.0) ** 2).sum(axis=0) / count)
        self.scale_ = np.where(spread > 0, spread, 1.0)  # (F,)
        return self.restore(values)

    def restore(self, values: np.ndarray) -> NeighbourIndex:
        """The training rows ``values`` (N, F encoded) in the distance space and their index."""
        self.points_ = self.transform(values)  # (N, F) float32
        # brute force (BLAS distance blocks): measured faster than scikit-learn's kd-tree (3x on
        # adult) and faiss-cpu's exact flat index on the large suite (docs/BENCHMARKS.md)
        self.index_ = NearestNeighbors(algorithm="brute").fit(self.points_)
        return self

    def transform(self, values: np.ndarray) -> np.ndarray:
        """Rows (n, F) in the distance space, (n, F) float32."""
        scaled = (values - self.mean_) / self.scale_
        return np.where(np.isfinite(scaled), scaled, 0.0).astype(np.float32)

    def neighbours(self, points: np.ndarray, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n_neighbors`` nearest training rows of each point (m, F), nearest first:
        distances (m, k) and training-row positions (m, k)."""
        with config_context(working_memory=NEIGHBOUR_MEMORY_MB):  # distance blocks of at most this size
            return self.index_.kneighbors(points, n_neighbors=min(n_neighbors, len(self.points_)))

    def __getstate__(self):
        return {"mean_": self.mean_, "scale_": self.scale_}


def group_rows(points: np.ndarray, group_size: int, seed: int) -> np.ndarray:
    """A group label per row of ``points`` (m, F): k-means into ceil(m / group_size) groups."""
    n_groups = -(-len(points) // group_size)
    if n_groups <= 1:
        return np.zeros(len(points), dtype=np.int64)
    return KMeans(n_groups, n_init=1, max_iter=100, random_state=seed).fit_predict(points).astype(np.int64)


def union_context(distances: np.ndarray, indices: np.ndarray, max_rows: int) -> np.ndarray:
    """The training rows that are among the nearest of any of a group's rows, nearest first
    (by their best rank among the group's rows, then distance), at most ``max_rows``."""
    # distances, indices: (m, k) -> (n,) with n <= min(max_rows, m * k)
    ranks = np.broadcast_to(np.arange(indices.shape[1]), indices.shape)
    order = np.lexsort((distances.ravel(), ranks.ravel()))
    candidates = indices.ravel()[order]
    _, first = np.unique(candidates, return_index=True)
    return candidates[np.sort(first)][:max_rows]


def plan_groups(index: NeighbourIndex, values: np.ndarray, n_neighbors: int, group_size: int, max_rows: int,
                seed: int) -> list[Group]:
    """The groups of the test rows ``values`` (m, F encoded) and their contexts."""
    points = index.transform(values)
    distances, indices = index.neighbours(points, n_neighbors)
    labels = group_rows(points, group_size, seed)
    groups = []
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        groups.append(Group(rows, union_context(distances[rows], indices[rows], max_rows)))
    return groups


def cluster_contexts(index: NeighbourIndex, n_neighbors: int, cluster_size: int, max_rows: int,
                     seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Contexts fixed at fit (``fit_mode="fit_with_cache"``): the training rows clustered by
    k-means into groups of about ``cluster_size`` rows, each cluster's context the union of its
    rows' nearest training rows (at most ``max_rows``). Returns the centroids (G, F) and the
    contexts; a test row is then served by the context of its nearest centroid."""
    points = index.points_
    n_clusters = -(-len(points) // cluster_size)
    if n_clusters <= 1:
        labels, centroids = np.zeros(len(points), dtype=np.int64), points.mean(axis=0, keepdims=True)
    else:
        kmeans = MiniBatchKMeans(n_clusters, n_init=1, batch_size=4096, random_state=seed).fit(points)
        labels, centroids = kmeans.labels_, kmeans.cluster_centers_.astype(np.float32)
    contexts = []
    for cluster in range(len(centroids)):
        members = np.flatnonzero(labels == cluster)
        if len(members) == 0:  # an empty cluster: its centroid's own neighbours
            distances, indices = index.neighbours(centroids[cluster : cluster + 1], n_neighbors)
        else:
            distances, indices = index.neighbours(points[members], n_neighbors)
        contexts.append(union_context(distances, indices, max_rows))
    return centroids, contexts


def route_to_clusters(index: NeighbourIndex, values: np.ndarray, centroids: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The test rows ``values`` (m, F encoded) by nearest centroid: (cluster, its rows) for each
    cluster that serves rows."""
    nearest = pairwise_distances_argmin(index.transform(values), centroids)
    return [(int(cluster), np.flatnonzero(nearest == cluster)) for cluster in np.unique(nearest)]
