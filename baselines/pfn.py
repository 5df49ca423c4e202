"""The pretrained networks as evaluated methods (EquiTabPFN, TabPFN*).

A run resolves and checks a method's checkpoint once, in the calling process
(:meth:`PFNMethod.prepare`: ``default`` -> the packaged file, the file exists, it holds this
method's architecture); every process then loads the network once and hands the classifier
of each cell that shared network (the classifier works on its own copy).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from ..classifier import PretrainingLimitWarning
from ..classifier.checkpoints import shared_network
from ..errors import InvalidInputError
from ..model import default_checkpoint
from .base import Method
from .settings import PFNSettings


class PFNMethod(Method):
    """A PFN classifier of ``n_estimators`` members on the network of a prepared checkpoint."""

    settings: PFNSettings

    @classmethod
    def prepare(cls, settings: PFNSettings) -> PFNSettings:
        """``checkpoint`` as an absolute file path, checked to hold a ``cls.name`` network."""
        chosen = settings.checkpoint
        if not chosen.strip():
            raise InvalidInputError(f"the {cls.name} checkpoint is empty; pass `default` or a checkpoint file written "
                                    "by `equibench pretrain`")
        path = default_checkpoint(cls.name) if chosen == "default" else Path(chosen)
        if path.is_dir():
            raise InvalidInputError(f"the {cls.name} checkpoint {str(path)!r} is a folder; pass the checkpoint file "
                                    "inside it (a pretraining output folder holds model.pt)")
        if not path.is_file():
            raise InvalidInputError(f"{cls.name} checkpoint {str(path)!r} does not exist; pass a file written by "
                                    "`equibench pretrain`")
        arch = shared_network(path).arch
        if arch != cls.name:
            raise InvalidInputError(f"checkpoint {str(path)!r} holds a {arch} model, not {cls.name}; pass a {cls.name} "
                                    "checkpoint")
        return dataclasses.replace(settings, checkpoint=str(path.resolve()))

    def classifier(self, n_estimators: int):
        """The scikit-learn classifier of this method with ``n_estimators`` members."""
        raise NotImplementedError

    def _network_settings(self) -> dict:
        """The classifier parameters these settings give."""
        return {"checkpoint": shared_network(self.settings.checkpoint), "device": self.settings.device,
                "max_train_rows": self.settings.max_train_rows, "random_state": self.seed}

    def _model(self, n_seen: int):
        return self.classifier(self.settings.n_estimators)

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = self._model(n_seen)
        with warnings.catch_warnings():  # the context cap and feature selection are the protocol's, not news
            warnings.simplefilter("ignore", PretrainingLimitWarning)
            self.model_.fit(X, y)

    def _predict_proba(self, X):
        return self.model_.predict_proba(X)
