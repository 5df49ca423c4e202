"""The one interface every evaluated method implements.

The evaluator hands a method preprocessed float32 arrays and labels coded ``0..K-1`` over
the task's full class list. A fold's train part may miss some classes: :class:`Method`
recodes the classes it sees to ``0..S-1`` for the learner (XGBoost and friends require
contiguous labels), drops validation rows of unseen classes, and places the learner's
``S`` probability columns back into the task's ``K`` columns (zeros for unseen classes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import MethodUnavailableError, MissingDependencyError
from .settings import Requirement, Settings


@contextlib.contextmanager
def optional_import(method: str, requirement: Requirement) -> Iterator[None]:
    """Around the import of ``method``'s optional package ``requirement`` (its settings class
    declares it): a :class:`MissingDependencyError` naming the pip requirement when it is not installed."""
    try:
        yield
    except ImportError as error:
        raise MissingDependencyError(method, error.name or requirement.module, requirement.pip) from None


class Method(ABC):
    """A classifier under evaluation: ``fit`` (with optional validation data) then
    ``predict_proba`` over the task's ``n_classes`` classes.

    ``settings`` are the method's typed settings, the class its ``settings`` annotation names
    (its defaults when None); keyword ``changes`` replace some of their fields."""

    name: str = ""  # set by the registry, where each method is named
    settings: Settings

    def __init__(self, n_classes: int, seed: int = 0, settings: Settings | None = None, **changes):
        settings = settings if settings is not None else self.settings_class()()
        self.n_classes = n_classes
        self.seed = seed
        self.settings = dataclasses.replace(settings, **changes) if changes else settings

    @classmethod
    def settings_class(cls) -> type[Settings]:
        """The settings class the method declares (its ``settings: XSettings`` annotation)."""
        return typing.get_type_hints(cls)["settings"]

    @classmethod
    def prepare(cls, settings: Settings) -> Settings:
        """The settings a run uses, resolved and checked once in the calling process before any
        cell runs (a bad setting is an error, not failed cells); as they are by default."""
        return settings

    def fit(self, X: np.ndarray, y: np.ndarray, X_val: np.ndarray | None = None, y_val: np.ndarray | None = None):
        """X (n, F) float32, y (n,) int in 0..K-1; validation data for early stopping."""
        self.seen_classes_ = np.unique(y)  # (S,)
        if len(self.seen_classes_) < 2:
            return self  # a single class: predicted with probability 1, nothing to learn
        codes = np.searchsorted(self.seen_classes_, y)
        if X_val is not None and y_val is not None:
            known = np.isin(y_val, self.seen_classes_)
            X_val, y_val = X_val[known], np.searchsorted(self.seen_classes_, y_val[known])
            if len(y_val) == 0:
                X_val = y_val = None
        self._fit(X, codes, X_val, y_val, len(self.seen_classes_))
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, K) probabilities in the task's class order; rows sum to 1."""
        proba = np.zeros((len(X), self.n_classes))
        if len(self.seen_classes_) < 2:
            proba[:, self.seen_classes_[0]] = 1.0
            return proba
        seen = np.asarray(self._predict_proba(X), dtype=np.float64)  # (n, S)
        if seen.shape != (len(X), len(self.seen_classes_)):
            raise RuntimeError(
                f"{self.name}: predict_proba returned shape {seen.shape}, expected {(len(X), len(self.seen_classes_))}"
            )
        proba[:, self.seen_classes_] = seen
        return proba / proba.sum(axis=1, keepdims=True)

    def _user_file(self, given: str | None, what: str) -> Path:
        """The weights file the user gave (``given``, a setting); the cell is skipped without it or
        when it is not a file (``what`` names it in the reason)."""
        if not given:
            raise MethodUnavailableError(self.settings.no_weights(self.name))
        path = Path(given)
        if not path.is_file():
            raise MethodUnavailableError(f"no weights: {what} {str(path)!r} is not a file")
        return path

    def provenance(self) -> dict:
        """What a fitted cell records of the external model it ran (package version, weights
        file), beside its settings; none by default."""
        return {}

    def diagnostics(self) -> dict:
        """What the method knows of its last fit and predict beyond the metrics (a cell stores
        it as its ``diagnostics`` mapping of JSON values); none by default."""
        return {}

    @abstractmethod
    def _fit(self, X: np.ndarray, y: np.ndarray, X_val, y_val, n_seen: int) -> None:
        """Fit on labels ``0..n_seen-1`` (all present in y); X_val/y_val may be None."""

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, n_seen) probabilities; by default the fitted learner ``model_``'s."""
        return self.model_.predict_proba(X)
