"""The shared estimator behind EquiTabPFNClassifier and TabPFNStarClassifier: parameters,
their constraints, ``fit`` (which stores the preprocessed training context) and persistence."""

from __future__ import annotations

import os
import warnings
from numbers import Integral, Real
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_array, check_random_state, column_or_1d
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data

from ..devices import PRECISIONS, resolve_device, resolve_precision
from ..errors import InvalidInputError, TooManyClassesError
from ..frames import as_pandas
from ..preprocessing import CATEGORICAL_ENCODINGS, FEATURE_TRANSFORMS, TableEncoder, ensemble_members
from .checkpoints import load_model, model_from_reference
from .context_rules import CONTEXTS, MAX_TRAIN_ROWS
from .contexts import ContextStrategy, SharedContext
from .fit_state import load_fit_state, save_fit_state
from .inputs import choices, label_array, one_of, size_text, validate_params
from .local_contexts import LOCAL_CLUSTER_SIZE, LOCAL_MAX_ROWS, LOCAL_NEIGHBORS, LocalContexts, uses_local_context
from .network_runs import CACHE_PRECISIONS, NetworkRunner
from .official_preprocessing import OFFICIAL_MEMBER

#: ``fit_mode``: "low_memory" runs the whole network per test batch; "fit_with_cache" keeps
#: each context's keys/values once computed, for every later predict (the same predictions);
#: "fit_preprocessors" is TabPFN's name for what "low_memory" does.
FitMode = Literal["low_memory", "fit_with_cache", "fit_preprocessors"]

#: The default ``random_state``: a fixed seed, so that two default fits agree (as TabPFN's
#: default 0 and TabICL's 42 do), unlike scikit-learn's None; None still draws fresh randomness.
DEFAULT_RANDOM_STATE = 0

#: Why ``sample_weight`` is refused (scikit-learn's AdaBoost passes one).
_NO_SAMPLE_WEIGHT = (
    "sample_weight is not supported: the network conditions on the training rows in its context and has no loss "
    "to weight; resample the rows in proportion to the weights instead (e.g. the rows "
    "numpy.random.default_rng(0).choice(len(X), len(X), p=w / w.sum()))"
)


#: ``preprocessing``: equibench's ensemble preprocessing, or the authors' one-member one
#: (:mod:`.official_preprocessing`; for the official checkpoint, docs/OFFICIAL_CHECKPOINT.md).
Preprocessing = Literal["equibench", "official"]

_POSITIVE_INT = [Interval(Integral, 1, None, closed="left")]
_POSITIVE_REAL = Interval(Real, 0, None, closed="neither")


class PretrainingLimitWarning(UserWarning):
    """The data exceeds what the network takes or was pretrained on, so the classifier
    reduced it (fewer context rows or fewer features)."""


class PFNClassifier(ClassifierMixin, BaseEstimator):
    """Shared implementation; subclasses fix the architecture."""

    _arch: str = ""
    _class_shifts: bool = False
    #: past the network's class limit, decode output codes within the one shared context (else refused)
    _codes_in_context: bool = False
    #: Checked at the start of fit; feature_transforms and categorical_encodings (a name or
    #: names) by :func:`.inputs.choices`, the official preprocessing's n_estimators by fit.
    _parameter_constraints: dict = {
        "checkpoint": [str, os.PathLike, torch.nn.Module], "device": [str, torch.device],
        "feature_transforms": "no_validation", "categorical_encodings": "no_validation",
        "inference_precision": [one_of(PRECISIONS), torch.dtype],
        "fit_mode": [one_of(get_args(FitMode))], "softmax_temperature": [_POSITIVE_REAL],
        "ignore_pretraining_limits": ["boolean"], "categorical_features": ["array-like", None],
        "random_state": ["random_state"], "cache_precision": [one_of(CACHE_PRECISIONS)],
        "cache_memory_limit_gb": [_POSITIVE_REAL, None], "preprocessing": [one_of(get_args(Preprocessing))],
        "context": [one_of(CONTEXTS)],
        **dict.fromkeys(("n_estimators", "max_train_rows", "batch_size", "local_neighbors", "local_cluster_size",
                         "local_max_rows"), _POSITIVE_INT),
    }

    def __init__(
        self,
        *,
        checkpoint: str | os.PathLike | torch.nn.Module = "default",
        n_estimators: int = 4,
        feature_transforms=FEATURE_TRANSFORMS,
        categorical_encodings=CATEGORICAL_ENCODINGS,
        device: str | torch.device = "auto",
        inference_precision: Literal["auto", "autocast", "float32", "float64", "bfloat16", "float16"] | torch.dtype = "auto",
        fit_mode: FitMode = "low_memory",
        softmax_temperature: float = 0.8,
        max_train_rows: int = MAX_TRAIN_ROWS,
        ignore_pretraining_limits: bool = False,
        categorical_features=None,
        batch_size: int = 1024,
        random_state=DEFAULT_RANDOM_STATE,
        cache_precision: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
        cache_memory_limit_gb: float | None = 4.0,
        preprocessing: Preprocessing = "equibench",
        context: Literal["auto", "subsample", "local"] = "auto",
        local_neighbors: int = LOCAL_NEIGHBORS,
        local_cluster_size: int = LOCAL_CLUSTER_SIZE,
        local_max_rows: int = LOCAL_MAX_ROWS,
    ):
        self.checkpoint = checkpoint
        self.n_estimators = n_estimators
        self.feature_transforms = feature_transforms
        self.categorical_encodings = categorical_encodings
        self.device = device
        self.inference_precision = inference_precision
        self.fit_mode = fit_mode
        self.softmax_temperature = softmax_temperature
        self.max_train_rows = max_train_rows
        self.ignore_pretraining_limits = ignore_pretraining_limits
        self.categorical_features = categorical_features
        self.batch_size = batch_size
        self.random_state = random_state
        self.cache_precision = cache_precision
        self.cache_memory_limit_gb = cache_memory_limit_gb
        self.preprocessing = preprocessing
        self.context = context
        self.local_neighbors = local_neighbors
        self.local_cluster_size = local_cluster_size
        self.local_max_rows = local_max_rows

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

    def fit(self, X, y, **fit_params):
        """Choose the context strategy and fit it: the labels, the fitted preprocessing and the
        contexts (one shared context, a stratified random subsample above ``max_train_rows``
        unless ``ignore_pretraining_limits``; or local contexts). Every parameter is read here:
        ``set_params`` after fit changes nothing until the next fit (except ``device`` through
        :meth:`to`). ``sample_weight`` is not supported (refused with the reason); no other fit
        parameter exists."""
        self._check_fit_params(fit_params)
        validate_params(self)
        if self.preprocessing == "official" and self.n_estimators != 1:
            raise InvalidInputError(
                "preprocessing='official' reproduces the authors' one-member evaluation (the paper's tables); their "
                f"multi-member preprocessing is not reproduced: pass n_estimators=1, got {self.n_estimators}"
            )
        transforms = choices("feature_transforms", self.feature_transforms, FEATURE_TRANSFORMS)
        encodings = choices("categorical_encodings", self.categorical_encodings, CATEGORICAL_ENCODINGS)
        X, y = self._check_training_data(X, y)
        categorical = self._categorical_positions(X)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        rng = check_random_state(self.random_state)
        self.model_, self.checkpoint_reference_ = self._load_network()
        self.device_ = resolve_device(self.device)
        resolve_precision(self.inference_precision, self.device_)
        self.inference_precision_, self.batch_size_ = self.inference_precision, self.batch_size
        local = uses_local_context(self.context, len(y), self.max_train_rows, self.ignore_pretraining_limits)
        strategy = self._new_strategy("local" if local else "subsample", n_classes)
        rows = strategy.training_rows(y_encoded, rng)
        if len(rows) < len(y):
            self._warn_limit(
                f"{len(y)} training rows exceed max_train_rows={self.max_train_rows}: the context is a "
                f"random subsample of {len(rows)} rows in the table's class proportions. Raise max_train_rows, "
                "pass context='local' (local contexts, the default context='auto' above the cap), or "
                "ignore_pretraining_limits=True to use every row (more memory and time)"
            )
        if strategy.cached and strategy.contexts is not None:  # refused before any preprocessing where it can be
            self._check_cache_memory(strategy)
        X_rows = X.iloc[rows] if isinstance(X, pd.DataFrame) else X[rows]
        f_max = self.model_.config.f_max
        self.encoder_ = TableEncoder(f_max, random_state=rng.randint(2**31 - 1), categorical_features=categorical)
        values = self.encoder_.fit_transform(X_rows, y_encoded[rows])
        if self.encoder_.n_varying_ > f_max:  # announced even with ignore_pretraining_limits: a hard limit
            self._warn_limit(
                f"{self.encoder_.n_varying_} non-constant features exceed the {f_max} the network takes: the "
                f"{f_max} with the highest mutual information with y are used. Select features yourself (e.g. "
                "SelectKBest in a Pipeline) to choose which", always=True
            )
        if self.preprocessing == "official":
            specs = [OFFICIAL_MEMBER]
        else:
            specs = ensemble_members(self.n_estimators, values.shape[1], n_classes, rng, self._class_shifts,
                                     transforms, encodings)
        strategy.fit(values, y_encoded[rows], self.encoder_.category_counts(), specs, int(rng.randint(2**31 - 1)))
        if strategy.cached:
            self._check_cache_memory(strategy)
        strategy.prepare(self._runner())
        self.strategy_, self.context_ = strategy, strategy.name
        return self

    @staticmethod
    def _check_fit_params(fit_params: dict) -> None:
        if "sample_weight" in fit_params:
            raise InvalidInputError(_NO_SAMPLE_WEIGHT)
        if fit_params:
            raise TypeError(f"fit() takes only X and y, got {', '.join(sorted(fit_params))}")

    def _load_network(self) -> tuple[torch.nn.Module, dict | None]:
        """This fit's private copy of the network and its checkpoint's reference (see ``load_model``)."""
        return load_model(self.checkpoint, self._arch)

    def _new_strategy(self, name: str, n_classes: int) -> ContextStrategy:
        """The context strategy ``name`` ("subsample" or "local") with this estimator's parameters."""
        common = {"n_members": self.n_estimators, "n_classes": n_classes,
                  "temperature": float(self.softmax_temperature), "cached": self.fit_mode == "fit_with_cache",
                  "cache_dtype": None if self.cache_precision == "auto" else getattr(torch, self.cache_precision),
                  "class_limit": self.model_.class_limit, "official": self.preprocessing == "official",
                  "f_max": self.model_.config.f_max}
        if name == "local":
            return LocalContexts(n_neighbors=self.local_neighbors, cluster_size=self.local_cluster_size,
                                 max_rows=self.local_max_rows, **common)
        limit = self.model_.class_limit
        if limit is not None and n_classes > limit and not self._codes_in_context:
            raise TooManyClassesError.for_counts(limit, n_classes)
        return SharedContext(max_rows=None if self.ignore_pretraining_limits else self.max_train_rows, **common)

    def _runner(self) -> NetworkRunner:
        return NetworkRunner(self.model_, self.device_, self.inference_precision_, self.batch_size_)

    def _cache_storage_dtype(self, strategy: ContextStrategy) -> torch.dtype:
        """The cache's dtype as fitted: ``cache_precision``'s, else the inference dtype (an upper
        bound under autocast)."""
        return strategy.cache_dtype or resolve_precision(self.inference_precision_, self.device_)[0]

    def estimate_cache_bytes(self) -> int:
        """The bytes ``fit_mode="fit_with_cache"`` keeps once every context is encoded, whatever the
        fit_mode this classifier was fitted with: per context and member, about 2 x layers x
        context rows x (1+K) x d_model numbers for EquiTabPFN (2 x blocks x rows x d_model for
        TabPFN*), in the cache's dtype. fit checks it against ``cache_memory_limit_gb``. With
        local contexts, the sum over every cluster's context (a predict encodes those it reaches)."""
        check_is_fitted(self)
        return self.strategy_.cache_plan(self.model_)[0] * self._cache_storage_dtype(self.strategy_).itemsize

    def _check_cache_memory(self, strategy: ContextStrategy) -> None:
        """Refuse a fit_with_cache cache whose fit's peak (the cache in its dtype and the working
        memory of encoding its largest context) is above ``cache_memory_limit_gb``."""
        limit = self.cache_memory_limit_gb
        numel, building_numel, what = strategy.cache_plan(self.model_)
        stored = self._cache_storage_dtype(strategy)
        size = numel * stored.itemsize
        building = building_numel * resolve_precision(self.inference_precision_, self.device_)[0].itemsize
        if limit is None or size + building <= limit * 1e9:
            return
        dtype = str(stored).removeprefix("torch.")
        options = ["fit_mode='low_memory' (the same predictions without a cache)"]
        if stored.itemsize > 2:
            options.append("cache_precision='float16' (half the memory)")
        options.append(f"fewer n_estimators or {'a smaller local_max_rows' if strategy.name == 'local' else 'max_train_rows'}")
        raise InvalidInputError(
            f"fit_mode='fit_with_cache' would keep about {size_text(size)} of cached keys and values "
            f"({strategy.n_members} members, {what}, {len(self.classes_)} classes, {dtype}) and work with "
            f"{size_text(building)} more while building them, above cache_memory_limit_gb={limit}: use "
            f"{', '.join(options)}, or raise cache_memory_limit_gb (None: no limit)"
        )

    def _warn_limit(self, message: str, always: bool = False) -> None:
        if always or not self.ignore_pretraining_limits:
            warnings.warn(f"{type(self).__name__}: {message}.", PretrainingLimitWarning, stacklevel=3)

    def _check_training_data(self, X, y) -> tuple:
        """The training table as :meth:`_check_table` makes it (recording its columns) and its labels as
        an array of one kind, checked to be classes of the same length."""
        X = self._check_table(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        y = label_array(y)
        check_classification_targets(y)
        return X, y

    def _check_table(self, X, reset: bool):
        X = as_pandas(X)
        if not isinstance(X, pd.DataFrame):
            X = check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
        elif X.shape[0] == 0:
            raise InvalidInputError("Found array with 0 sample(s) (shape=(0, ...)) while a minimum of 1 is required.")
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
                raise InvalidInputError(
                    f"categorical_features as a boolean mask needs one entry per column ({n_columns}), got {len(marked)}"
                )
            return np.flatnonzero(marked).tolist()
        if marked.dtype.kind in "iu":
            bad = [int(i) for i in marked if not 0 <= i < n_columns]
            if bad:
                raise InvalidInputError(f"categorical_features holds column indices {bad} outside 0..{n_columns - 1}")
            return sorted({int(i) for i in marked})
        names = list(X.columns) if isinstance(X, pd.DataFrame) else []
        missing = [name for name in marked.tolist() if name not in names]
        if missing:
            raise InvalidInputError(
                f"categorical_features names columns {missing} that X does not have; give column names of a data "
                "frame, column indices or a boolean mask"
            )
        return sorted({names.index(name) for name in marked.tolist()})

    # -- persistence -------------------------------------------------------------------

    def __getstate__(self):
        state = dict(super().__getstate__())  # the strategy drops its cache (rebuilt on first use)
        reference = state.get("checkpoint_reference_")
        if reference is not None and "packaged" in reference:
            state["model_"] = None  # loaded again from the packaged file named by the reference
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "model_" in state and state["model_"] is None:  # dropped by __getstate__ for a packaged checkpoint
            self.model_ = model_from_reference(state["checkpoint_reference_"])[0]

    def save_fit_state(self, path: str | os.PathLike) -> Path:
        """Write the fitted state, without the network's weights, to ``path`` (an ``.npz``
        archive of arrays and a JSON header, loaded without pickle). The checkpoint is
        referenced by name (packaged) or path, with its sha256. Load with
        :meth:`load_from_fit_state`."""
        check_is_fitted(self)
        if self.strategy_.official:
            raise InvalidInputError("save_fit_state does not store preprocessing='official'; pickle the classifier "
                                    "(pickle or joblib) instead")
        return save_fit_state(self, path)

    def _fit_state_arrays(self) -> dict[str, np.ndarray]:
        """What a subclass adds to the fit state's arrays (names with a "/"); none here."""
        return {}

    def _restore_fit_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Read back what :meth:`_fit_state_arrays` wrote, once ``model_`` is loaded; nothing here."""

    @classmethod
    def load_from_fit_state(cls, path: str | os.PathLike, *, checkpoint=None, device: str | None = None):
        """A fitted classifier from a file written by :meth:`save_fit_state`. The network
        comes from the checkpoint recorded there (checked against its sha256), or from
        ``checkpoint`` when given; ``device`` overrides the saved device."""
        return load_fit_state(cls, path, checkpoint=checkpoint, device=device)

    # -- prediction --------------------------------------------------------------------

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n_samples, n_classes), columns ordered as ``classes_``; the
        average over ensemble members of softmax(logits / softmax_temperature)."""
        return self._outputs(X)["proba"]

    def predict_log_proba(self, X) -> np.ndarray:
        """The logarithm of :meth:`predict_proba` (n_samples, n_classes), computed in log space
        (finite where a probability underflows to 0)."""
        return self._outputs(X)["log_proba"]

    def predict_logits(self, X) -> np.ndarray:
        """The members' average of logits / ``softmax_temperature`` (n_samples, n_classes), columns
        ordered as ``classes_``: TabPFN's meaning (its softmax is ``predict_proba`` for one member)."""
        return self._outputs(X)["logits"]

    def predict_raw_logits(self, X) -> np.ndarray:
        """Each member's logits before ``softmax_temperature``, (n_estimators, n_samples,
        n_classes), columns ordered as ``classes_`` (TabPFN's ``predict_raw_logits``); -inf for a
        class a row's local context lacks."""
        values = self._encoded(X)
        return self.strategy_.raw_logits(self._runner(), values)

    def get_embeddings(self, X) -> np.ndarray:
        """The decoder's inputs for the rows of X, per ensemble member: for EquiTabPFN the
        final tokens, shape (n_estimators, n_samples, 1 + n_classes, d_model) (slot 0 the
        covariate token, slot 1+k the class ``classes_[k]``); for TabPFN* the final row token,
        shape (n_estimators, n_samples, d_model). float32 (float64 with that precision).
        Refused with local contexts (each context has its own classes)."""
        values = self._encoded(X)
        return self.strategy_.embeddings(self._runner(), values)

    def context_summary(self, X, y=None) -> dict[str, float]:
        """How the contexts serve the rows of X, without running the network: "groups" (the
        contexts reached; 1 with one context for every row), the mean "rows" and "classes" per
        context reached and, given the rows' labels ``y``, "true_class_absent": the fraction of
        rows whose class is not in their context (they get probability 0 for it)."""
        values = self._encoded(X)
        codes = None
        if y is not None:
            y = np.asarray(y)
            codes = np.minimum(np.searchsorted(self.classes_, y), len(self.classes_) - 1)
            codes = np.where(self.classes_[codes] == y, codes, -1)
        return self.strategy_.summary(self.strategy_.route(values), codes)

    def _outputs(self, X) -> dict[str, np.ndarray]:
        values = self._encoded(X)
        result = self.strategy_.outputs(self._runner(), values)
        broken = ~np.isfinite(result["proba"]).all(axis=1) | np.isnan(result["logits"]).any(axis=1)
        if broken.any():
            raise FloatingPointError(
                f"the model produced NaN or infinite probabilities for {int(broken.sum())} rows; its weights are not "
                "usable (a diverged training?): use another checkpoint"
            )
        return result

    def _encoded(self, X) -> np.ndarray:
        check_is_fitted(self)
        return self.encoder_.transform(self._check_table(X, reset=False))

    def to(self, device):
        """Move the classifier, fitted or not, to ``device`` ("auto", "cpu", "cuda", "cuda:N",
        "mps"): sets the ``device`` parameter and, once fitted, moves the network and the
        ``fit_with_cache`` cache. A device torch cannot use is refused, leaving it unchanged.
        Returns self."""
        resolved = resolve_device(device)
        if hasattr(self, "device_"):
            resolve_precision(self.inference_precision_, resolved)
            self.model_ = self.model_.to(resolved)
            self.strategy_.to(resolved)
            self.device_ = resolved
        self.device = device if isinstance(device, str) else str(resolved)
        return self

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row (an entry of ``classes_``)."""
        probabilities = self.predict_proba(X)
        return self.classes_[np.argmax(probabilities, axis=1)]

