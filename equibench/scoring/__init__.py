"""``equibench score``: a checkpoint measured against the pretraining quality bar.

Modules, each with one job:

* ``bar``: the bar's parts, thresholds and :class:`Criterion` (:func:`evaluate_criteria`)
* ``references``: its reference models (KNN, LogisticRegression), built in one place
* ``scorecard``: :class:`Scorecard`, the result, as JSON data and as Markdown
* ``run``: :func:`score_checkpoint`, every fold of the bundled datasets and an OpenML cache

Importing the package is light (its names load on first use): ``equibench info`` reads the
packaged checkpoints' scorecards through ``bar`` alone.
"""

from .._lazy import lazy_exports

__all__ = ["Criterion", "Scorecard", "score_checkpoint"]  # public (docs/API.md); the others below are internal

__getattr__, __dir__ = lazy_exports(__name__, {
    "Criterion": "bar", "evaluate_criteria": "bar", "reference_model": "references", "Scorecard": "scorecard",
    "load_tasks": "run", "score_checkpoint": "run",
})
