"""The pretrained networks as evaluated methods (EquiTabPFN, TabPFN*).

A run resolves and checks a method's checkpoint once, in the calling process
(:meth:`PFNMethod.prepare`, through the classifiers' own resolver: ``default`` or a name ->
the packaged file, the file exists, it holds this method's architecture); every process then
loads the network once and hands the classifier of each cell that shared network (the
classifier works on its own copy).

TabPFN* runs natively up to its checkpoint's ``max_classes`` with ``n_estimators``
class-permutation members; beyond, ECOC wraps single-member sub-models and the ensemble size
becomes the ECOC redundancy (1 = the fewest codebook rows that cover every class): see
``classifier_for``.

The fine-tuned methods (``equitabpfn-ft``, ``tabpfn-star-ft``) fine-tune the network on each
fold's training rows (the fine-tuned classifiers' defaults: a guarded validation split, a time
limit) and record the run in the cell's diagnostics; TabPFN* past its class limit decodes output
codes within its context instead of going through ECOC.
"""

from __future__ import annotations

import dataclasses
import warnings

from ..classifier import (
    FinetunedEquiTabPFNClassifier,
    FinetunedTabPFNStarClassifier,
    PretrainingLimitWarning,
    classifier_for,
)
from ..classifier.checkpoints import resolve_checkpoint, shared_network
from ..model import EquiTabPFN, TabPFNStar
from .base import Method
from .settings import FinetunedPFNSettings, PFNSettings


class PFNMethod(Method):
    """A PFN classifier of ``n_estimators`` members on the network of a prepared checkpoint, of
    the architecture ``arch``."""

    arch: str
    settings: PFNSettings

    @classmethod
    def prepare(cls, settings: PFNSettings) -> PFNSettings:
        """``checkpoint`` as an absolute file path, checked to hold a ``cls.arch`` network."""
        path = resolve_checkpoint(settings.checkpoint, cls.arch)
        shared_network(path, cls.arch)
        return dataclasses.replace(settings, checkpoint=str(path))

    def _model(self, n_seen: int, n_rows: int):
        """The classifier of these settings for ``n_seen`` classes and ``n_rows`` training rows
        (ECOC beyond the network's class limit, unless local contexts handle the classes)."""
        network = shared_network(self.settings.checkpoint, self.arch)
        return classifier_for(network, n_seen, n_rows, n_estimators=self.settings.n_estimators,
                              device=self.settings.device, max_train_rows=self.settings.max_train_rows,
                              context=self.settings.context, random_state=self.seed)

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = self._model(n_seen, len(X))
        with warnings.catch_warnings():  # the context cap and feature selection are the protocol's, not news
            warnings.simplefilter("ignore", PretrainingLimitWarning)
            self.model_.fit(X, y)

    def diagnostics(self) -> dict:
        """How the contexts served the last predict's rows, as the classifier's context strategy
        recorded them (an ECOC ensemble's: its first member's): ``context`` (the strategy,
        "subsample" or "local"), ``context_groups`` and the mean ``context_rows`` and
        ``context_classes`` per context."""
        if len(self.seen_classes_) < 2:
            return {}
        model = self.model_.estimators_[0] if hasattr(self.model_, "estimators_") else self.model_
        return {"context": model.context_, **{f"context_{k}": v for k, v in model.strategy_.last_summary.items()}}


class EquiTabPFNMethod(PFNMethod):
    arch = EquiTabPFN.arch


class TabPFNStarMethod(PFNMethod):
    arch = TabPFNStar.arch


class FinetunedPFNMethod(PFNMethod):
    """A PFN method whose classifier fine-tunes the network on the fold's training rows."""

    settings: FinetunedPFNSettings
    classifier: type

    def _model(self, n_seen: int, n_rows: int):
        network = shared_network(self.settings.checkpoint, self.arch)
        return self.classifier(checkpoint=network, n_estimators=self.settings.n_estimators, device=self.settings.device,
                               max_train_rows=self.settings.max_train_rows, context=self.settings.context,
                               random_state=self.seed)

    def diagnostics(self) -> dict:
        """The context diagnostics and the fine-tuning's: ``finetune_steps`` run, ``finetune_kept_step``
        (0: the base weights kept), ``finetune_validation_gain`` (validation accuracy, kept weights
        against the base) and ``finetune_seconds``."""
        if len(self.seen_classes_) < 2:
            return {}
        tuning = {f"finetune_{name}": value for name, value in self.model_.fine_tuning_summary().items()}
        return {**super().diagnostics(), **tuning}


class FinetunedEquiTabPFNMethod(FinetunedPFNMethod):
    arch = EquiTabPFN.arch
    classifier = FinetunedEquiTabPFNClassifier


class FinetunedTabPFNStarMethod(FinetunedPFNMethod):
    arch = TabPFNStar.arch
    classifier = FinetunedTabPFNStarClassifier
