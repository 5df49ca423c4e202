"""Decision-tree baseline (TabZilla default: max_depth 5)."""

from __future__ import annotations

from sklearn.tree import DecisionTreeClassifier

from .base import Method
from .settings import DecisionTreeSettings


class DecisionTreeMethod(Method):
    settings: DecisionTreeSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = DecisionTreeClassifier(max_depth=self.settings.max_depth, random_state=self.seed)
        self.model_.fit(X, y)
