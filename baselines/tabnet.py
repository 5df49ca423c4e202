"""TabZilla's TabNet baseline (Arik & Pfister 2021) through ``pytorch-tabnet``.

Defaults: n_d = n_a = 24, 5 steps, gamma 1.5, 3 independent + 3 shared GLU layers,
momentum 0.015, sparsemax masks, batch 128 (ghost batch norm over virtual batches of 128),
at most 500 epochs, early stopping after 20 epochs without improvement of the validation
log-loss (best weights restored by the package), the package's default Adam lr 0.02.

Notes on the package (4.1.0): ``TabNetClassifier`` is not recognised by sklearn 1.9's
``is_classifier``, so its ``fit`` / ``predict_proba`` are called directly. It maps the
labels it sees in training to sorted output columns, so training on 0..S-1 (all present,
which :class:`~.base.Method` and the holdout split guarantee) gives columns 0..S-1. Its
built-in "logloss" metric calls sklearn's ``log_loss`` without ``labels`` and fails when
the validation set misses a class, so a label-aware log-loss metric is registered
instead. It prints an early-stopping summary and warns regardless of ``verbose=0``:
both are silenced.
"""

from __future__ import annotations

import contextlib
import functools
import io
import warnings

import numpy as np

from .base import Method, optional_import
from .neural import split_validation, torch_seed
from .settings import TabNetSettings


@functools.cache
def _logloss_metric():
    """The label-aware log-loss as a pytorch-tabnet ``Metric`` subclass, created on first
    use (pytorch-tabnet is an optional package); reachable as ``tabnet.EquibenchLogLoss`` so
    fitted models pickle."""
    with optional_import(TabNetMethod.name, TabNetSettings.requires):
        from pytorch_tabnet.metrics import Metric as metric_base

    class EquibenchLogLoss(metric_base):
        """Mean -log p(true label); columns are the training labels 0..S-1."""

        def __init__(self):
            self._name = "equibench_logloss"
            self._maximize = False

        def __call__(self, y_true, y_score):  # (n,), (n, S) softmax scores
            y_true = np.asarray(y_true).astype(int)
            p = np.asarray(y_score)[np.arange(len(y_true)), y_true]
            return float(-np.mean(np.log(np.clip(p, 1e-15, 1.0))))

    EquibenchLogLoss.__qualname__ = "EquibenchLogLoss"  # the name pickle looks up in this module
    return EquibenchLogLoss


def __getattr__(name):  # PEP 562: lets pickle find the lazily created metric class
    if name == "EquibenchLogLoss":
        return _logloss_metric()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


class TabNetMethod(Method):
    """:class:`~.settings.TabNetSettings`. Fitted: ``model_`` (the TabNetClassifier),
    ``epochs_trained_``."""

    settings: TabNetSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        with _quiet(), optional_import(self.name, self.settings.requires):  # its import warns about a deprecated scipy namespace
            from pytorch_tabnet.tab_model import TabNetClassifier
        s = self.settings
        X, y, X_val, y_val = split_validation(X, y, X_val, y_val, self.seed)
        with torch_seed(self.seed, s.device), _quiet():
            self.model_ = TabNetClassifier(
                n_d=s.n_d, n_a=s.n_a, n_steps=s.n_steps, gamma=s.gamma, n_independent=s.n_independent,
                n_shared=s.n_shared, momentum=s.momentum, mask_type=s.mask_type, optimizer_params={"lr": s.lr},
                seed=self.seed, verbose=0, device_name=s.device,
            )
            self.model_.fit(
                np.asarray(X, dtype=np.float32),
                np.asarray(y),
                eval_set=[(np.asarray(X_val, dtype=np.float32), np.asarray(y_val))],
                eval_name=["val"],
                eval_metric=[_logloss_metric()],
                max_epochs=s.max_epochs,
                patience=s.patience,
                batch_size=s.batch_size,
                virtual_batch_size=s.virtual_batch_size,
                # a last batch of one row would break batch normalisation in training
                drop_last=len(y) % s.batch_size == 1 and len(y) > s.batch_size,
                compute_importance=False,
            )
        self.epochs_trained_ = len(self.model_.history["loss"])

    def _predict_proba(self, X):
        with torch_seed(self.seed, self.settings.device), _quiet():
            return self.model_.predict_proba(np.asarray(X, dtype=np.float32))  # (n, S)
