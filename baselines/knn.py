"""KNN baseline (TabZilla default: 9 neighbours)."""

from __future__ import annotations

from sklearn.neighbors import KNeighborsClassifier

from .base import Method


class KNNMethod(Method):
    name = "knn"

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = KNeighborsClassifier(n_neighbors=min(self.settings.get("n_neighbors", 9), len(X))).fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
