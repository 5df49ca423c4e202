"""``equibench evaluate``: every method on every task and fold of a suite, resumable.

Modules: ``run`` (plan, resume and run: ``evaluate`` / ``evaluate_frame``), ``cells`` (one
cell: task, fold, method, settings), ``backends`` (where cells run),
``tabzilla`` and ``metrics`` (the protocol's preprocessing and per-cell metrics),
``results_store`` (cells on disk) and ``run_manifest`` (the settings a folder's numbers
depend on).
"""

from .backends import CellBackend, DaskBackend, LocalBackend, available_cores, make_backend
from .run import EvaluateConfig, EvaluateSummary, evaluate, evaluate_frame

__all__ = [
    "CellBackend", "DaskBackend", "EvaluateConfig", "EvaluateSummary", "LocalBackend", "available_cores", "evaluate",
    "evaluate_frame", "make_backend",
]
