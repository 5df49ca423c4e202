"""Every evaluated method by CLI name, the one place a method is named: label, settings, cost,
implementation; its optional package and the weights it takes from the user are declared by its
settings class (:class:`~.settings.Requirement`, :class:`~.settings.UserWeights`) and read here.

Each entry names its implementation as ``"module:Class"`` in this package, imported on first
use, so that `equibench methods` lists the registry without numpy, torch or scikit-learn (and a
method's module loads only when it is used). Nothing of the methods imports this module: the
registry sits above them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidInputError
from .settings import (
    DecisionTreeSettings,
    EnsembleSettings,
    FinetunedPFNSettings,
    KNNSettings,
    LinearModelSettings,
    MethodOptions,
    MLPSettings,
    OfficialEquiTabPFNSettings,
    PFNSettings,
    RandomForestSettings,
    Requirement,
    RtdlMLPSettings,
    RtdlResNetSettings,
    Settings,
    STGSettings,
    TabICLSettings,
    TabNetSettings,
    TabPFNSettings,
    TabPFNv1Settings,
    TabPFNv2Settings,
    UserWeights,
    UserWeightsSettings,
    VIMESettings,
    XGBoostSettings,
)

#: The note of the methods that go through ECOC beyond 10 classes, at the end of their label.
ECOC_NOTE = " (ECOC >10)"


@dataclass(frozen=True)
class MethodSpec:
    name: str  # CLI name, also the ``method`` column of the results
    label: str  # display name in tables and figures
    settings: type[Settings]
    load: Callable[[], type]  # imports the method's class (a ``base.Method``)
    # run time per train row per class (and per ensemble member) in microseconds: medians of
    # the committed results (2-core CPU; TabPFN v1/v2 assumed like TabPFN*); orders cells
    # longest-first on parallel backends
    cost: float

    def implementation(self) -> type:
        """The method's class, its ``name`` this entry's."""
        method = self.load()
        method.name = self.name
        return method

    def given_weights(self, options: MethodOptions) -> str | None:
        """The method's weights: ``options.weights[name]``, else its environment variable
        (``weights.env``) when set and not empty, else None."""
        if self.name in options.weights:
            return options.weights[self.name]
        env = self.weights.env if self.weights else None
        return (os.environ.get(env) if env else None) or None

    @property
    def requires(self) -> Requirement | None:
        """The optional package the method imports (its settings class declares it)."""
        return self.settings.requires

    @property
    def weights(self) -> UserWeights | None:
        """The weights the method takes from the user; None: it takes none."""
        return self.settings.user_weights

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


def _lazy(target: str) -> Callable[[], type]:
    """A ``MethodSpec.load`` of ``"module:Class"``, a module of this package."""
    module, name = target.split(":")
    return lambda: getattr(importlib.import_module(f".{module}", __package__), name)


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec("equitabpfn", "EquiTabPFN", PFNSettings, _lazy("pfn:EquiTabPFNMethod"), cost=170),
        MethodSpec("tabpfn-star", "TabPFN*" + ECOC_NOTE, PFNSettings, _lazy("pfn:TabPFNStarMethod"), cost=50),
        # cost: about the fine-tuning's time limit on a table of 1,000 rows and 10 classes
        MethodSpec("equitabpfn-ft", "EquiTabPFN fine-tuned", FinetunedPFNSettings,
                   _lazy("pfn:FinetunedEquiTabPFNMethod"), cost=10000),
        MethodSpec("tabpfn-star-ft", "TabPFN* fine-tuned", FinetunedPFNSettings,
                   _lazy("pfn:FinetunedTabPFNStarMethod"), cost=10000),
        # cost: EquiTabPFN's scaled by the width and depth (d 512 vs 128, 6 vs 4 layers), not measured
        MethodSpec("equitabpfn-official", "EquiTabPFN (official weights)", OfficialEquiTabPFNSettings,
                   _lazy("equitabpfn_official:OfficialEquiTabPFNMethod"), cost=4000),
        MethodSpec("tabpfn-v1", "TabPFNv1" + ECOC_NOTE, TabPFNv1Settings,
                   _lazy("tabpfn_external:TabPFNv1Method"), cost=50),
        MethodSpec("tabpfn-v2", "TabPFNv2" + ECOC_NOTE, TabPFNv2Settings,
                   _lazy("tabpfn_external:TabPFNv2Method"), cost=50),
        MethodSpec("tabpfn", "TabPFN (your checkpoint)" + ECOC_NOTE, TabPFNSettings,
                   _lazy("tabpfn_external:TabPFNMethod"), cost=50),
        MethodSpec("tabicl", "TabICL", TabICLSettings, _lazy("tabicl:TabICLMethod"),
                   cost=170),  # assumed like EquiTabPFN
        MethodSpec("xgboost", "XGBoost", XGBoostSettings, _lazy("xgb:XGBoostMethod"), cost=100),
        MethodSpec("random-forest", "RandomForest", RandomForestSettings,
                   _lazy("random_forest:RandomForestMethod"), cost=70),
        MethodSpec("knn", "KNN", KNNSettings, _lazy("knn:KNNMethod"), cost=2),
        MethodSpec("decision-tree", "DecisionTree", DecisionTreeSettings,
                   _lazy("decision_tree:DecisionTreeMethod"), cost=3),
        MethodSpec("linear-model", "LinearModel", LinearModelSettings,
                   _lazy("linear_model:LinearModelMethod"), cost=10),
        MethodSpec("mlp", "MLP", MLPSettings, _lazy("mlp:MLPMethod"), cost=480),
        MethodSpec("rtdl-resnet", "rtdl-ResNet", RtdlResNetSettings, _lazy("rtdl_resnet:RtdlResNetMethod"), cost=770),
        MethodSpec("rtdl-mlp", "rtdl-MLP", RtdlMLPSettings, _lazy("rtdl_mlp:RtdlMLPMethod"), cost=490),
        MethodSpec("tabnet", "TabNet", TabNetSettings, _lazy("tabnet:TabNetMethod"), cost=5300),
        MethodSpec("stg", "STG", STGSettings, _lazy("stg:STGMethod"), cost=330),
        MethodSpec("vime", "VIME", VIMESettings, _lazy("vime:VIMEMethod"), cost=2000),
    ]
}

#: Methods that need no neural training beyond the PFNs' forward pass: quick to run everywhere.
FAST_METHODS = ["equitabpfn", "tabpfn-star", "xgboost", "random-forest", "knn", "decision-tree", "linear-model"]


def method_spec(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise InvalidInputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None


def weights_methods() -> list[str]:
    """The methods that take weights from the user, in registry order."""
    return [name for name, spec in METHODS.items() if spec.weights is not None]


def check_weights(weights) -> None:
    """Refuse ``weights`` (``MethodOptions.weights``) unless every name is a method that takes weights."""
    takers = ", ".join(weights_methods())
    for name in weights:
        if name not in METHODS or METHODS[name].weights is None:
            what = "takes no weights" if name in METHODS else "is not a method"
            raise InvalidInputError(f"`weights`: {name!r} {what}; the methods that take weights: {takers}")


def check_weight_paths(weights) -> None:
    """Refuse ``weights`` (``MethodOptions.weights``) that :func:`check_weights` refuses, and those
    that give a method run only on the user's weights a path that is missing or of the wrong kind
    (a file for FILE, a folder for DIR): a typo is bad input, not cells skipped (without weights,
    or with an environment variable's stale path, its cells are skipped). The other methods
    resolve their checkpoint names themselves."""
    check_weights(weights)
    for name, path in weights.items():
        spec = METHODS.get(name)
        if spec is None or not spec.needs_weights:
            continue
        folder = spec.weights.metavar == "DIR"
        if os.path.isdir(path) if folder else os.path.isfile(path):
            continue
        kind = "folder" if folder else "file"
        found = "no such file or folder" if not os.path.exists(path) else f"a {'file' if folder else 'folder'}, not a {kind}"
        raise InvalidInputError(f"`weights={{{name!r}: {str(path)!r}}}`: {found}; give {spec.weights.what}, or leave "
                                f"it out to skip {name}'s cells")
