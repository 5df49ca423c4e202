"""The checkpoint file format: config + weights + model card in one ``torch.save`` file.

A checkpoint is a dict of plain Python values and tensors, so it loads with
``torch.load(weights_only=True)`` (no pickled code is executed)::

    {"format": "equibench-checkpoint", "format_version": 1, "arch": "equitabpfn",
     "config": {...ModelConfig...}, "card": {...ModelCard...},
     "state_dict": {name: tensor}, "weights_dtype": "float16"}
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch
from torch import nn

from ..atomic_files import atomic_write
from ..errors import CheckpointError, InvalidInputError
from .config import ARCHITECTURES, SIZES, ModelConfig
from .equitabpfn import EquiTabPFN
from .tabpfn_star import TabPFNStar

FORMAT = "equibench-checkpoint"
FORMAT_VERSION = 1
_MODEL_CLASSES = {network.arch: network for network in (EquiTabPFN, TabPFNStar)}
_WEIGHT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class ModelCard:
    """What a checkpoint is and how it was made."""

    arch: str
    size: str
    n_parameters: int = 0
    prior: dict = field(default_factory=dict)
    # the settings of the invocation that wrote this checkpoint: after a resume, its "steps" is
    # that invocation's step bound and its "device" that invocation's; the trained total is `steps`
    training: dict = field(default_factory=dict)
    steps: int = 0  # steps trained since the start of the run (and of any run it was initialised from)
    datasets_seen: int = 0
    wall_time_s: float = 0.0
    hardware: str = ""  # one line: each hardware with the steps it trained
    hardware_history: list = field(default_factory=list)  # [{"hardware", "first_step", "last_step"}]
    metrics: dict = field(default_factory=dict)
    command: str = ""  # the command of the invocation that wrote this checkpoint
    seed: int | None = None
    equibench_version: str = ""
    created: str = ""
    notes: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> ModelCard:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def build_model(arch: str, config: ModelConfig) -> nn.Module:
    """A freshly initialised model of the given architecture."""
    try:
        return _MODEL_CLASSES[arch](config)
    except KeyError:
        raise InvalidInputError(f"unknown architecture {arch!r}; choose one of {list(ARCHITECTURES)}") from None


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def save_checkpoint(
    model: nn.Module,
    path: str | os.PathLike,
    card: ModelCard,
    weights_dtype: str = "float32",
) -> Path:
    """Write ``model`` and its card to ``path`` atomically (temp file + rename)."""
    return atomic_torch_save(checkpoint_payload(model, card, weights_dtype), path)


def checkpoint_payload(model: nn.Module, card: ModelCard, weights_dtype: str = "float32") -> dict:
    """What :func:`save_checkpoint` writes: a dict of plain values and tensors."""
    if weights_dtype not in _WEIGHT_DTYPES:
        raise InvalidInputError(f"weights_dtype must be one of {list(_WEIGHT_DTYPES)}, got {weights_dtype!r}")
    card = dataclasses.replace(card, arch=model.arch, n_parameters=count_parameters(model))
    state = {
        name: tensor.detach().to("cpu", _WEIGHT_DTYPES[weights_dtype]).clone()
        for name, tensor in model.state_dict().items()
    }
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "arch": model.arch,
        "config": model.config.to_dict(),
        "card": dataclasses.asdict(card),
        "state_dict": state,
        "weights_dtype": weights_dtype,
    }


def atomic_torch_save(payload, path: str | os.PathLike) -> Path:
    """``torch.save`` through :func:`atomic_write`."""
    return atomic_write(path, lambda tmp: torch.save(payload, tmp))


def _read_payload(path: Path) -> dict:
    if path.is_dir():
        raise CheckpointError(
            f"checkpoint {str(path)!r} is a folder, not a file; pass the checkpoint file inside it (a pretraining "
            "output folder holds model.pt)"
        )
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint file {str(path)!r} does not exist; pass the path of a file written "
            "by `equibench pretrain`, or see `equibench info` for the packaged checkpoints"
        )
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a damaged file
        reason = str(error).strip().split(". ")[0].split("\n")[0]  # torch's messages run on for lines
        raise CheckpointError(
            f"checkpoint file {str(path)!r} is not a readable checkpoint ({type(error).__name__}: "
            f"{reason}); the file may be truncated or corrupt: re-copy or regenerate it"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{str(path)!r} is a torch file but not an equibench checkpoint "
            f"(expected format {FORMAT!r})"
        )
    if payload.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{str(path)!r} has checkpoint format version {payload.get('format_version')!r}; "
            f"this equibench reads version {FORMAT_VERSION}: upgrade equibench or regenerate it"
        )
    return payload


def check_finite_weights(state: dict, what: str) -> None:
    """Refuse weights (a state dict) with NaN or infinite values: ``what`` (e.g. "checkpoint 'x.pt'")
    holds a diverged training."""
    non_finite = sorted(name for name, tensor in state.items()
                        if tensor.is_floating_point() and not torch.isfinite(tensor).all())
    if non_finite:
        raise CheckpointError(
            f"{what} holds NaN or infinite weights ({', '.join(non_finite[:3])}"
            f"{', ...' if len(non_finite) > 3 else ''}): its training diverged; use an earlier checkpoint or retrain "
            "with a lower learning rate"
        )


def load_checkpoint(path: str | os.PathLike) -> tuple[nn.Module, ModelCard]:
    """Load a model (float32, eval mode, on CPU) and its card, validating the file."""
    if not str(path).strip():
        raise CheckpointError("the checkpoint path is empty; pass the path of a file written by `equibench pretrain`")
    path = Path(path)
    payload = _read_payload(path)
    try:
        config = ModelConfig.from_dict(payload["config"])
        card = ModelCard.from_dict(payload["card"])
        model = build_model(payload["arch"], config)
        state = payload["state_dict"]
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {str(path)!r} has an invalid header: {error}") from error
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(
        name for name in set(expected) & set(state) if tuple(expected[name].shape) != tuple(state[name].shape)
    )
    if missing or unexpected or wrong_shape:
        raise CheckpointError(
            f"checkpoint {str(path)!r} does not match its {payload['arch']} config: "
            f"missing weights {missing[:5]}, unexpected weights {unexpected[:5]}, "
            f"wrong shapes {wrong_shape[:5]}; the file was written by a different model version"
        )
    check_finite_weights(state, f"checkpoint {str(path)!r}")
    model.load_state_dict({name: tensor.float() for name, tensor in state.items()})
    if card.arch != payload["arch"]:
        raise CheckpointError(
            f"checkpoint {str(path)!r}: model card says arch {card.arch!r} but weights are {payload['arch']!r}"
        )
    return model.eval(), card


def read_card(path: str | os.PathLike) -> ModelCard:
    """The model card of a checkpoint, validated like :func:`load_checkpoint`."""
    return load_checkpoint(path)[1]


# ---------------------------------------------------------------------------
# Packaged checkpoints (``<arch>-<size>.pt`` files installed inside equibench.model)

def packaged_checkpoint_dir() -> Path:
    return Path(str(resources.files(__package__)))


def packaged_checkpoints() -> list[Path]:
    """Checkpoint files shipped with this installation, sorted by name."""
    directory = packaged_checkpoint_dir()
    return sorted(directory.glob("*.pt")) if directory.is_dir() else []


def default_checkpoint(arch: str) -> Path:
    """The largest packaged checkpoint of ``arch`` (named ``<arch>-<size>.pt``)."""
    if arch not in ARCHITECTURES:
        raise InvalidInputError(f"unknown architecture {arch!r}; choose one of {list(ARCHITECTURES)}")
    available = {path.stem: path for path in packaged_checkpoints()}
    for size in reversed(list(SIZES)):
        path = available.get(f"{arch}-{size}")
        if path is not None:
            return path
    raise CheckpointError(
        f"no pretrained {arch} checkpoint ships with this installation of equibench yet "
        f"(looked in {str(packaged_checkpoint_dir())!r}). Pass checkpoint=PATH to a file written "
        "by `equibench pretrain`, or a model object."
    )
