"""Random-forest baseline (TabZilla default: 50 trees of max_depth 5)."""

from __future__ import annotations

from sklearn.ensemble import RandomForestClassifier

from .base import Method
from .settings import RandomForestSettings


class RandomForestMethod(Method):
    settings: RandomForestSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = RandomForestClassifier(
            n_estimators=self.settings.n_estimators, max_depth=self.settings.max_depth,
            random_state=self.seed, n_jobs=1,
        ).fit(X, y)
