"""The pretrained networks as evaluated methods (EquiTabPFN, TabPFN*).

A run resolves and checks a method's checkpoint once, in the calling process
(:meth:`PFNMethod.prepare`, through the classifiers' own resolver: ``default`` or a name ->
the packaged file, the file exists, it holds this method's architecture); every process then
loads the network once and hands the classifier of each cell that shared network (the
classifier works on its own copy).
"""

from __future__ import annotations

import dataclasses
import warnings

from ..classifier import PretrainingLimitWarning, classifier_for
from ..classifier.checkpoints import resolve_checkpoint, shared_network
from .base import Method
from .settings import PFNSettings


class PFNMethod(Method):
    """A PFN classifier of ``n_estimators`` members on the network of a prepared checkpoint."""

    settings: PFNSettings

    @classmethod
    def prepare(cls, settings: PFNSettings) -> PFNSettings:
        """``checkpoint`` as an absolute file path, checked to hold a ``cls.name`` network."""
        path = resolve_checkpoint(settings.checkpoint, cls.name)
        shared_network(path, cls.name)
        return dataclasses.replace(settings, checkpoint=str(path))

    def _model(self, n_seen: int, n_rows: int):
        """The classifier of these settings for ``n_seen`` classes and ``n_rows`` training rows
        (ECOC beyond the network's class limit, unless local contexts handle the classes)."""
        network = shared_network(self.settings.checkpoint, self.name)
        return classifier_for(network, n_seen, n_rows, n_estimators=self.settings.n_estimators,
                              device=self.settings.device, max_train_rows=self.settings.max_train_rows,
                              context=self.settings.context, random_state=self.seed)

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = self._model(n_seen, len(X))
        with warnings.catch_warnings():  # the context cap and feature selection are the protocol's, not news
            warnings.simplefilter("ignore", PretrainingLimitWarning)
            self.model_.fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
