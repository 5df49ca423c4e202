"""``equibench score``: a checkpoint measured against the pretraining quality bar.

Importing the package is light (its names load on first use): ``equibench info`` reads the
packaged checkpoints' scorecards through ``bar`` alone.
"""

from .._lazy import lazy_exports

__all__ = ["Criterion", "Scorecard", "score_checkpoint"]  # public (docs/API.md); the others below are internal

__getattr__, __dir__ = lazy_exports(__name__, {
    "Criterion": "bar", "evaluate_criteria": "bar", "reference_model": "references", "Scorecard": "scorecard",
    "load_tasks": "run", "score_checkpoint": "run",
})
