"""Pretraining on the synthetic prior: AdamW with a cosine, warm-up-stable-decay or
schedule-free learning rate, gradient clipping, cross-entropy on test rows, an optional
short-to-long curriculum of rows per dataset, periodic validation, atomic resumable
checkpoints and multi-process data parallelism (launch with ``torchrun``). docs/ARCHITECTURE.md
lists the modules.
"""

from .._lazy import lazy_exports
from ..errors import NonFiniteLossError as NonFiniteLossError  # re-exported

# Loaded on first use: the CLI reads TrainConfig's defaults without importing torch.
_LAZY = {
    "TrainConfig": "config", "prior_at": "config", "plot_training_curves": "curves",
    "batch_loss": "loss", "build_optimizer": "optim",
    "Recipe": "recipe", "load_recipe": "recipe", "recipe_names": "recipe",
    "PretrainOutcome": "run", "pretrain": "run",
    "MODEL_FILE": "run_dir", "STATE_FILE": "run_dir", "model_file": "run_dir",
    "BUNDLED_DATASETS": "validation",
}

# The public names (docs/API.md); the others of _LAZY are importable but internal.
__all__ = ["PretrainOutcome", "Recipe", "TrainConfig", "load_recipe", "plot_training_curves", "pretrain", "recipe_names"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
