"""What a run is asked to do (:class:`EvaluateConfig`), the settings it resolves for every
method, and the fingerprint of what its cells' numbers depend on."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass

from ..baselines.registry import METHODS, check_weight_paths, method_spec
from ..baselines.settings import MethodOptions, Settings
from ..errors import InvalidInputError
from ..tasks.suites import Suite


@dataclass(frozen=True)
class EvaluateConfig(MethodOptions):
    """A run: the suite, methods, folds, seed and threads; the methods' options (ensemble
    sizes, checkpoints, weights, context cap, device) are :class:`MethodOptions` fields."""

    suite: str  # built-in name or suite file
    methods: tuple[str, ...] = tuple(METHODS)
    folds: tuple[int, ...] | None = None  # None: every fold of each task
    seed: int = 0
    openml_cache: str | None = None  # falls back to OPENML_CACHE_DIR
    threads_per_cell: int = 1  # torch and BLAS threads of every cell, whatever the backend

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", _as_tuple(self.methods, "methods", str))
        object.__setattr__(self, "ensembles", _as_tuple(self.ensembles, "ensembles", numbers.Integral))
        object.__setattr__(self, "contexts", _as_tuple(self.contexts, "contexts", str))
        if self.folds is not None:
            object.__setattr__(self, "folds", _as_tuple(self.folds, "folds", numbers.Integral))
        super().__post_init__()
        check_weight_paths(self.weights)
        if not self.methods:
            raise InvalidInputError("no methods selected; choose `methods` from " + ", ".join(METHODS))
        for name in self.methods:
            method_spec(name)
        if len(set(self.methods)) != len(self.methods):
            raise InvalidInputError(f"`methods` listed more than once: {sorted(m for m in set(self.methods) if self.methods.count(m) > 1)}")
        if self.folds is not None and (not self.folds or min(self.folds) < 0):
            raise InvalidInputError(f"`folds` must be non-negative fold numbers, got {list(self.folds)}")
        if self.threads_per_cell < 1:
            raise InvalidInputError(f"`threads_per_cell` must be at least 1, got {self.threads_per_cell}")

    def resolved_openml_cache(self) -> str | None:
        return self.openml_cache or os.environ.get("OPENML_CACHE_DIR") or None


def _as_tuple(value, name: str, kind: type) -> tuple:
    """``value`` as a tuple of ``kind`` values: one value (``methods="knn"``, ``folds=0``) is a
    tuple of one; anything else than such values is refused, naming ``name``."""
    values = (value,) if isinstance(value, kind) else tuple(value) if isinstance(value, (list, tuple, range)) else None
    if values is None or not all(isinstance(item, kind) and not isinstance(item, bool) for item in values):
        what = "a method name" if kind is str else "an integer"
        raise InvalidInputError(f"`{name}` must be {what} or a list of them, got {value!r}")
    return tuple(int(item) for item in values) if kind is not str else values


def method_settings(name: str, options: MethodOptions) -> Settings:
    """The settings of method ``name`` for ``options``, resolved and checked (see ``Method.prepare``)."""
    spec = method_spec(name)
    return spec.implementation().prepare(spec.settings.from_options(options, spec.given_weights(options)))


def prepared_settings(options: MethodOptions) -> dict[str, Settings]:
    """Every registered method's settings for a run, resolved and checked once: the manifest
    records them all, so that a later run adding a method finds what its cells would be made with."""
    return {name: method_settings(name, options) for name in METHODS}


def run_fingerprint(config: EvaluateConfig, settings: dict[str, Settings], suite: Suite) -> dict:
    """What makes a cell's numbers: the seed, per method the settings the run's options set
    (see ``Settings.fingerprint``) and the threads per cell (the order of floating-point
    reductions), and the content of the suite's table files."""
    threads = {"threads_per_cell": config.threads_per_cell}
    return {"seed": config.seed,
            "methods": {name: {**method.fingerprint(), **threads} for name, method in settings.items()},
            "tables": {spec.task_id: spec.sha256 for spec in suite.files},
            "suite": {"name": suite.name, "tasks": list(suite.task_ids)}}
