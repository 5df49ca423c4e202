"""The equivariance of PFN methods run with the user's weights (TabPFN v2, TabICL, the official
EquiTabPFN, ...): each method of the registry, one member, through its own classifier (its
preprocessing included), fitted on each prior dataset twice, on (X, Y) and on (X, sigma(Y)),
with the same seed; the second prediction mapped back by sigma^-1 is compared with the first
by :func:`~equibench.equivariance_metric.compare_log_probs`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..baselines.registry import METHODS, check_weight_paths, method_spec, weights_methods
from ..baselines.settings import MethodOptions, Settings
from ..equivariance_metric import compare_log_probs
from ..errors import InvalidInputError, MissingDependencyError
from ..evaluate.config import method_settings

#: Probabilities are floored here before their log (a method may give a class exactly 0).
PROBABILITY_FLOOR = 1e-12


def weighted_methods(options: MethodOptions) -> tuple[str, ...]:
    """The methods the user gave weights for, in registry order: those of ``options.weights``,
    and those that need weights and have them from their environment variable."""
    return tuple(name for name in weights_methods()
                 if name in options.weights or (METHODS[name].needs_weights and METHODS[name].given_weights(options)))


def prepare_methods(names: tuple[str, ...], options: MethodOptions) -> tuple[dict[str, Settings], dict[str, str]]:
    """Per method that can run here, its one-member settings, checked by the method (a bad or
    missing file in ``options.weights`` is an InvalidInputError before any work); and, per
    method that cannot, why (its package is not installed, or its environment variable names
    no file)."""
    check_weight_paths(options.weights)
    prepared, unavailable = {}, {}
    for name in names:
        spec = method_spec(name)
        path = spec.given_weights(options)
        if path is None:
            raise InvalidInputError(f"{name} has no weights to measure; give them as `weights={{{name!r}: 'PATH'}}`")
        if spec.needs_weights and not Path(path).exists():
            unavailable[name] = f"its weights {path!r} (from ${spec.weights.env}) do not exist"
        elif spec.requires is not None and not spec.requires.installed():
            unavailable[name] = str(MissingDependencyError(name, spec.requires.module, spec.requires.pip))
        else:
            prepared[name] = method_settings(name, options).variants((1,))[0]
    return prepared, unavailable


def method_label(name: str, options: MethodOptions) -> str:
    """A measured method as its rows name it, in the flag's form: ``tabpfn-v2=FOLDER``."""
    return f"{name}={Path(method_spec(name).given_weights(options)).name}"


def _features(x: torch.Tensor) -> np.ndarray:
    """One prior dataset's rows as float32, without the prior's zero padding beyond its features."""
    values = x.numpy().astype(np.float32)
    used = np.flatnonzero((values != 0).any(axis=0))
    return values[:, used] if len(used) else values[:, :1]


def _log_probs(proba: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.log(np.clip(proba, PROBABILITY_FLOOR, None)))


def measure_method(name: str, settings: Settings, x: torch.Tensor, y: torch.Tensor, n_train: int, n_classes: int,
                   sigma: torch.Tensor, seed: int, tie_tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Per dataset (x (D, R, F), y (D, R), rows ``[:n_train]`` train rows), (arg-max change
    fraction, log-probability RMS) of method ``name`` with ``settings``: fitted on Y and on
    sigma(Y) = ``sigma[d][Y]``, the second mapped back."""
    implementation = method_spec(name).implementation()
    fractions, rms = [], []
    for d in range(len(sigma)):
        rows, labels, relabel = _features(x[d]), y[d, :n_train].numpy(), sigma[d].numpy()
        train, test = rows[:n_train], rows[n_train:]
        reference = implementation(n_classes, seed, settings).fit(train, labels).predict_proba(test)
        permuted = implementation(n_classes, seed, settings).fit(train, relabel[labels]).predict_proba(test)
        change, error = compare_log_probs(_log_probs(reference), _log_probs(permuted[:, relabel]), tie_tolerance)
        fractions.append(float(change))
        rms.append(float(error))
    return np.array(fractions), np.array(rms)
