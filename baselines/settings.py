"""The typed settings of every evaluated method, and the run options they are made from.

A method's settings are a frozen dataclass; the registry names each method's class (one class
may serve several methods: EquiTabPFN and TabPFN*). A run turns its :class:`MethodOptions` into
settings once (``from_options``, given the method's weights), the PFN methods
resolve and check their checkpoint once (``Method.prepare``), and the ensemble methods get one
settings per ensemble size (``variants``). A cell's ``variant`` (the last part of its stored
name) is derived from its settings: ``EnsembleSettings(n_estimators=4).variant == "n4"``.

Only the standard library is imported here: `equibench methods` lists the registry without numpy or torch.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..classifier.context_rules import CONTEXTS, MAX_TRAIN_ROWS
from ..errors import InvalidInputError

#: The neural baselines' training loop (TabZilla protocol).
BATCH_SIZE = 128
MAX_EPOCHS = 500
PATIENCE = 20
_ENSEMBLE_PREFIX = "n"


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


@dataclass(frozen=True)
class UserWeights:
    """The weights a method takes from the user: ``MethodOptions.weights[name]`` (``--weights
    NAME=PATH``), else the environment variable ``env``; its settings' ``from_options`` gets
    them (``registry.MethodSpec.given_weights``)."""

    what: str  # what PATH is, for --help and the reason of cells skipped without it
    metavar: str = "FILE"  # FILE or DIR, in --help and messages
    env: str | None = None


@dataclass(frozen=True, kw_only=True)
class MethodOptions:
    """The run options the methods' settings are made from (see ``from_options``)."""

    ensembles: tuple[int, ...] = (1,)  # ensemble sizes of the PFN methods: one variant each
    # method name -> its weights (a file or folder, see :class:`UserWeights`): the methods of
    # ``registry.weights_methods()`` (``registry.check_weights``); see ``MethodSpec.given_weights``
    weights: dict[str, str] = dataclasses.field(default_factory=dict)
    max_train_rows: int = MAX_TRAIN_ROWS
    device: str = "cpu"  # of the PFN methods
    contexts: tuple[str, ...] = ("auto",)  # context strategies of the PFN methods: one variant each

    def __post_init__(self) -> None:
        if not self.ensembles or min(self.ensembles) < 1:
            raise InvalidInputError(f"ensemble sizes must be positive integers, got {list(self.ensembles)}")
        unknown = [context for context in self.contexts if context not in CONTEXTS]
        repeated = sorted({context for context in self.contexts if self.contexts.count(context) > 1})
        if not self.contexts or unknown:
            got = f"{unknown[0]!r} is not a context strategy" if unknown else "none given"
            raise InvalidInputError(f"`contexts`: {got}; choose from {', '.join(CONTEXTS)} (several: e.g. auto,subsample)")
        if repeated:
            raise InvalidInputError(f"`contexts` lists {', '.join(map(repr, repeated))} more than once; give each once")
        if self.max_train_rows < 1:
            raise InvalidInputError(f"`max_train_rows` must be positive, got {self.max_train_rows}")
        if not isinstance(self.weights, Mapping) or not all(
                isinstance(name, str) and isinstance(path, (str, os.PathLike)) for name, path in self.weights.items()):
            raise InvalidInputError(f"`weights` must map method names to paths, got {self.weights!r}")
        object.__setattr__(self, "weights", {name: os.fspath(path) for name, path in self.weights.items()})


@dataclass(frozen=True)
class Settings:
    """Settings of a method whose run options change nothing: one variant, ``default``.

    The class also declares what the registry lists about its methods: the optional package
    they import (``requires``) and, for methods that take weights from the user, what they
    are (``user_weights``)."""

    requires: ClassVar[Requirement | None] = None
    user_weights: ClassVar[UserWeights | None] = None

    @classmethod
    def no_weights(cls, method: str) -> str:
        """Why a cell of ``method`` was skipped without weights, and how to give them."""
        weights = cls.user_weights
        env = f" or set {weights.env}" if weights.env else ""
        # the parameter, stored in the results (results.csv, REPORT.md); the CLI writes it as its flag
        return f"no weights: pass `weights={{{method!r}: {weights.metavar!r}}}`{env}: {weights.what}"

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> Settings:
        """The settings of a run's ``options``, with the method's ``weights`` (a path) when it takes some."""
        return cls()

    @property
    def variant(self) -> str:
        return "default"

    def variants(self, ensembles: tuple[int, ...]) -> list[Settings]:
        """The settings of each variant a run evaluates (PFN methods: also one per context strategy
        of ``MethodOptions.contexts``, recorded in their settings)."""
        return [self]

    def fingerprint(self) -> dict:
        """What of these settings a run's options set and the numbers depend on (resolved settings)."""
        return {}

    def work(self, n_train: float) -> float:
        """How much a fit on ``n_train`` rows processes, in train rows (orders cells by cost)."""
        return n_train


@dataclass(frozen=True)
class EnsembleSettings(Settings):
    """A method evaluated at several ensemble sizes, one variant each."""

    n_estimators: int = 1

    @property
    def variant(self) -> str:
        return f"{_ENSEMBLE_PREFIX}{self.n_estimators}"

    def variants(self, ensembles: tuple[int, ...]) -> list[Settings]:
        return [dataclasses.replace(self, n_estimators=size) for size in ensembles]

    def work(self, n_train: float) -> float:
        return n_train * self.n_estimators


def ensemble_size(variant: str) -> int | None:
    """The ensemble size a stored variant names (the inverse of ``EnsembleSettings.variant``,
    for readers of results that hold only the name; ``n4-subsample`` is 4); None for other variants."""
    digits = variant.split("-", 1)[0].removeprefix(_ENSEMBLE_PREFIX)
    return int(digits) if variant.startswith(_ENSEMBLE_PREFIX) and digits.isdecimal() else None


@dataclass(frozen=True)
class PFNSettings(EnsembleSettings):
    """EquiTabPFN and TabPFN*: a checkpoint file (``default``: the packaged one, resolved by
    the method's ``prepare``), the context cap and the device."""

    user_weights = UserWeights("a checkpoint file of the method's network, by default the packaged one (`default`)")

    checkpoint: str = "default"
    max_train_rows: int = MAX_TRAIN_ROWS
    device: str = "cpu"
    contexts: tuple[str, ...] = ("auto",)  # the run's strategies; a variant holds one

    @property
    def context(self) -> str:
        """The context strategy of this variant (the first of ``contexts``)."""
        return self.contexts[0]

    @property
    def variant(self) -> str:
        size = f"{_ENSEMBLE_PREFIX}{self.n_estimators}"
        return size if self.context == "auto" else f"{size}-{self.context}"

    def variants(self, ensembles: tuple[int, ...]) -> list[Settings]:
        return [dataclasses.replace(self, n_estimators=size, contexts=(context,))
                for context in self.contexts for size in ensembles]

    def fingerprint(self) -> dict:
        # The classifier's default feature transforms shape the numbers too, its categorical encodings not
        # (TabZilla's preprocessing hands it numeric columns only); the context rules (each variant names one).
        from ..classifier.checkpoints import checkpoint_sha256
        from ..classifier.local_contexts import LOCAL_CLUSTER_SIZE, LOCAL_MAX_ROWS, LOCAL_NEIGHBORS
        from ..preprocessing import CONTEXT_CLASS_FLOOR, FEATURE_TRANSFORMS

        return {"checkpoint_sha256": checkpoint_sha256(self.checkpoint)[:16], "max_train_rows": self.max_train_rows,
                "feature_transforms": list(FEATURE_TRANSFORMS),
                "subsample": {"stratified": True, "class_floor": CONTEXT_CLASS_FLOOR},
                "local": {"neighbors": LOCAL_NEIGHBORS, "cluster_size": LOCAL_CLUSTER_SIZE, "max_rows": LOCAL_MAX_ROWS}}

    def work(self, n_train: float) -> float:
        return min(n_train, self.max_train_rows) * self.n_estimators

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> Settings:
        return cls(checkpoint="default" if weights is None else weights, max_train_rows=options.max_train_rows,
                   device=options.device, contexts=tuple(options.contexts))


@dataclass(frozen=True)
class FinetunedPFNSettings(PFNSettings):
    """EquiTabPFN and TabPFN* fine-tuned on each fold's training rows with the fine-tuned
    classifiers' defaults, which the fingerprint records."""

    def fingerprint(self) -> dict:
        from ..classifier.finetune import fine_tuning_defaults

        return {**super().fingerprint(), "fine_tuning": fine_tuning_defaults()}


class UserWeightsSettings(EnsembleSettings):
    """A pretrained model whose weights only the user supplies (never downloaded), else skipped."""


_TABPFN_ENV = "EQUIBENCH_TABPFN_WEIGHTS"  # TabPFN v1's and v2's: one folder may hold both


@dataclass(frozen=True)
class ExternalTabPFNSettings(UserWeightsSettings):
    """TabPFN through the tabpfn package: the user's weights (None: skipped), a folder for v1/v2
    (each version's own), a checkpoint file of any version for ``tabpfn``."""

    tabpfn_weights: str | None = None
    device: str = "cpu"

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> Settings:
        return cls(tabpfn_weights=weights, device=options.device)

    def fingerprint(self) -> dict:
        return {"tabpfn_weights": self.tabpfn_weights}


@dataclass(frozen=True)
class TabPFNv1Settings(ExternalTabPFNSettings):
    requires = Requirement("tabpfn", "tabpfn<2")
    user_weights = UserWeights("a folder with the TabPFN v1 weights "
                               "(models_diff/prior_diff_real_checkpoint_n_0_epoch_42.cpkt)", "DIR", _TABPFN_ENV)


@dataclass(frozen=True)
class TabPFNv2Settings(ExternalTabPFNSettings):
    requires = Requirement("tabpfn", "tabpfn>=2")
    user_weights = UserWeights("a folder with the TabPFN v2 weights (tabpfn-v2-classifier*.ckpt)", "DIR", _TABPFN_ENV)


@dataclass(frozen=True)
class TabPFNSettings(ExternalTabPFNSettings):
    requires = Requirement("tabpfn", "tabpfn>=2")
    user_weights = UserWeights("a TabPFN classifier checkpoint file of a version the installed tabpfn reads, .ckpt "
                               "or .safetensors (e.g. tabpfn-v2.5-classifier-v2.5_default.ckpt)",
                               env="EQUIBENCH_TABPFN_CHECKPOINT")


@dataclass(frozen=True)
class TabICLSettings(UserWeightsSettings):
    """TabICL: the user's checkpoint file (None: the cells are skipped), its sha256 (set by
    the method's ``prepare``) and the device; ``n_estimators`` is TabICL's ensemble size."""

    requires = Requirement("tabicl", "tabicl")
    user_weights = UserWeights("a TabICL checkpoint file in the tabicl package's format (e.g. "
                               "tabicl-classifier-v2-20260212.ckpt), never downloaded", env="EQUIBENCH_TABICL_CHECKPOINT")

    checkpoint: str | None = None
    checkpoint_sha256: str | None = None
    device: str = "cpu"

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> Settings:
        return cls(checkpoint=weights, device=options.device)

    def fingerprint(self) -> dict:
        """The checkpoint; with one, also its sha256 and the package version that runs it."""
        from importlib import metadata

        if not self.checkpoint:
            return {"tabicl_checkpoint": None}
        try:
            version = metadata.version("tabicl")
        except metadata.PackageNotFoundError:
            version = None
        return {"tabicl_checkpoint": self.checkpoint, "checkpoint_sha256": self.checkpoint_sha256,
                "tabicl_version": version}


@dataclass(frozen=True)
class OfficialEquiTabPFNSettings(UserWeightsSettings):
    """The authors' released EquiTabPFN, converted by ``equibench convert-official``: that file
    (None: the cells are skipped), its sha256 (set by the method's ``prepare``), the context cap
    and the device. Only the one-member variant runs (the official one-member preprocessing)."""

    user_weights = UserWeights("the authors' EquiTabPFN checkpoint as `equibench convert-official` wrote it",
                               env="EQUIBENCH_OFFICIAL_CHECKPOINT")

    checkpoint: str | None = None
    checkpoint_sha256: str | None = None
    max_train_rows: int = MAX_TRAIN_ROWS
    device: str = "cpu"

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> Settings:
        return cls(checkpoint=weights, max_train_rows=options.max_train_rows, device=options.device)

    def fingerprint(self) -> dict:
        sha256 = self.checkpoint_sha256[:16] if self.checkpoint_sha256 else None
        return {"checkpoint_sha256": sha256, "max_train_rows": self.max_train_rows, "preprocessing": "official"}

    def work(self, n_train: float) -> float:
        return min(n_train, self.max_train_rows) * self.n_estimators


# -- the baselines: TabZilla's defaults ------------------------------------------------------

_RTDL = Requirement("rtdl_revisiting_models", "rtdl-revisiting-models")

@dataclass(frozen=True)
class XGBoostSettings(Settings):
    requires = Requirement("xgboost", "xgboost-cpu")

    n_estimators: int = 1000
    early_stopping_rounds: int = 20  # on the validation fold


@dataclass(frozen=True)
class RandomForestSettings(Settings):
    n_estimators: int = 50
    max_depth: int = 5


@dataclass(frozen=True)
class KNNSettings(Settings):
    n_neighbors: int = 9


@dataclass(frozen=True)
class DecisionTreeSettings(Settings):
    max_depth: int = 5


@dataclass(frozen=True)
class LinearModelSettings(Settings):
    max_iter: int = 1000


@dataclass(frozen=True)
class TrainingSettings(Settings):
    """The early-stopped mini-batch training of the neural baselines."""

    lr: float = 1e-3
    batch_size: int = BATCH_SIZE
    max_epochs: int = MAX_EPOCHS
    patience: int = PATIENCE  # epochs without improvement of the validation loss
    device: str = "cpu"


@dataclass(frozen=True)
class MLPSettings(TrainingSettings):
    lr: float = 7e-4
    hidden: tuple[int, ...] = (30, 30, 30)


@dataclass(frozen=True)
class RtdlMLPSettings(TrainingSettings):
    requires = _RTDL

    layers: tuple[int, ...] = (128, 256, 128)
    dropout: float = 0.1


@dataclass(frozen=True)
class RtdlResNetSettings(TrainingSettings):
    requires = _RTDL

    n_blocks: int = 2
    d_block: int = 128
    d_hidden: int = 256
    dropout1: float = 0.25  # hidden
    dropout2: float = 0.1  # residual


@dataclass(frozen=True)
class STGSettings(TrainingSettings):
    lr: float = 0.005
    hidden: tuple[int, ...] = (60, 20)
    lam: float = 0.1  # weight of the gates' regulariser
    sigma: float = 0.5  # gate noise


@dataclass(frozen=True)
class TabNetSettings(TrainingSettings):
    requires = Requirement("pytorch_tabnet", "pytorch-tabnet")

    lr: float = 0.02
    n_d: int = 24
    n_a: int = 24
    n_steps: int = 5
    gamma: float = 1.5
    n_independent: int = 3
    n_shared: int = 3
    momentum: float = 0.015
    mask_type: str = "sparsemax"
    virtual_batch_size: int = 128


@dataclass(frozen=True)
class VIMESettings(TrainingSettings):
    p_m: float = 0.5  # corruption probability
    alpha: float = 3.0  # weight of the feature reconstruction
    beta: float = 3.0  # weight of the consistency loss
    K: int = 5  # corruptions per unlabelled row
    encoder_hidden: int | None = None  # None: the number of features
    predictor_hidden: int = 100
    pretrain_max_epochs: int | None = None  # None: max_epochs
