"""equibench: pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines.

The public API is ``__all__`` here and in each subpackage, and the error classes of
:mod:`equibench.errors` (docs/API.md); every other name is internal."""

from ._lazy import lazy_exports
from ._version import __version__
from .errors import EquibenchError  # noqa: F401 (public)

__all__ = [
    "ECOCClassifier", "EquiTabPFNClassifier", "EquibenchError", "FinetunedEquiTabPFNClassifier",
    "FinetunedTabPFNStarClassifier", "PretrainingLimitWarning", "TabPFNStarClassifier", "__version__", "classifier_for",
    "evaluate_frame",
]

# The classifiers import torch and scikit-learn: load them on first use, so that
# `import equibench` (and the CLI's start) stays fast.
_LAZY = {
    "EquiTabPFNClassifier": "classifier",
    "TabPFNStarClassifier": "classifier",
    "FinetunedEquiTabPFNClassifier": "classifier",
    "FinetunedTabPFNStarClassifier": "classifier",
    "PretrainingLimitWarning": "classifier",
    "classifier_for": "classifier",
    "evaluate_frame": "evaluate",
    "ECOCClassifier": "classifier.ecoc",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
