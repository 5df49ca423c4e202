"""TabPFN*: the same-budget non-equivariant network. Up to its checkpoint's ``max_classes`` it
runs natively with ``n_estimators`` class-permutation members; beyond, ECOC wraps
single-member sub-models and the ensemble size becomes the ECOC redundancy (1 = the fewest
codebook rows that cover every class): see ``classifier_for``."""

from __future__ import annotations

from .pfn import PFNMethod
from .settings import TabPFNStarSettings


class TabPFNStarMethod(PFNMethod):
    name = "tabpfn-star"
    settings: TabPFNStarSettings
