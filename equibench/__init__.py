"""equibench: pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines."""

from ._version import __version__
from .classifier import EquiTabPFNClassifier, TabPFNStarClassifier

__all__ = ["EquiTabPFNClassifier", "TabPFNStarClassifier", "__version__"]
