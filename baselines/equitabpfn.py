"""EquiTabPFN: the pretrained equivariant network; variants differ by ensemble size."""

from __future__ import annotations

from .base import Method


class EquiTabPFNMethod(Method):
    name = "equitabpfn"

    def _fit(self, X, y, X_val, y_val, n_seen):
        from equibench.classifier import EquiTabPFNClassifier

        self.model_ = EquiTabPFNClassifier(
            checkpoint=self.settings.get("checkpoint", "default"), n_estimators=self.settings.get("n_estimators", 1),
            device=self.settings.get("device", "cpu"), max_train_rows=self.settings.get("max_train_rows", 3000),
            random_state=self.seed,
        ).fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
