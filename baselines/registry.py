"""Every evaluated method by CLI name: label, settings, cost, pip requirement and implementation.

Each entry reaches its implementation through a small function with a plain import: the
edge is static, and deferred so that `equibench methods` lists the registry without numpy,
torch or scikit-learn (and a method's module loads only when it is used). The methods'
interface, :mod:`.base`, looks its methods up here; this module imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidInputError
from .settings import (
    DecisionTreeSettings,
    EnsembleSettings,
    EquiTabPFNSettings,
    ExternalTabPFNSettings,
    KNNSettings,
    LinearModelSettings,
    MLPSettings,
    OfficialEquiTabPFNSettings,
    RandomForestSettings,
    RtdlMLPSettings,
    RtdlResNetSettings,
    Settings,
    STGSettings,
    TabICLSettings,
    TabNetSettings,
    TabPFNStarSettings,
    UserWeightsSettings,
    VIMESettings,
    XGBoostSettings,
)


@dataclass(frozen=True)
class Requirement:
    """An optional package a method imports, and what to install for it."""

    module: str  # import name
    pip: str  # pip requirement

    def installed(self) -> bool:
        """Whether the module imports here and, when ``pip`` pins versions (``tabpfn<2``), the
        installed distribution's version satisfies them (tabpfn 9 does not run TabPFN v1)."""
        import importlib.util
        from importlib import metadata

        if importlib.util.find_spec(self.module) is None:
            return False
        from packaging.requirements import Requirement as PipRequirement

        wanted = PipRequirement(self.pip)
        if not wanted.specifier:
            return True
        try:
            return wanted.specifier.contains(metadata.version(wanted.name), prereleases=True)
        except metadata.PackageNotFoundError:  # importable but not pip-installed: cannot tell, trust the import
            return True


#: The note of the methods that go through ECOC beyond 10 classes, at the end of their label.
ECOC_NOTE = " (ECOC >10)"


@dataclass(frozen=True)
class MethodSpec:
    name: str  # CLI name, also the ``method`` column of the results
    label: str  # display name in tables and figures
    settings: type[Settings]
    implementation: Callable[[], type]  # the method's class (a ``base.Method``); base imports this module
    # run time per train row per class (and per ensemble member) in microseconds: medians of
    # the committed results (2-core CPU; TabPFN v1/v2 assumed like TabPFN*); orders cells
    # longest-first on parallel backends
    cost: float
    requires: Requirement | None = None

    @property
    def plain_label(self) -> str:
        """The label without its note on more than 10 classes ("TabPFN*" for "TabPFN* (ECOC >10)"),
        for figures of data with fewer classes, where the note does not apply."""
        return self.label.removesuffix(ECOC_NOTE)

    @property
    def ensembles(self) -> bool:
        """Whether the method is evaluated at each ensemble size (variants n1, n4, ...)."""
        return issubclass(self.settings, EnsembleSettings)

    @property
    def needs_weights(self) -> bool:
        """Whether the method runs only with weights the user supplies."""
        return issubclass(self.settings, UserWeightsSettings)


def _equitabpfn():
    from .equitabpfn import EquiTabPFNMethod
    return EquiTabPFNMethod


def _equitabpfn_official():
    from .equitabpfn_official import OfficialEquiTabPFNMethod
    return OfficialEquiTabPFNMethod


def _tabpfn_star():
    from .tabpfn_star import TabPFNStarMethod
    return TabPFNStarMethod


def _tabpfn_v1():
    from .tabpfn_external import TabPFNv1Method
    return TabPFNv1Method


def _tabpfn_v2():
    from .tabpfn_external import TabPFNv2Method
    return TabPFNv2Method


def _tabicl():
    from .tabicl import TabICLMethod
    return TabICLMethod


def _xgboost():
    from .xgb import XGBoostMethod
    return XGBoostMethod


def _random_forest():
    from .random_forest import RandomForestMethod
    return RandomForestMethod


def _knn():
    from .knn import KNNMethod
    return KNNMethod


def _decision_tree():
    from .decision_tree import DecisionTreeMethod
    return DecisionTreeMethod


def _linear_model():
    from .linear_model import LinearModelMethod
    return LinearModelMethod


def _mlp():
    from .mlp import MLPMethod
    return MLPMethod


def _rtdl_resnet():
    from .rtdl_resnet import RtdlResNetMethod
    return RtdlResNetMethod


def _rtdl_mlp():
    from .rtdl_mlp import RtdlMLPMethod
    return RtdlMLPMethod


def _tabnet():
    from .tabnet import TabNetMethod
    return TabNetMethod


def _stg():
    from .stg import STGMethod
    return STGMethod


def _vime():
    from .vime import VIMEMethod
    return VIMEMethod


_RTDL = Requirement("rtdl_revisiting_models", "rtdl-revisiting-models")

METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec("equitabpfn", "EquiTabPFN", EquiTabPFNSettings, _equitabpfn, cost=170),
        MethodSpec("tabpfn-star", "TabPFN*" + ECOC_NOTE, TabPFNStarSettings, _tabpfn_star, cost=50),
        # cost: EquiTabPFN's scaled by the width and depth (d 512 vs 128, 6 vs 4 layers), not measured
        MethodSpec("equitabpfn-official", "EquiTabPFN (official weights)", OfficialEquiTabPFNSettings,
                   _equitabpfn_official, cost=4000),
        MethodSpec("tabpfn-v1", "TabPFNv1" + ECOC_NOTE, ExternalTabPFNSettings, _tabpfn_v1, cost=50,
                   requires=Requirement("tabpfn", "tabpfn<2")),
        MethodSpec("tabpfn-v2", "TabPFNv2" + ECOC_NOTE, ExternalTabPFNSettings, _tabpfn_v2, cost=50,
                   requires=Requirement("tabpfn", "tabpfn>=2")),
        MethodSpec("tabicl", "TabICL", TabICLSettings, _tabicl, cost=170,  # assumed like EquiTabPFN
                   requires=Requirement("tabicl", "tabicl")),
        MethodSpec("xgboost", "XGBoost", XGBoostSettings, _xgboost, cost=100,
                   requires=Requirement("xgboost", "xgboost-cpu")),
        MethodSpec("random-forest", "RandomForest", RandomForestSettings, _random_forest, cost=70),
        MethodSpec("knn", "KNN", KNNSettings, _knn, cost=2),
        MethodSpec("decision-tree", "DecisionTree", DecisionTreeSettings, _decision_tree, cost=3),
        MethodSpec("linear-model", "LinearModel", LinearModelSettings, _linear_model, cost=10),
        MethodSpec("mlp", "MLP", MLPSettings, _mlp, cost=480),
        MethodSpec("rtdl-resnet", "rtdl-ResNet", RtdlResNetSettings, _rtdl_resnet, cost=770, requires=_RTDL),
        MethodSpec("rtdl-mlp", "rtdl-MLP", RtdlMLPSettings, _rtdl_mlp, cost=490, requires=_RTDL),
        MethodSpec("tabnet", "TabNet", TabNetSettings, _tabnet, cost=5300,
                   requires=Requirement("pytorch_tabnet", "pytorch-tabnet")),
        MethodSpec("stg", "STG", STGSettings, _stg, cost=330),
        MethodSpec("vime", "VIME", VIMESettings, _vime, cost=2000),
    ]
}

#: Methods that need no neural training beyond the PFNs' forward pass: quick to run everywhere.
FAST_METHODS = ["equitabpfn", "tabpfn-star", "xgboost", "random-forest", "knn", "decision-tree", "linear-model"]


def method_spec(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise InvalidInputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
