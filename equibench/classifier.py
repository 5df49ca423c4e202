"""scikit-learn estimators around the pretrained networks: EquiTabPFNClassifier and
TabPFNStarClassifier. ``fit`` stores the (preprocessed) training context; the network runs
in ``predict_proba``."""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import numbers
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data
from torch import nn

from .baselines.settings import MAX_TRAIN_ROWS
from .devices import resolve_device, resolve_precision
from .frames import as_pandas
from .model import CheckpointError, TooManyClassesError, default_checkpoint, load_checkpoint
from .model.checkpoint import packaged_checkpoint_dir, packaged_checkpoints
from .model.inference import encode_context, forward_chunked, predict_in_context
from .preprocessing import (
    FEATURE_TRANSFORMS,
    MemberTransform,
    TableEncoder,
    balanced_subsample,
    ensemble_members,
)

#: ``fit_mode``: "low_memory" runs the whole network per test batch; "fit_with_cache"
#: runs the train side once at fit and keeps its keys/values for every later predict.
FIT_MODES = ("low_memory", "fit_with_cache")


class PretrainingLimitWarning(UserWarning):
    """The data exceeds what the network takes or was pretrained on, so the classifier
    reduced it (fewer context rows or fewer features)."""


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> nn.Module:
    # mtime and size are part of the key so that a rewritten file is reloaded. The cached
    # module is never handed out: every fitted estimator gets its own copy.
    return load_checkpoint(path)[0]


@functools.lru_cache(maxsize=8)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _load_file(path: Path) -> tuple[nn.Module, str]:
    """A private copy of the model in checkpoint file ``path`` and the file's sha256."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    return copy.deepcopy(_load_cached(*key)), _file_sha256(*key)


def checkpoint_reference(path: Path, sha256: str) -> dict:
    """How a fitted classifier names its checkpoint in a pickle or a fit state: a packaged
    checkpoint by file name (found again in any installation that ships the same file), any
    other file by absolute path; both with the sha256 of the file's bytes."""
    packaged = path.parent == packaged_checkpoint_dir().resolve()
    return {"packaged": path.name, "sha256": sha256} if packaged else {"path": str(path), "sha256": sha256}


def model_from_reference(reference: dict) -> tuple[nn.Module, Path]:
    """Load the model a :func:`checkpoint_reference` names, checking the file's sha256;
    returns it and the file it came from."""
    if "packaged" in reference:
        available = {path.name: path.resolve() for path in packaged_checkpoints()}
        path = available.get(reference["packaged"])
        where = f"packaged checkpoint {reference['packaged']!r}"
        if path is None:
            raise CheckpointError(
                f"the saved classifier uses the {where}, which this installation of equibench does not ship "
                f"(it has {sorted(available) or 'none'}); install the equibench version it was fitted with"
            )
    else:
        path = Path(reference["path"])
        where = f"checkpoint file {reference['path']!r}"
        if not path.is_file():
            raise CheckpointError(
                f"the saved classifier uses the {where}, which does not exist here; pass checkpoint=PATH "
                "to load_from_fit_state with a copy of that file"
            )
    model, sha256 = _load_file(path)
    if sha256 != reference["sha256"]:
        raise CheckpointError(
            f"the {where} has changed since the classifier was fitted (sha256 {sha256[:12]}..., expected "
            f"{reference['sha256'][:12]}...); install the equibench version it was fitted with, or refit"
        )
    return model, path


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
        *,
        checkpoint="default",
        n_estimators: int = 4,
        feature_transforms=FEATURE_TRANSFORMS,
        device: str = "auto",
        inference_precision="auto",
        fit_mode: str = "low_memory",
        softmax_temperature: float = 0.8,
        max_train_rows: int = MAX_TRAIN_ROWS,
        ignore_pretraining_limits: bool = False,
        categorical_features=None,
        batch_size: int = 1024,
        random_state=None,
    ):
        self.checkpoint = checkpoint
        self.n_estimators = n_estimators
        self.feature_transforms = feature_transforms
        self.device = device
        self.inference_precision = inference_precision
        self.fit_mode = fit_mode
        self.softmax_temperature = softmax_temperature
        self.max_train_rows = max_train_rows
        self.ignore_pretraining_limits = ignore_pretraining_limits
        self.categorical_features = categorical_features
        self.batch_size = batch_size
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags

    def get_params(self, deep: bool = True) -> dict:
        """Parameters as scikit-learn reports them; a path-like ``checkpoint`` and a dtype
        ``inference_precision`` are reported as strings, so that the parameters serialise
        (OpenML flows, JSON) and clone to equivalent estimators."""
        params = super().get_params(deep=deep)
        if isinstance(params.get("checkpoint"), os.PathLike):
            params["checkpoint"] = os.fspath(params["checkpoint"])
        if isinstance(params.get("inference_precision"), torch.dtype):
            params["inference_precision"] = str(params["inference_precision"]).removeprefix("torch.")
        return params

    # -- fitting -----------------------------------------------------------------------

    def fit(self, X, y):
        """Store the training context: labels, fitted preprocessing and, per ensemble
        member, the transformed training rows (class-balanced subsample above
        ``max_train_rows`` unless ``ignore_pretraining_limits``)."""
        transforms = self._check_params()
        X = self._check_table(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        _check_labels_present(y)
        check_classification_targets(y)
        categorical = self._categorical_positions(X)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        rng = check_random_state(self.random_state)
        self.model_, self.checkpoint_reference_ = self._load_model()
        self.device_ = resolve_device(self.device)
        resolve_precision(self.inference_precision, self.device_)
        if self._class_shifts and n_classes > self.model_.config.max_classes:
            raise TooManyClassesError.for_counts(self.model_.config.max_classes, n_classes)
        cap = len(y) if self.ignore_pretraining_limits else self.max_train_rows
        rows = balanced_subsample(y_encoded, cap, rng)
        if len(rows) < len(y):
            self._warn_limit(
                f"{len(y)} training rows exceed max_train_rows={self.max_train_rows}: the context is a "
                f"class-balanced subsample of {len(rows)} rows. Raise max_train_rows, or pass "
                "ignore_pretraining_limits=True to use every row (more memory and time)"
            )
        X_rows = X.iloc[rows] if isinstance(X, pd.DataFrame) else X[rows]
        f_max = self.model_.config.f_max
        self.encoder_ = TableEncoder(f_max, random_state=rng.randint(2**31 - 1), categorical_features=categorical)
        values = self.encoder_.fit_transform(X_rows, y_encoded[rows])
        if self.encoder_.n_varying_ > f_max:
            self._warn_limit(
                f"{self.encoder_.n_varying_} non-constant features exceed the {f_max} the network takes: the "
                f"{f_max} with the highest mutual information with y are used. Select features yourself (e.g. "
                "SelectKBest in a Pipeline) to choose which"
            )
        specs = ensemble_members(
            self.n_estimators, values.shape[1], n_classes, rng, self._class_shifts, transforms
        )
        self.transforms_ = [MemberTransform(spec, f_max) for spec in specs]
        self.train_features_ = [t.fit_transform(values) for t in self.transforms_]  # each (N, F_used)
        self.train_labels_ = torch.from_numpy(y_encoded[rows].astype(np.int64))  # (N,)
        if self.fit_mode == "fit_with_cache":
            self.contexts_ = self._encode_contexts()
        return self

    def _warn_limit(self, message: str) -> None:
        if not self.ignore_pretraining_limits:
            warnings.warn(f"{type(self).__name__}: {message}.", PretrainingLimitWarning, stacklevel=3)

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
        if not (isinstance(self.fit_mode, str) and self.fit_mode in FIT_MODES):
            raise ValueError(f"fit_mode must be one of {', '.join(map(repr, FIT_MODES))}, got {self.fit_mode!r}")
        if not isinstance(self.ignore_pretraining_limits, (bool, np.bool_)):
            raise ValueError(f"ignore_pretraining_limits must be True or False, got {self.ignore_pretraining_limits!r}")
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
        X = as_pandas(X)
        if not isinstance(X, pd.DataFrame):
            X = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
        elif X.shape[0] == 0:
            raise ValueError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")
        validate_data(self, X, reset=reset, skip_check_array=True)
        return X

    def _categorical_positions(self, X) -> list[int]:
        """Column positions named by ``categorical_features``: indices, a boolean mask, or
        (for data frames) column names."""
        marked = self.categorical_features
        if marked is None:
            return []
        n_columns = X.shape[1]
        marked = np.asarray(marked).reshape(-1)
        if marked.dtype == bool:
            if len(marked) != n_columns:
                raise ValueError(
                    f"categorical_features as a boolean mask needs one entry per column ({n_columns}), got {len(marked)}"
                )
            return np.flatnonzero(marked).tolist()
        if marked.dtype.kind in "iu":
            bad = [int(i) for i in marked if not 0 <= i < n_columns]
            if bad:
                raise ValueError(f"categorical_features holds column indices {bad} outside 0..{n_columns - 1}")
            return sorted({int(i) for i in marked})
        names = list(X.columns) if isinstance(X, pd.DataFrame) else []
        missing = [name for name in marked.tolist() if name not in names]
        if missing:
            raise ValueError(
                f"categorical_features names columns {missing} that X does not have; give column names of a data "
                "frame, column indices or a boolean mask"
            )
        return sorted({names.index(name) for name in marked.tolist()})

    def _load_model(self) -> tuple[nn.Module, dict | None]:
        """This estimator's own copy of the network, and the reference to its checkpoint
        file (None for a model object)."""
        checkpoint = self.checkpoint
        reference = None
        if isinstance(checkpoint, nn.Module):
            model = copy.deepcopy(checkpoint)
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
            model, sha256 = _load_file(path)
            reference = checkpoint_reference(path, sha256)
        if getattr(model, "arch", None) != self._arch:
            raise ValueError(
                f"{type(self).__name__} needs a {self._arch!r} model but the checkpoint holds "
                f"{getattr(model, 'arch', type(model).__name__)!r}; use the matching classifier"
            )
        return model, reference

    # -- persistence -------------------------------------------------------------------

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("contexts_", None)  # the fit_with_cache cache: rebuilt from the context on first use
        reference = state.get("checkpoint_reference_")
        if reference is not None and "packaged" in reference:
            state["model_"] = None  # loaded again from the packaged file named by the reference
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        reference = state.get("checkpoint_reference_")
        if "model_" in state and state["model_"] is None and reference is not None:
            self.model_ = model_from_reference(reference)[0]

    def save_fit_state(self, path: str | os.PathLike) -> Path:
        """Write the fitted state, without the network's weights, to ``path`` (an ``.npz``
        archive of arrays and a JSON header, loaded without pickle). The checkpoint is
        referenced by name (packaged) or path, with its sha256. Load with
        :meth:`load_from_fit_state`."""
        from .fit_state import save_fit_state

        check_is_fitted(self)
        return save_fit_state(self, path)

    @classmethod
    def load_from_fit_state(cls, path: str | os.PathLike, *, checkpoint=None, device: str | None = None):
        """A fitted classifier from a file written by :meth:`save_fit_state`. The network
        comes from the checkpoint recorded there (checked against its sha256), or from
        ``checkpoint`` when given; ``device`` overrides the saved device."""
        from .fit_state import load_fit_state

        return load_fit_state(cls, path, checkpoint=checkpoint, device=device)

    # -- prediction --------------------------------------------------------------------

    def _network(self) -> tuple[nn.Module, torch.dtype, torch.dtype | None]:
        """The estimator's own network on ``device_`` in the precision's dtype (moved in
        place the first time), the input dtype and the autocast dtype."""
        dtype, autocast = resolve_precision(self.inference_precision, self.device_)
        self.model_ = self.model_.to(self.device_, dtype)
        return self.model_, dtype, autocast

    def _mixed_precision(self, autocast: torch.dtype | None):
        return torch.autocast(self.device_.type, dtype=autocast) if autocast else contextlib.nullcontext()

    def _member_context(self, dtype: torch.dtype, transform, train_features: torch.Tensor):
        """The member's training rows and shifted labels on the device: (1, N, F), (1, N)."""
        n_classes = len(self.classes_)
        x_train = train_features.to(self.device_, dtype).unsqueeze(0)
        y_train = ((self.train_labels_ + transform.spec.class_shift) % n_classes).to(self.device_).unsqueeze(0)
        return x_train, y_train

    def _encode_contexts(self) -> list:
        """fit_with_cache: each member's train side (keys/values per layer), computed once."""
        model, dtype, autocast = self._network()
        contexts = []
        with torch.inference_mode(), self._mixed_precision(autocast):
            for transform, train_features in zip(self.transforms_, self.train_features_):
                x_train, y_train = self._member_context(dtype, transform, train_features)
                contexts.append(encode_context(model, x_train, y_train, len(self.classes_)))
        return contexts

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, columns ordered as ``classes_``; the average over ensemble
        members of softmax(logits / softmax_temperature)."""
        check_is_fitted(self)
        X = self._check_table(X, reset=False)
        values = self.encoder_.transform(X)
        model, dtype, autocast = self._network()
        if self.fit_mode == "fit_with_cache" and getattr(self, "contexts_", None) is None:
            self.contexts_ = self._encode_contexts()  # after unpickling or load_from_fit_state
        contexts = self.contexts_ if self.fit_mode == "fit_with_cache" else [None] * len(self.transforms_)
        total = torch.zeros(values.shape[0], len(self.classes_), dtype=torch.float64)
        for transform, train_features, context in zip(self.transforms_, self.train_features_, contexts):
            test_features = transform.transform(values).to(dtype)  # (M, F)
            train = None if context is not None else self._member_context(dtype, transform, train_features)
            chunks = []
            with torch.inference_mode(), self._mixed_precision(autocast):
                for start in range(0, test_features.shape[0], self.batch_size):
                    x_test = test_features[start : start + self.batch_size].to(self.device_).unsqueeze(0)  # (1, m, F)
                    if context is not None:
                        logits = predict_in_context(model, context, x_test)[0]  # (m, K)
                    else:
                        logits = forward_chunked(model, *train, x_test, len(self.classes_))[0]  # (m, K)
                    chunks.append(torch.softmax(logits.double() / self.softmax_temperature, dim=-1).cpu())
            # (M, K) in the member's shifted class order -> classes_ order
            total += torch.roll(torch.cat(chunks), -transform.spec.class_shift, dims=-1)
        probabilities = (total / len(self.transforms_)).numpy()
        if not np.isfinite(probabilities).all():
            raise FloatingPointError(
                f"the model produced NaN or infinite probabilities for {int((~np.isfinite(probabilities)).any(axis=1).sum())} "
                "rows; its weights are not usable (a diverged training?): use another checkpoint"
            )
        return probabilities

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row (an entry of ``classes_``)."""
        probabilities = self.predict_proba(X)
        return self.classes_[np.argmax(probabilities, axis=1)]


class EquiTabPFNClassifier(_PFNClassifier):
    """EquiTabPFN as a scikit-learn classifier: exactly equivariant to the order of the
    classes, any number of classes, no training at fit time.

    Parameters
    ----------
    checkpoint : "default", path or model, default="default"
        "default" loads the pretrained checkpoint packaged with equibench; a path (str or
        ``pathlib.Path``) loads a file written by ``equibench pretrain``; an ``EquiTabPFN``
        module is copied and used as is.
    n_estimators : int, default=4
        Ensemble members. Member 0 keeps the feature order; the others rotate the feature
        columns by random shifts.
    feature_transforms : sequence of {"none", "quantile"}, default=("none", "quantile")
        Member i first applies ``feature_transforms[i % len(feature_transforms)]``: "none"
        keeps the raw values, "quantile" maps each feature to a normal distribution by its
        train quantiles. A robust z-score follows in both cases.
    device : str, default="auto"
        "auto" uses CUDA when available, else CPU.
    fit_mode : {"low_memory", "fit_with_cache"}, default="low_memory"
        "low_memory" runs the whole network for every test batch, in bounded memory
        (row- and slot-wise chunks; K=1000 classes fit in a few GB). "fit_with_cache" runs
        the train side once at fit and keeps each member's keys/values per layer
        (``contexts_``), so every later predict only runs the test rows: much faster for
        repeated predicts (permutation importance, small batches), at the cost of memory
        of about 2 x n_layers x context rows x (1+K) x d_model numbers per member. Same
        predictions to float tolerance.
    inference_precision : {"auto", "autocast"}, torch dtype or dtype name, default="auto"
        "auto": bfloat16 autocast on CUDA, float32 on CPU; "autocast": bfloat16 autocast
        on any device; a dtype ("float32", "float64", torch.float64, ...): weights and
        inputs in that dtype. float64 makes predictions independent of the batch
        composition to ~1e-15, for exactness checks.
    softmax_temperature : float, default=0.8
        Logits are divided by it before the softmax.
    max_train_rows : int, default=3000
        Above this many training rows, a class-balanced random subsample is the context
        (with a :class:`PretrainingLimitWarning`).
    ignore_pretraining_limits : bool, default=False
        If True, every training row is the context however many there are (memory and
        time grow with it) and no :class:`PretrainingLimitWarning` is issued. The network
        takes at most 100 features either way.
    categorical_features : array-like of int, bool or str, default=None
        Columns to treat as categorical besides the non-numeric ones, for instance
        integer-coded categories in an array: indices, a boolean mask, or column names of
        a data frame. They are ordinal-encoded; categories unseen at fit become missing.
    batch_size : int, default=1024
        Test rows per forward pass; bounds memory (each pass re-reads the context).
    random_state : int, RandomState or None, default=None
        Seeds the subsample, the member shifts and the feature selection.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels seen at fit, sorted; the columns of ``predict_proba``.
    n_features_in_ : int
        Number of columns of X at fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of X at fit, when X was a data frame (pandas, polars or any frame
        narwhals or the ``__dataframe__`` protocol reads) with string column names.
    model_ : torch.nn.Module
        This estimator's own copy of the network (no other estimator shares it).
    checkpoint_reference_ : dict or None
        The checkpoint file as pickles and fit states record it: ``{"packaged": name,
        "sha256": ...}`` or ``{"path": ..., "sha256": ...}``; None for a model object.
    device_ : torch.device
        The device the network runs on.
    encoder_ : TableEncoder
        The fitted column encoding and feature selection.
    transforms_ : list of MemberTransform
        The fitted per-member feature transforms, one per ensemble member.
    train_features_ : list of torch.Tensor of shape (n_context, n_used_features)
        The transformed context rows of each member.
    train_labels_ : torch.Tensor of shape (n_context,)
        The context rows' labels as positions in ``classes_``.
    contexts_ : list of Context
        With ``fit_mode="fit_with_cache"`` only: each member's cached train side.

    Notes
    -----
    Preprocessing, fitted on the training rows: categorical/object/string columns are
    ordinal-encoded; NaN and +-inf reach the model's missing-value indicator; constant
    columns are dropped; above 100 features, the 100 with the highest mutual information
    with y are kept (with a :class:`PretrainingLimitWarning`); robust z-score with
    log-squashing beyond 4 std; rescale by 100 / features used; zero-padding to 100
    inside the model.

    Persistence: ``pickle``/``joblib`` work; a classifier fitted with a packaged
    checkpoint pickles a reference (file name and sha256) instead of the network and
    loads it back from the installation. :meth:`save_fit_state` writes a weights-free
    state without pickle. ``skops.io`` cannot save these classifiers (it refuses the
    torch tensors of the fitted state): use :meth:`save_fit_state` instead.
    """

    _arch = "equitabpfn"
    _class_shifts = False  # the model is equivariant: rotating the classes changes nothing


class TabPFNStarClassifier(_PFNClassifier):
    """TabPFN*, the non-equivariant comparison model, as a scikit-learn classifier.

    Same parameters, attributes and preprocessing as :class:`EquiTabPFNClassifier`;
    ensemble members additionally rotate the class ids (the model is not equivariant, so
    this averages over class orders). At most 10 classes: wrap it in ECOC beyond that.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels seen at fit, sorted; the columns of ``predict_proba``.
    n_features_in_ : int
        Number of columns of X at fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of X at fit, when X was a data frame with string column names.
    model_ : torch.nn.Module
        This estimator's own copy of the network.
    checkpoint_reference_ : dict or None
        The checkpoint file by name or path and sha256; None for a model object.
    device_ : torch.device
        The device the network runs on.
    encoder_, transforms_, train_features_, train_labels_, contexts_
        The fitted preprocessing, context and (fit_with_cache) cache, as for
        :class:`EquiTabPFNClassifier`.
    """

    _arch = "tabpfn-star"
    _class_shifts = True
