"""Model configuration: one dataclass for both architectures and the named sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ..errors import InvalidInputError

#: Features are zero-padded to this many columns before the covariate embedding.
F_MAX = 100
#: Number of one-hot target slots of the non-equivariant TabPFN* model.
TABPFN_STAR_MAX_CLASSES = 10

ARCHITECTURES = ("equitabpfn", "tabpfn-star")


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
    max_classes: int = TABPFN_STAR_MAX_CLASSES  # used by TabPFN* only
    #: Pre-LayerNorm blocks (``x + f(LN(x))``, a final LN before the decoder) instead of the
    #: paper's post-LayerNorm blocks; they tolerate higher learning rates.
    norm_first: bool = False
    #: RMS-normalise queries and keys per head before every attention (QK-norm).
    qk_norm: bool = False
    #: EquiTabPFN only: compute what the authors' released network computes (see
    #: docs/OFFICIAL_CHECKPOINT.md): its missing-value indicator (-1 NaN, +1 +inf, +2 -inf,
    #: standardised over the train and test rows of each call; +-inf kept as +-float max) and
    #: its decoder LayerNorm (eps 1.0).
    official: bool = False
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
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"ModelConfig.{f.name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise InvalidInputError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
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
