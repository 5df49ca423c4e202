"""All evaluated methods by CLI name, imported lazily so a missing optional package only
affects its own method."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .base import Method


@dataclass(frozen=True)
class MethodSpec:
    name: str  # CLI name, also the ``method`` column of the results
    label: str  # display name in tables and figures
    module: str  # file under equibench.baselines
    class_name: str
    ensembles: bool = False  # variants are ensemble sizes ("n1", "n4", ...)

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
        MethodSpec("equitabpfn", "EquiTabPFN", "equitabpfn", "EquiTabPFNMethod", ensembles=True),
        MethodSpec("tabpfn-star", "TabPFN* (ECOC >10)", "tabpfn_star", "TabPFNStarMethod", ensembles=True),
        MethodSpec("tabpfn-v1", "TabPFNv1 (ECOC >10)", "tabpfn_external", "TabPFNv1Method", ensembles=True),
        MethodSpec("tabpfn-v2", "TabPFNv2 (ECOC >10)", "tabpfn_external", "TabPFNv2Method", ensembles=True),
        MethodSpec("xgboost", "XGBoost", "xgb", "XGBoostMethod"),
        MethodSpec("random-forest", "RandomForest", "random_forest", "RandomForestMethod"),
        MethodSpec("knn", "KNN", "knn", "KNNMethod"),
        MethodSpec("decision-tree", "DecisionTree", "decision_tree", "DecisionTreeMethod"),
        MethodSpec("linear-model", "LinearModel", "linear_model", "LinearModelMethod"),
        MethodSpec("mlp", "MLP", "mlp", "MLPMethod"),
        MethodSpec("rtdl-resnet", "rtdl-ResNet", "rtdl_resnet", "RtdlResNetMethod"),
        MethodSpec("rtdl-mlp", "rtdl-MLP", "rtdl_mlp", "RtdlMLPMethod"),
        MethodSpec("tabnet", "TabNet", "tabnet", "TabNetMethod"),
        MethodSpec("stg", "STG", "stg", "STGMethod"),
        MethodSpec("vime", "VIME", "vime", "VIMEMethod"),
    ]
}

#: Methods that need no neural training beyond the PFNs' forward pass: quick to run everywhere.
FAST_METHODS = ["equitabpfn", "tabpfn-star", "xgboost", "random-forest", "knn", "decision-tree", "linear-model"]


def method_spec(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
