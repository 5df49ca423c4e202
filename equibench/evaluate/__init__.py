"""``equibench evaluate``: every method on every task and fold of a suite, resumable.

Modules: ``run`` (resume and run: ``evaluate`` / ``evaluate_frame``), ``config`` (the run's
options, settings and fingerprint), ``plan`` (tasks loaded once, the cells and their cost),
``summary`` (what a run planned and did), ``progress`` (the bar and its time left), ``cells``
(one cell: task, fold, method, settings), ``backends`` (where cells run),
``tabzilla`` and ``metrics`` (the protocol's preprocessing and per-cell metrics),
``results_store`` (cells on disk) and ``run_manifest`` (the settings a folder's numbers
depend on).
"""

from .backends import CellBackend, DaskBackend, LocalBackend, make_backend
from .config import EvaluateConfig
from .run import evaluate, evaluate_frame
from .summary import EvaluateSummary

__all__ = [
    "CellBackend", "DaskBackend", "EvaluateConfig", "EvaluateSummary", "LocalBackend", "evaluate", "evaluate_frame",
    "make_backend",
]
