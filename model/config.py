"""Model configuration: one dataclass for both architectures and the named sizes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from ..errors import InvalidInputError

#: Features are zero-padded to this many columns before the covariate embedding.
F_MAX = 100

ARCHITECTURES = ("equitabpfn", "tabpfn-star")
ARCH_ALIASES = {"tabpfn": "tabpfn-star"}  # other names `equibench pretrain --arch` takes
#: ``ModelConfig.missing_indicator``: equibench's own, or the authors' released network's.
MISSING_INDICATORS = ("codes", "standardised")
#: What the authors' released EquiTabPFN computes differently from equibench's default.
RELEASED_NETWORK = {"missing_indicator": "standardised", "decoder_norm_eps": 1.0}


@dataclass(frozen=True)
class ModelConfig:
    """Size of a model.

    ``n_layers`` counts EquiTabPFN layers, each made of one component-attention block and
    one datapoint-attention block. TabPFN* has ``2 * n_layers`` datapoint-attention
    blocks so that both architectures have comparable parameter counts.
    """

    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    mlp_hidden: int = 256
    decoder_hidden: int = 64
    f_max: int = F_MAX
    max_classes: int = 10  # TabPFN* only: the slots of its one-hot target and of its output
    #: Pre-LayerNorm blocks (``x + f(LN(x))``, a final LN before the decoder) instead of the
    #: paper's post-LayerNorm blocks; they tolerate higher learning rates.
    norm_first: bool = False
    #: RMS-normalise queries and keys per head before every attention (QK-norm).
    qk_norm: bool = False
    #: EquiTabPFN only: how missing values reach the covariate encoder. "codes": per cell, 1 for
    #: NaN, +-2 for +-inf, values 0 there. "standardised" (the authors' released network, see
    #: docs/OFFICIAL_CHECKPOINT.md): codes -1 NaN, +1 +inf, +2 -inf standardised over the train
    #: and test rows of each call, +-inf kept as +-float max; a cached train side then cannot
    #: serve test rows with NaN or inf.
    missing_indicator: str = "codes"
    #: EquiTabPFN only: the epsilon of the decoder's LayerNorm (the released network's is 1.0).
    decoder_norm_eps: float = 1e-5
    #: EquiTabPFN only: class tokens per row are max(min_class_slots, K); the extra "ghost"
    #: classes (all-zero one-hot) take part in attention and in the decoder's scale, and are
    #: dropped from the output. 1: no ghost classes; the official checkpoint uses 10.
    min_class_slots: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise InvalidInputError(f"ModelConfig.{f.name} must be true or false, got {value!r}")
            elif f.type == "str":
                if value not in MISSING_INDICATORS:
                    raise InvalidInputError(f"ModelConfig.{f.name} must be one of {list(MISSING_INDICATORS)}, "
                                            f"got {value!r}")
            elif f.type == "float":
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < math.inf:
                    raise InvalidInputError(f"ModelConfig.{f.name} must be a positive number, got {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"ModelConfig.{f.name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise InvalidInputError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def computes_released_network(self) -> bool:
        """Whether it computes what the authors' released EquiTabPFN computes (the settings
        ``equibench convert-official`` writes: :data:`RELEASED_NETWORK`)."""
        return all(getattr(self, name) == value for name, value in RELEASED_NETWORK.items())

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        """The configuration a checkpoint stores."""
        return dataclass_from_dict(cls, data)


def dataclass_from_dict(cls, data: dict):
    """``cls(**data)``, refusing keys that are not fields of the dataclass ``cls``."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInputError(f"unknown {cls.__name__} fields {unknown}; known fields: {sorted(known)}")
    return cls(**data)


#: Named sizes. ``base`` is the paper's model (d=512, 4 heads, 6 layers, ~25M parameters).
SIZES: dict[str, ModelConfig] = {
    "tiny": ModelConfig(d_model=32, n_heads=2, n_layers=2, mlp_hidden=64, decoder_hidden=16),
    "small": ModelConfig(d_model=128, n_heads=4, n_layers=4, mlp_hidden=256, decoder_hidden=64),
    "medium": ModelConfig(d_model=256, n_heads=4, n_layers=6, mlp_hidden=512, decoder_hidden=64),
    "base": ModelConfig(d_model=512, n_heads=4, n_layers=6, mlp_hidden=1024, decoder_hidden=64),
}


def size_config(size: str, **overrides) -> ModelConfig:
    """The configuration of a named size, optionally with some fields replaced."""
    try:
        config = SIZES[size]
    except KeyError:
        raise InvalidInputError(f"unknown model size {size!r}; choose one of {list(SIZES)}") from None
    return replace(config, **overrides) if overrides else config
