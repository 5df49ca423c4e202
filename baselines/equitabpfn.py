"""EquiTabPFN: the pretrained equivariant network; variants differ by ensemble size."""

from __future__ import annotations

import warnings

from .base import Method


class EquiTabPFNMethod(Method):
    name = "equitabpfn"

    def _fit(self, X, y, X_val, y_val, n_seen):
        from equibench.classifier import EquiTabPFNClassifier, PretrainingLimitWarning

        self.model_ = EquiTabPFNClassifier(
            checkpoint=self.settings.get("checkpoint", "default"), n_estimators=self.settings.get("n_estimators", 1),
            device=self.settings.get("device", "cpu"), max_train_rows=self.settings.get("max_train_rows", 3000),
            random_state=self.seed,
        )
        with warnings.catch_warnings():  # the context cap and feature selection are the protocol's, not news
            warnings.simplefilter("ignore", PretrainingLimitWarning)
            self.model_.fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
