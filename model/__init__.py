"""EquiTabPFN and TabPFN* networks, their configuration and checkpoint format."""

from .checkpoint import (
    CheckpointError,
    ModelCard,
    build_model,
    count_parameters,
    default_checkpoint,
    load_checkpoint,
    packaged_checkpoints,
    read_card,
    save_checkpoint,
)
from .config import ARCHITECTURES, F_MAX, SIZES, TABPFN_STAR_MAX_CLASSES, ModelConfig, size_config
from .equitabpfn import EquiTabPFN
from .tabpfn_star import TabPFNStar, TooManyClassesError

__all__ = [
    "ARCHITECTURES",
    "F_MAX",
    "SIZES",
    "TABPFN_STAR_MAX_CLASSES",
    "CheckpointError",
    "EquiTabPFN",
    "ModelCard",
    "ModelConfig",
    "TabPFNStar",
    "TooManyClassesError",
    "build_model",
    "count_parameters",
    "default_checkpoint",
    "load_checkpoint",
    "packaged_checkpoints",
    "read_card",
    "save_checkpoint",
    "size_config",
]
