"""Pretraining on the synthetic prior: AdamW with a cosine, warm-up-stable-decay or
schedule-free learning rate, gradient clipping, cross-entropy on test rows, an optional
short-to-long curriculum of rows per dataset, periodic validation, atomic resumable
checkpoints and multi-process data parallelism (launch with ``torchrun``).

Modules, each with one job:

* ``config``: :class:`TrainConfig`, the prior of each step, what a resume may change
* ``recipe``: a run's settings as a TOML file; the shipped ones are in ``recipes/``
* ``loss``: the masked test-row cross-entropy of a prior batch
* ``loop``: :func:`~equibench.pretrain.loop.train`, the step loop over a stream of prior batches
* ``prefetch``: that stream drawn ahead by worker processes on the CPU
* ``run``: :func:`pretrain`, one invocation of a run around that loop
* ``run_dir``: the run folder (file names, log, saved state, model.pt rebuilt from it)
* ``state_file``: the saved training state, whole or in parts under a size cap
* ``flops``: the model FLOPs of a training step (for model FLOP utilisation)
* ``distributed``: torchrun's processes
* ``optim``: optimisers and learning-rate schedules
* ``validation``: held-out prior metrics and bundled-dataset accuracy
* ``curves``: training-curve figures from run folders
"""

from ..errors import NonFiniteLossError
from .config import TrainConfig, prior_at
from .curves import plot_training_curves, read_lineage, read_log
from .loss import batch_loss, forward_batch, masked_test_loss
from .optim import SCHEDULES, build_optimizer, evaluation_weights
from .recipe import Recipe, load_recipe, recipe_names
from .run import PretrainOutcome, pretrain
from .run_dir import CONFIG_FILE, LOG_FILE, MODEL_FILE, STATE_FILE, model_file
from .scorecard import Criterion, Scorecard, evaluate_criteria, score_checkpoint
from .validation import BUNDLED_DATASETS, bundled_accuracy, prior_metrics, validation_prior_batches

__all__ = [
    "BUNDLED_DATASETS", "CONFIG_FILE", "LOG_FILE", "MODEL_FILE", "NonFiniteLossError", "PretrainOutcome", "Recipe", "SCHEDULES",
    "STATE_FILE", "TrainConfig", "batch_loss", "build_optimizer", "bundled_accuracy",
    "evaluation_weights", "forward_batch", "load_recipe", "masked_test_loss", "model_file", "plot_training_curves", "pretrain", "prior_at",
    "prior_metrics", "read_lineage", "read_log", "recipe_names", "validation_prior_batches",
    "Criterion", "Scorecard", "evaluate_criteria", "score_checkpoint",
]
