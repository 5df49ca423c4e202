"""EquiTabPFN: the pretrained equivariant network; variants differ by ensemble size."""

from __future__ import annotations

from .pfn import PFNMethod
from .settings import EquiTabPFNSettings


class EquiTabPFNMethod(PFNMethod):
    name = "equitabpfn"
    settings: EquiTabPFNSettings
