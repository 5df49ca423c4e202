"""Checks and conversions of what the estimators are given: parameters, labels, and sizes in
messages."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import InvalidParameterError as _SklearnInvalidParameterError
from sklearn.utils._param_validation import StrOptions

from ..errors import InvalidInputError


class InvalidParameterError(InvalidInputError, _SklearnInvalidParameterError):
    """A parameter outside its estimator's ``_parameter_constraints``: scikit-learn's error
    (its message) and equibench's."""


def one_of(names) -> StrOptions:
    """The constraint "one of ``names``", which messages list in their order (a set would not)."""
    return StrOptions(dict.fromkeys(names).keys())


def validate_params(estimator) -> None:
    """Check ``estimator``'s parameters against its ``_parameter_constraints``."""
    try:
        estimator._validate_params()
    except _SklearnInvalidParameterError as error:
        raise InvalidParameterError(str(error)) from None


def choices(name: str, value, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """``value`` (one name or a sequence of names) as a non-empty tuple of ``allowed`` names."""
    chosen = (value,) if isinstance(value, str) else value
    try:
        chosen = tuple(chosen)
    except TypeError:
        chosen = ()
    if not chosen or any(not isinstance(c, str) or c not in allowed for c in chosen):
        raise InvalidInputError(f"{name} must be a non-empty sequence of {', '.join(map(repr, allowed))}, got {value!r}")
    return chosen


def size_text(size: float) -> str:
    """A byte count in GB, or in MB below 0.1 GB (never "0.00 GB")."""
    return f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.3g} MB"


def label_array(y: np.ndarray) -> np.ndarray:
    """Labels of one type: an object array of numbers as numbers; missing labels (None or NaN)
    refused with their rows, and labels that mix kinds (numbers and text, ...), which have no one
    order."""
    missing = pd.isna(y)
    if missing.any():
        rows = np.flatnonzero(missing)
        raise InvalidInputError(
            f"y has {len(rows)} missing labels (None or NaN), e.g. at rows {rows[:5].tolist()}; drop those rows or "
            "give them a class"
        )
    kind = pd.api.types.infer_dtype(y, skipna=True)
    if kind in ("mixed", "mixed-integer"):
        kinds = sorted({type(value).__name__ for value in y})
        raise InvalidInputError(
            f"y mixes labels of several types ({', '.join(kinds)}); make them one type, e.g. y.astype(str)"
        )
    if y.dtype == object and kind in ("integer", "floating", "mixed-integer-float"):
        return y.astype(np.int64 if kind == "integer" else np.float64)
    return y
