"""KNN baseline (TabZilla default: 9 neighbours)."""

from __future__ import annotations

from sklearn.neighbors import KNeighborsClassifier

from .base import Method
from .settings import KNNSettings


class KNNMethod(Method):
    settings: KNNSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = KNeighborsClassifier(n_neighbors=min(self.settings.n_neighbors, len(X))).fit(X, y)
