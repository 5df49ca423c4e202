"""TabPFN*: the same-budget non-equivariant network. Up to 10 classes it runs natively with
``n_estimators`` class-permutation members; beyond, ECOC wraps single-member sub-models and
the ensemble size becomes the ECOC redundancy (1 = the fewest codebook rows that cover
every class)."""

from __future__ import annotations

import warnings

from .base import Method
from .ecoc import ECOCClassifier


class TabPFNStarMethod(Method):
    name = "tabpfn-star"

    def _fit(self, X, y, X_val, y_val, n_seen):
        from equibench.classifier import PretrainingLimitWarning, TabPFNStarClassifier

        members = self.settings.get("n_estimators", 1)
        native = n_seen <= 10

        def network(n_estimators):
            return TabPFNStarClassifier(
                checkpoint=self.settings.get("checkpoint", "default"), n_estimators=n_estimators,
                device=self.settings.get("device", "cpu"), max_train_rows=self.settings.get("max_train_rows", 3000),
                random_state=self.seed,
            )

        if native:
            self.model_ = network(members)
        else:
            self.model_ = ECOCClassifier(network(1), max_classes=10, redundancy=float(members), random_state=self.seed)
        with warnings.catch_warnings():  # the context cap and feature selection are the protocol's, not news
            warnings.simplefilter("ignore", PretrainingLimitWarning)
            self.model_.fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
