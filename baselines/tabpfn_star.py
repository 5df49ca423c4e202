"""TabPFN*: the same-budget non-equivariant network. Up to 10 classes it runs natively with
``n_estimators`` class-permutation members; beyond, ECOC wraps single-member sub-models and
the ensemble size becomes the ECOC redundancy (1 = the fewest codebook rows that cover
every class)."""

from __future__ import annotations

from ..classifier import TabPFNStarClassifier
from .ecoc import ECOCClassifier
from .pfn import PFNMethod


class TabPFNStarMethod(PFNMethod):
    name = "tabpfn-star"

    def classifier(self, n_estimators: int) -> TabPFNStarClassifier:
        return TabPFNStarClassifier(n_estimators=n_estimators, **self._network_settings())

    def _model(self, n_seen: int):
        members = self.settings.n_estimators
        if n_seen <= 10:
            return self.classifier(members)
        return ECOCClassifier(self.classifier(1), max_classes=10, redundancy=float(members), random_state=self.seed)
