"""scikit-learn estimators around the pretrained networks: EquiTabPFNClassifier and
TabPFNStarClassifier. ``fit`` stores the (preprocessed) training context; the network runs
in ``predict_proba``. docs/ARCHITECTURE.md lists the modules. The public names load on first
use (they import torch and scikit-learn), so that :mod:`.context_rules` stays importable
without them.
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
