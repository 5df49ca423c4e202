"""scikit-learn estimators around the pretrained networks: EquiTabPFNClassifier and
TabPFNStarClassifier. ``fit`` stores the (preprocessed) training context; the network runs
in ``predict_proba``.

The public classes and :func:`classifier_for` are in :mod:`.classifiers`; the shared estimator
in :mod:`.estimator`; the context strategies it chooses at fit in :mod:`.contexts` (one shared
context) and :mod:`.local_contexts` (local contexts, over :mod:`.neighbours`), their names and
the context cap in :mod:`.context_rules`; fine-tuning on the table in :mod:`.finetune` (its
validation split and episodes in :mod:`.episodes`); the network's forward passes in
:mod:`.network_runs`; the checkpoint resolver in :mod:`.checkpoints`; the pickle-free fit state
in :mod:`.fit_state`. The public names load on first use (they import torch and scikit-learn),
so that :mod:`.context_rules` stays importable without them.
"""

from .._lazy import lazy_exports

__all__ = ["EquiTabPFNClassifier", "FinetunedEquiTabPFNClassifier", "FinetunedTabPFNStarClassifier",
           "PretrainingLimitWarning", "TabPFNStarClassifier", "classifier_for"]

_LAZY = {
    "EquiTabPFNClassifier": "classifiers",
    "TabPFNStarClassifier": "classifiers",
    "FinetunedEquiTabPFNClassifier": "finetune",
    "FinetunedTabPFNStarClassifier": "finetune",
    "PretrainingLimitWarning": "estimator",
    "classifier_for": "classifiers",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
