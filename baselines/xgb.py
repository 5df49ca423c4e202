"""XGBoost baseline (TabZilla defaults: depth 5, eta 0.08, alpha = lambda = 1e-4, hist,
early stopping on the validation fold)."""

from __future__ import annotations

from .base import Method, optional_import
from .settings import XGBoostSettings


class XGBoostMethod(Method):
    settings: XGBoostSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        with optional_import(self.name, self.settings.requires):
            import xgboost
        validation = X_val is not None
        self.model_ = xgboost.XGBClassifier(
            n_estimators=self.settings.n_estimators, max_depth=5, learning_rate=0.08,
            reg_alpha=1e-4, reg_lambda=1e-4, tree_method="hist", random_state=self.seed, n_jobs=1,
            early_stopping_rounds=self.settings.early_stopping_rounds if validation else None,
            objective="binary:logistic" if n_seen == 2 else "multi:softprob",
        )
        self.model_.fit(X, y, eval_set=[(X_val, y_val)] if validation else None, verbose=False)
