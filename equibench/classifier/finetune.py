"""Fine-tuning on the table itself: FinetunedEquiTabPFNClassifier and FinetunedTabPFNStarClassifier.

``fit`` holds out a stratified validation split, fits the zero-shot classifier on the other rows,
trains a copy of its network on episodes drawn as predict sees the table (:mod:`.episodes`),
validates after each epoch through that classifier's own predict, and keeps the best step that
passes the guard (``min_delta``), else the base weights exactly. The classifier is then fitted as
the zero-shot one on every training row, the validation rows included, with the kept weights: so
when the guard keeps the base, its predictions are the zero-shot classifier's.
"""

from __future__ import annotations

import inspect
import json
import time
import warnings
from numbers import Real

import numpy as np
import torch
from sklearn.base import clone
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .classifiers import EquiTabPFNClassifier, TabPFNStarClassifier
from .episodes import EpisodeSampler, episode_loss, validation_split
from .estimator import _POSITIVE_INT, _POSITIVE_REAL, PFNClassifier, PretrainingLimitWarning
from .inputs import validate_params
from .local_contexts import uses_local_context

#: A step is kept only if its validation log loss improves on the base weights' by more than this
#: many standard errors of the per-row improvement (a paired test), so that noise is not kept.
GUARD_STANDARD_ERRORS = 2.0


class FinetunedPFNClassifier(PFNClassifier):
    """A PFN classifier whose network is fine-tuned on the training table at fit (see the module)."""

    _parameter_constraints: dict = {
        **PFNClassifier._parameter_constraints,
        **dict.fromkeys(("epochs", "episodes_per_epoch", "max_validation_rows", "early_stopping_patience"),
                        _POSITIVE_INT),
        **dict.fromkeys(("learning_rate", "grad_clip_value"), [_POSITIVE_REAL]),
        **dict.fromkeys(("weight_decay", "min_delta"), [Interval(Real, 0, None, closed="left")]),
        **dict.fromkeys(("validation_split_ratio", "finetune_ctx_query_split_ratio"),
                        [Interval(Real, 0, 1, closed="neither")]),
        "time_limit": [_POSITIVE_REAL, None],
    }
    _codes_in_context = True  # TabPFN* past its class limit: output codes in the one context, as episodes train

    def __init__(self, *, epochs=30, episodes_per_epoch=10, learning_rate=1e-5, weight_decay=0.01,
                 validation_split_ratio=0.1, max_validation_rows=1000, early_stopping_patience=3, min_delta=1e-3,
                 grad_clip_value=1.0, finetune_ctx_query_split_ratio=0.2, time_limit=120.0, **zero_shot):
        super().__init__(**zero_shot)
        self.epochs = epochs
        self.episodes_per_epoch = episodes_per_epoch
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.validation_split_ratio = validation_split_ratio
        self.max_validation_rows = max_validation_rows
        self.early_stopping_patience = early_stopping_patience
        self.min_delta = min_delta
        self.grad_clip_value = grad_clip_value
        self.finetune_ctx_query_split_ratio = finetune_ctx_query_split_ratio
        self.time_limit = time_limit

    # scikit-learn reads the parameters from the signature: the zero-shot ones, then the fine-tuning
    # ones (named as TabPFN's FinetunedTabPFNClassifier's where they mean the same), no **kwargs
    __init__.__signature__ = inspect.Signature(
        list(inspect.signature(PFNClassifier.__init__).parameters.values())
        + [p for p in inspect.signature(__init__).parameters.values() if p.kind == p.KEYWORD_ONLY])

    def fit(self, X, y, **fit_params):
        """Fine-tune the network on (X, y) (see the module), then fit as the zero-shot classifier
        on every row with the kept weights. ``fine_tuning_`` records what happened."""
        self._check_fit_params(fit_params)
        validate_params(self)
        started = time.perf_counter()
        table, labels = self._check_training_data(X, y)
        codes = np.unique(labels, return_inverse=True)[1]
        rng = check_random_state(self.random_state)
        train, validation = validation_split(codes, self.validation_split_ratio, self.max_validation_rows, rng)
        self.finetuned_state_ = None
        record = {"validation_rows": len(validation), "steps": 0, "kept_step": 0, "stopped": "no validation rows"}
        if len(validation) and codes.max() > 0:
            local = uses_local_context(self.context, len(labels), self.max_train_rows, self.ignore_pretraining_limits)
            zero_shot = clone(self).set_params(fit_mode="low_memory", context="local" if local else "subsample")
            with warnings.catch_warnings():  # announced by the final fit below
                warnings.simplefilter("ignore", PretrainingLimitWarning)
                PFNClassifier.fit(zero_shot, _safe_indexing(table, train), labels[train])
            deadline = started + (np.inf if self.time_limit is None else self.time_limit)
            self.finetuned_state_, tuned = _Tuning(self, zero_shot, rng, deadline).run(
                _safe_indexing(table, validation), labels[validation])
            record.update(tuned)
        super().fit(X, y)
        self.fine_tuning_ = {**record, "seconds": time.perf_counter() - started}
        return self

    def _load_network(self):
        model, reference = super()._load_network()
        if getattr(self, "finetuned_state_", None) is not None:
            model.load_state_dict(self.finetuned_state_)
        return model, reference

    def __setstate__(self, state):
        super().__setstate__(state)  # a packaged checkpoint's base weights, loaded again
        if state.get("finetuned_state_") is not None:
            self.model_.load_state_dict(self.finetuned_state_)

    def _fit_state_arrays(self) -> dict[str, np.ndarray]:
        weights = {f"fine_tuning/weights/{name}": tensor.numpy() for name, tensor in (self.finetuned_state_ or {}).items()}
        return {"fine_tuning/record": np.asarray(json.dumps(self.fine_tuning_)), **weights}

    def _restore_fit_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.fine_tuning_ = json.loads(str(arrays["fine_tuning/record"]))
        prefix = "fine_tuning/weights/"
        weights = {name.removeprefix(prefix): torch.from_numpy(array) for name, array in arrays.items()
                   if name.startswith(prefix)}
        self.finetuned_state_ = weights or None
        if weights:
            self.model_.load_state_dict(weights)

    def fine_tuning_summary(self) -> dict[str, float]:
        """``fine_tuning_`` as numbers: steps run, the kept step (0: the base weights), the validation
        accuracy gain of the kept weights, fine-tuning seconds."""
        check_is_fitted(self)
        record = self.fine_tuning_
        gain = record.get("validation_accuracy_after", 0.0) - record.get("validation_accuracy_before", 0.0)
        return {"steps": record["steps"], "kept_step": record["kept_step"], "validation_gain": gain,
                "seconds": record["seconds"]}


def fine_tuning_defaults() -> dict:
    """The fine-tuning parameters' defaults (the zero-shot classifier's excluded)."""
    return dict(FinetunedPFNClassifier.__init__.__kwdefaults__)  # the zero-shot ones come through **zero_shot


class _Tuning:
    """One fine-tuning run of ``zero_shot``'s network (in place) with ``estimator``'s parameters."""

    def __init__(self, estimator: FinetunedPFNClassifier, zero_shot: PFNClassifier, rng: np.random.RandomState,
                 deadline: float):
        self.estimator, self.zero_shot, self.deadline = estimator, zero_shot, deadline
        self.runner = zero_shot._runner()  # the network on its device and dtype, as predict runs it
        self.sampler = EpisodeSampler(zero_shot.strategy_, estimator.finetune_ctx_query_split_ratio, rng,
                                      self.runner.model.token_slots)

    def _validate(self, X_val, y_val) -> tuple[np.ndarray, float]:
        """Each validation row's log loss (n_val,) and the validation accuracy of the current weights,
        through the classifier's predict."""
        proba = self.zero_shot.predict_proba(X_val)  # (n_val, K)
        truth = np.searchsorted(self.zero_shot.classes_, y_val)
        losses = -np.log(np.clip(proba[np.arange(len(truth)), truth], 1e-15, 1))
        return losses, float(np.mean(np.argmax(proba, axis=1) == truth))

    def _beats(self, losses: np.ndarray, base: np.ndarray, best: np.ndarray) -> bool:
        """The guard (see ``min_delta``): whether rows' log ``losses`` beat the ``base`` and ``best`` ones."""
        gain = base - losses
        noise = GUARD_STANDARD_ERRORS * gain.std(ddof=1) / np.sqrt(len(gain)) if len(gain) > 1 else np.inf
        return gain.mean() > max(self.estimator.min_delta, noise) and losses.mean() < best.mean()

    def run(self, X_val, y_val) -> tuple[dict | None, dict]:
        """The kept weights (None: the base ones) and the record of the run."""
        estimator, model = self.estimator, self.runner.model
        base_losses, base_accuracy = best = self._validate(X_val, y_val)
        record = {"validation_log_loss_before": float(base_losses.mean()), "validation_accuracy_before": base_accuracy}
        model.requires_grad_(True)
        optimiser = torch.optim.AdamW(model.parameters(), lr=estimator.learning_rate,
                                      weight_decay=estimator.weight_decay)
        kept, kept_step, step, stale, stopped = None, 0, 0, 0, "epochs"
        for _ in range(estimator.epochs):
            steps_before = step
            for _ in range(estimator.episodes_per_epoch):
                if time.perf_counter() >= self.deadline:
                    break
                loss = self._step(optimiser)
                if loss is not None and not np.isfinite(loss):
                    stopped = "non-finite loss"
                    break
                step += loss is not None
            if stopped != "epochs":
                break
            if step > steps_before:  # the epoch's steps validated, even past the time limit
                losses, accuracy = self._validate(X_val, y_val)
                if accuracy >= base_accuracy and self._beats(losses, base_losses, best[0]):
                    best, kept_step, stale = (losses, accuracy), step, 0
                    kept = {name: tensor.detach().to("cpu", torch.float32, copy=True)
                            for name, tensor in model.state_dict().items()}
                else:
                    stale += 1
            if stale >= estimator.early_stopping_patience:
                stopped = "patience"
                break
            if time.perf_counter() >= self.deadline:
                stopped = "time_limit"
                break
        model.requires_grad_(False)
        record.update(steps=step, kept_step=kept_step, stopped=stopped, validation_log_loss_after=float(best[0].mean()),
                      validation_accuracy_after=best[1])
        return kept, record

    def _step(self, optimiser: torch.optim.Optimizer) -> float | None:
        """One episode's gradient step; its loss (None when the drawn context made no episode)."""
        episode = self.sampler.draw()
        if episode is None:
            return None
        with self.runner._mixed_precision():
            loss = episode_loss(self.runner.model, episode, self.runner.device, self.runner.dtype)
        if torch.isfinite(loss):  # a non-finite loss is returned untaken: run() stops on it
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.runner.model.parameters(), self.estimator.grad_clip_value)
            optimiser.step()
        return float(loss.detach())


class FinetunedEquiTabPFNClassifier(FinetunedPFNClassifier, EquiTabPFNClassifier):
    """EquiTabPFN fine-tuned on the training table at fit, guarded by a validation split.

    Parameters: :class:`EquiTabPFNClassifier`'s, and

    epochs : int, default=30
        Validation rounds at most; each follows ``episodes_per_epoch`` gradient steps.
    episodes_per_epoch : int, default=10
        Episodes (one gradient step each) between validations. An episode is a context as predict
        builds it (local contexts: the neighbourhood of a random anchor training row; else the
        shared context), its rows split at random into context and query rows.
    learning_rate : float, default=1e-5
    weight_decay : float, default=0.01
        AdamW's.
    validation_split_ratio : float, default=0.1
        The share of each class's rows held out to validate (never trained on), at most
        ``max_validation_rows`` rows in all; they rejoin the context for the final fit.
    max_validation_rows : int, default=1000
    early_stopping_patience : int, default=3
        Validations without a kept step before stopping.
    min_delta : float, default=1e-3
        A step is kept only if its mean validation log loss is below the base weights' by more than
        this and by more than two standard errors of the per-row improvement (a paired test: noise
        is not kept), below the best kept so far, and its validation accuracy is not below the base
        weights'; if no step is, the base weights are kept exactly and the predictions are
        :class:`EquiTabPFNClassifier`'s.
    grad_clip_value : float, default=1.0
        The gradients' norm is clipped to it.
    finetune_ctx_query_split_ratio : float, default=0.2
        The share of an episode's rows that are query rows.
    time_limit : float or None, default=120.0
        Seconds for fine-tuning, validations included, checked before each step (the steps of the
        epoch in progress are still validated). None: no limit.

    Attributes: :class:`EquiTabPFNClassifier`'s, and ``fine_tuning_`` (dict: ``steps`` run,
    ``kept_step`` (0: the base weights), validation log loss and accuracy before and after,
    ``validation_rows``, ``stopped`` (why: "epochs", "patience", "time_limit", "non-finite loss"),
    ``seconds``) and ``finetuned_state_`` (the kept weights, or None for the base ones).

    The split, the episodes and their order do not depend on the class names, so with this exactly
    equivariant network a relabelled table gives the fine-tuned probabilities permuted.
    """

    __module__ = "equibench.classifier"


class FinetunedTabPFNStarClassifier(FinetunedPFNClassifier, TabPFNStarClassifier):
    """TabPFN* fine-tuned on the training table at fit: :class:`FinetunedEquiTabPFNClassifier`'s
    parameters and attributes on TabPFN*. Its episodes train on at most the network's class limit
    of classes (a random subset of a context's) with the member's class rotation; past the limit,
    predict decodes error-correcting output codes within the context. Not equivariant."""

    __module__ = "equibench.classifier"
