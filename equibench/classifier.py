"""scikit-learn estimators around the pretrained networks: EquiTabPFNClassifier and
TabPFNStarClassifier. ``fit`` stores the (preprocessed) training context; the network runs
in ``predict_proba``."""

from __future__ import annotations

import functools
import numbers
import os
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data
from torch import nn

from .model import CheckpointError, TooManyClassesError, default_checkpoint, load_checkpoint
from .preprocessing import (
    FEATURE_TRANSFORMS,
    MemberTransform,
    TableEncoder,
    balanced_subsample,
    ensemble_members,
)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> nn.Module:
    # mtime and size are part of the key so that a rewritten file is reloaded.
    return load_checkpoint(path)[0]


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when present, else CPU; anything else goes to torch.device."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available; use device='cpu'")
    return resolved


def _check_labels_present(y: np.ndarray) -> None:
    """Refuse missing labels (None or NaN) with the rows that have them."""
    missing = pd.isna(y)
    if missing.any():
        rows = np.flatnonzero(missing)
        raise ValueError(
            f"y has {len(rows)} missing labels (None or NaN), e.g. at rows {rows[:5].tolist()}; drop those rows or "
            "give them a class"
        )


class _PFNClassifier(ClassifierMixin, BaseEstimator):
    """Shared implementation; subclasses fix the architecture."""

    _arch: str = ""
    _class_shifts: bool = False

    def __init__(
        self,
        checkpoint="default",
        n_estimators: int = 4,
        feature_transforms=FEATURE_TRANSFORMS,
        device: str = "auto",
        softmax_temperature: float = 0.8,
        max_train_rows: int = 3000,
        batch_size: int = 1024,
        random_state=None,
    ):
        self.checkpoint = checkpoint
        self.n_estimators = n_estimators
        self.feature_transforms = feature_transforms
        self.device = device
        self.softmax_temperature = softmax_temperature
        self.max_train_rows = max_train_rows
        self.batch_size = batch_size
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    # -- fitting -----------------------------------------------------------------------

    def fit(self, X, y):
        """Store the training context: labels, fitted preprocessing and, per ensemble
        member, the transformed training rows (class-balanced subsample above
        ``max_train_rows``)."""
        transforms = self._check_params()
        X = self._check_table(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        _check_labels_present(y)
        check_classification_targets(y)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        rng = check_random_state(self.random_state)
        self.model_ = self._load_model()
        self.device_ = resolve_device(self.device)
        if self._class_shifts and n_classes > self.model_.config.max_classes:
            raise TooManyClassesError.for_counts(self.model_.config.max_classes, n_classes)
        rows = balanced_subsample(y_encoded, self.max_train_rows, rng)
        X_rows = X.iloc[rows] if isinstance(X, pd.DataFrame) else X[rows]
        self.encoder_ = TableEncoder(self.model_.config.f_max, random_state=rng.randint(2**31 - 1))
        values = self.encoder_.fit_transform(X_rows, y_encoded[rows])
        specs = ensemble_members(
            self.n_estimators, values.shape[1], n_classes, rng, self._class_shifts, transforms
        )
        self.transforms_ = [MemberTransform(spec, self.model_.config.f_max) for spec in specs]
        self.train_features_ = [t.fit_transform(values) for t in self.transforms_]  # each (N, F_used)
        self.train_labels_ = torch.from_numpy(y_encoded[rows].astype(np.int64))  # (N,)
        return self

    def _check_params(self) -> tuple[str, ...]:
        """Validate the parameters; returns the feature transforms as a tuple."""

        def positive_int(name):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")

        for name in ("n_estimators", "max_train_rows", "batch_size"):
            positive_int(name)
        temperature = self.softmax_temperature
        if not isinstance(temperature, numbers.Real) or not temperature > 0:
            raise ValueError(f"softmax_temperature must be a positive number, got {temperature!r}")
        transforms = self.feature_transforms
        if isinstance(transforms, str):
            transforms = (transforms,)
        try:
            transforms = tuple(transforms)
        except TypeError:
            transforms = ()
        if not transforms or any(t not in FEATURE_TRANSFORMS for t in transforms):
            raise ValueError(
                f"feature_transforms must be a non-empty sequence of {', '.join(map(repr, FEATURE_TRANSFORMS))}, "
                f"got {self.feature_transforms!r}"
            )
        return transforms

    def _check_table(self, X, reset: bool):
        if not isinstance(X, pd.DataFrame):
            X = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
        elif X.shape[0] == 0:
            raise ValueError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")
        validate_data(self, X, reset=reset, skip_check_array=True)
        return X

    def _load_model(self) -> nn.Module:
        checkpoint = self.checkpoint
        if isinstance(checkpoint, nn.Module):
            model = checkpoint
        else:
            if isinstance(checkpoint, str) and checkpoint == "default":
                checkpoint = default_checkpoint(self._arch)
            if isinstance(checkpoint, str) and not checkpoint.strip():
                raise CheckpointError("checkpoint is an empty string; pass 'default' or the path of a checkpoint file")
            if not isinstance(checkpoint, (str, os.PathLike)):
                raise ValueError(
                    f"checkpoint must be 'default', a file path or a model object, got {type(checkpoint).__name__}"
                )
            path = Path(checkpoint).resolve()
            if path.is_dir():
                raise CheckpointError(
                    f"checkpoint {str(path)!r} is a folder, not a file; pass the checkpoint file inside it (a "
                    "pretraining output folder holds model.pt)"
                )
            if not path.is_file():
                raise CheckpointError(
                    f"checkpoint file {str(path)!r} does not exist; pass the path of a file written by "
                    "`equibench pretrain`, or checkpoint='default' for the packaged one"
                )
            stat = path.stat()
            model = _load_cached(str(path), stat.st_mtime_ns, stat.st_size)
        if getattr(model, "arch", None) != self._arch:
            raise ValueError(
                f"{type(self).__name__} needs a {self._arch!r} model but the checkpoint holds "
                f"{getattr(model, 'arch', type(model).__name__)!r}; use the matching classifier"
            )
        return model

    # -- prediction --------------------------------------------------------------------

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, columns ordered as ``classes_``; the average over ensemble
        members of softmax(logits / softmax_temperature)."""
        check_is_fitted(self)
        X = self._check_table(X, reset=False)
        values = self.encoder_.transform(X)
        model = self.model_.to(self.device_)
        total = torch.zeros(values.shape[0], len(self.classes_), dtype=torch.float64)
        for transform, train_features in zip(self.transforms_, self.train_features_):
            test_features = transform.transform(values)
            total += self._member_proba(model, transform.spec.class_shift, train_features, test_features)
        probabilities = (total / len(self.transforms_)).numpy()
        if not np.isfinite(probabilities).all():
            raise FloatingPointError(
                f"the model produced NaN or infinite probabilities for {int((~np.isfinite(probabilities)).any(axis=1).sum())} "
                "rows; its weights are not usable (a diverged training?): use another checkpoint"
            )
        return probabilities

    def _member_proba(
        self, model: nn.Module, class_shift: int, train_features: torch.Tensor, test_features: torch.Tensor
    ) -> torch.Tensor:
        # train_features: (N, F), test_features: (M, F) -> (M, K)
        n_classes = len(self.classes_)
        x_train = train_features.to(self.device_).unsqueeze(0)  # (1, N, F)
        y_train = ((self.train_labels_ + class_shift) % n_classes).to(self.device_).unsqueeze(0)  # (1, N)
        chunks = []
        with torch.inference_mode():
            for start in range(0, test_features.shape[0], self.batch_size):
                x_test = test_features[start : start + self.batch_size].to(self.device_).unsqueeze(0)
                logits = model(x_train, y_train, x_test, n_classes)[0]  # (m, K)
                chunks.append(torch.softmax(logits.double() / self.softmax_temperature, dim=-1).cpu())
        probabilities = torch.cat(chunks)  # (M, K) in shifted class order
        return torch.roll(probabilities, -class_shift, dims=-1)  # back to classes_ order

    def predict(self, X) -> np.ndarray:
        probabilities = self.predict_proba(X)
        return self.classes_[np.argmax(probabilities, axis=1)]


class EquiTabPFNClassifier(_PFNClassifier):
    """EquiTabPFN as a scikit-learn classifier: exactly equivariant to the order of the
    classes, any number of classes, no training at fit time.

    Parameters
    ----------
    checkpoint : "default", path or model, default="default"
        "default" loads the pretrained checkpoint packaged with equibench; a path loads a
        file written by ``equibench pretrain``; an ``EquiTabPFN`` module is used as is.
    n_estimators : int, default=4
        Ensemble members. Member 0 keeps the feature order; the others rotate the feature
        columns by random shifts.
    feature_transforms : sequence of {"none", "quantile"}, default=("none", "quantile")
        Member i first applies ``feature_transforms[i % len(feature_transforms)]``: "none"
        keeps the raw values, "quantile" maps each feature to a normal distribution by its
        train quantiles. A robust z-score follows in both cases.
    device : str, default="auto"
        "auto" uses CUDA when available, else CPU.
    softmax_temperature : float, default=0.8
        Logits are divided by it before the softmax.
    max_train_rows : int, default=3000
        Above this many training rows, a class-balanced random subsample is the context.
    batch_size : int, default=1024
        Test rows per forward pass; bounds memory (each pass re-reads the context).
    random_state : int, RandomState or None
        Seeds the subsample, the member shifts and the feature selection.

    Preprocessing, fitted on the training rows: categorical/object/string columns are
    ordinal-encoded; NaN and +-inf reach the model's missing-value indicator; constant
    columns are dropped; above 100 features, the 100 with the highest mutual information
    with y are kept; robust z-score with log-squashing beyond 4 std; rescale by
    100 / features used; zero-padding to 100 inside the model.
    """

    _arch = "equitabpfn"
    _class_shifts = False  # the model is equivariant: rotating the classes changes nothing


class TabPFNStarClassifier(_PFNClassifier):
    """TabPFN*, the non-equivariant comparison model, as a scikit-learn classifier.

    Same parameters and preprocessing as :class:`EquiTabPFNClassifier`; ensemble members
    additionally rotate the class ids (the model is not equivariant, so this averages
    over class orders). At most 10 classes: wrap it in ECOC beyond that.
    """

    _arch = "tabpfn-star"
    _class_shifts = True
