"""All evaluated methods by CLI name, imported lazily so a missing optional package only
affects its own method."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the listing (`equibench methods`) must not import numpy
    from .base import Method


@dataclass(frozen=True)
class MethodSpec:
    name: str  # CLI name, also the ``method`` column of the results
    label: str  # display name in tables and figures
    module: str  # file under equibench.baselines
    class_name: str
    ensembles: bool = False  # variants are ensemble sizes ("n1", "n4", ...)
    # run time per train row per class (and per ensemble member) in microseconds: medians of
    # the committed results (2-core CPU; TabPFN v1/v2 assumed like TabPFN*); orders cells
    # longest-first on parallel backends
    cost: float = 100.0

    def variants(self, ensembles: list[int]) -> list[str]:
        return [f"n{m}" for m in ensembles] if self.ensembles else ["default"]

    def create(self, variant: str, n_classes: int, seed: int, **settings) -> Method:
        cls = getattr(importlib.import_module(f".{self.module}", __package__), self.class_name)
        if self.ensembles:
            settings = {**settings, "n_estimators": int(variant.removeprefix("n"))}
        return cls(n_classes=n_classes, seed=seed, **settings)


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec("equitabpfn", "EquiTabPFN", "equitabpfn", "EquiTabPFNMethod", ensembles=True, cost=170),
        MethodSpec("tabpfn-star", "TabPFN* (ECOC >10)", "tabpfn_star", "TabPFNStarMethod", ensembles=True, cost=50),
        MethodSpec("tabpfn-v1", "TabPFNv1 (ECOC >10)", "tabpfn_external", "TabPFNv1Method", ensembles=True, cost=50),
        MethodSpec("tabpfn-v2", "TabPFNv2 (ECOC >10)", "tabpfn_external", "TabPFNv2Method", ensembles=True, cost=50),
        MethodSpec("xgboost", "XGBoost", "xgb", "XGBoostMethod", cost=100),
        MethodSpec("random-forest", "RandomForest", "random_forest", "RandomForestMethod", cost=70),
        MethodSpec("knn", "KNN", "knn", "KNNMethod", cost=2),
        MethodSpec("decision-tree", "DecisionTree", "decision_tree", "DecisionTreeMethod", cost=3),
        MethodSpec("linear-model", "LinearModel", "linear_model", "LinearModelMethod", cost=10),
        MethodSpec("mlp", "MLP", "mlp", "MLPMethod", cost=480),
        MethodSpec("rtdl-resnet", "rtdl-ResNet", "rtdl_resnet", "RtdlResNetMethod", cost=770),
        MethodSpec("rtdl-mlp", "rtdl-MLP", "rtdl_mlp", "RtdlMLPMethod", cost=490),
        MethodSpec("tabnet", "TabNet", "tabnet", "TabNetMethod", cost=5300),
        MethodSpec("stg", "STG", "stg", "STGMethod", cost=330),
        MethodSpec("vime", "VIME", "vime", "VIMEMethod", cost=2000),
    ]
}

#: Methods that need no neural training beyond the PFNs' forward pass: quick to run everywhere.
FAST_METHODS = ["equitabpfn", "tabpfn-star", "xgboost", "random-forest", "knn", "decision-tree", "linear-model"]


def method_spec(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
