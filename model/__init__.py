"""EquiTabPFN and TabPFN* networks, their configuration and checkpoint format."""

from .._lazy import lazy_exports

# Loaded on first use: ``equibench.model.config`` (sizes, ModelConfig) imports without torch.
_LAZY = {
    "CheckpointError": "checkpoint", "ModelCard": "checkpoint", "build_model": "checkpoint",
    "count_parameters": "checkpoint", "default_checkpoint": "checkpoint", "load_checkpoint": "checkpoint",
    "packaged_checkpoints": "checkpoint", "read_card": "checkpoint", "save_checkpoint": "checkpoint",
    "ARCHITECTURES": "config", "SIZES": "config", "ModelConfig": "config", "size_config": "config",
    "EquiTabPFN": "equitabpfn", "TabularPFN": "network", "TabPFNStar": "tabpfn_star",
    "TooManyClassesError": "tabpfn_star",
}

# The public names (docs/API.md); the others of _LAZY are importable but internal (the
# error classes' public home is equibench.errors).
__all__ = [
    "EquiTabPFN", "ModelCard", "ModelConfig", "SIZES", "TabPFNStar", "TabularPFN", "build_model", "default_checkpoint",
    "load_checkpoint", "packaged_checkpoints", "save_checkpoint", "size_config",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
