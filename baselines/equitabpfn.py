"""EquiTabPFN: the pretrained equivariant network; variants differ by ensemble size."""

from __future__ import annotations

from ..classifier import EquiTabPFNClassifier
from .pfn import PFNMethod


class EquiTabPFNMethod(PFNMethod):
    name = "equitabpfn"

    def classifier(self, n_estimators: int) -> EquiTabPFNClassifier:
        return EquiTabPFNClassifier(n_estimators=n_estimators, **self._network_settings())
