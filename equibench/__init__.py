"""equibench: pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines."""

from ._version import __version__
from .errors import EquibenchError  # noqa: F401 (public)

__all__ = [
    "ECOCClassifier", "EquiTabPFNClassifier", "EquibenchError", "PretrainingLimitWarning", "TabPFNStarClassifier",
    "__version__", "classifier_for", "evaluate_frame",
]

# The classifiers import torch and scikit-learn: load them on first use, so that
# `import equibench` (and the CLI's start) stays fast.
_LAZY = {
    "EquiTabPFNClassifier": "classifier",
    "TabPFNStarClassifier": "classifier",
    "PretrainingLimitWarning": "classifier",
    "classifier_for": "classifier",
    "evaluate_frame": "evaluate",
    "ECOCClassifier": "baselines.ecoc",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
