"""Linear baseline: multinomial logistic regression with scikit-learn's defaults."""

from __future__ import annotations

import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from .base import Method
from .settings import LinearModelSettings


class LinearModelMethod(Method):
    settings: LinearModelSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = LogisticRegression(max_iter=self.settings.max_iter, random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model_.fit(X, y)
