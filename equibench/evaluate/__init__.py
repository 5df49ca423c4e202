"""``equibench evaluate``: every method on every task and fold of a suite, resumable
(docs/ARCHITECTURE.md lists the modules)."""

from .backends import CellBackend, DaskBackend, LocalBackend, make_backend
from .config import EvaluateConfig
from .run import evaluate, evaluate_frame
from .summary import EvaluateSummary

__all__ = [
    "CellBackend", "DaskBackend", "EvaluateConfig", "EvaluateSummary", "LocalBackend", "evaluate", "evaluate_frame",
    "make_backend",
]
