"""The official checkpoint file, read without running code from it.

The authors' training writes ``artifacts/ckpt/last.pickle`` with ``pickle.dump`` of
``{"model": state_dict, "optimizer": ..., "scheduler": ..., "epoch": ...}``. A pickle can
name any function to call; this reader's unpickler admits only the few that rebuild tensors
(``torch._utils._rebuild_tensor_v2``, ``_rebuild_parameter``, and ``torch.storage._load_from_bytes``,
whose bytes are read with ``torch.load(weights_only=True)``) and plain containers. Any other
class named in the file (an optimizer or scheduler object, say) becomes an inert stand-in
whose code never runs; the model's weights must not contain one. A file that ``torch.save``
wrote (a zip archive) is read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path

import torch

from ..errors import CheckpointError, first_line

#: Prefixes that DistributedDataParallel (``module.``) and ``torch.compile`` (``_orig_mod.``) add.
KEY_PREFIXES = ("module.", "_orig_mod.")


def _load_storage_bytes(data: bytes):
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    return data  # the tensor, without making it a Parameter


_ADMITTED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch.storage", "_load_from_bytes"): _load_storage_bytes,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
}


class Refused:
    """Stands for an object of a class the unpickler does not admit; holds nothing of it."""

    refused = ""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):  # a refused dict-like class: its items are dropped too
        pass

    def append(self, item):  # a refused list-like class
        pass

    def extend(self, items):
        pass


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        admitted = _ADMITTED.get((module, name))
        if admitted is not None:
            return admitted
        return type(name, (Refused,), {"refused": f"{module}.{name}"})


def _state_dict_of(payload, path: Path) -> dict:
    """The model's state dict inside what the file held."""
    if isinstance(payload, dict) and "model" in payload:
        payload = payload["model"]
    elif isinstance(payload, (tuple, list)) and payload:
        payload = payload[0]  # (state_dict, ...) as torch.save'd runs of the authors' older code
    if isinstance(payload, Refused):
        raise CheckpointError(f"the model entry of {str(path)!r} is a {payload.refused} object, which this reader does "
                              "not build (tensors and plain containers only); it is not a checkpoint it converts")
    if not isinstance(payload, dict) or not payload:
        raise CheckpointError(
            f"{str(path)!r} does not hold a model state dict (expected a dict with a 'model' entry, as the authors' "
            "artifacts/ckpt/last.pickle); pass that file"
        )
    bad = sorted(str(key) for key, value in payload.items() if not (isinstance(key, str) and torch.is_tensor(value)))
    if bad:
        raise CheckpointError(f"the model state dict in {str(path)!r} holds entries that are not named tensors: "
                              f"{bad[:5]}; it is not a checkpoint this conversion reads")
    return dict(payload)


def strip_prefixes(state: dict) -> dict:
    """Weight names without the ``module.`` / ``_orig_mod.`` prefixes of DDP and torch.compile."""
    stripped = {}
    for name, value in state.items():
        while name.startswith(KEY_PREFIXES):
            name = name.split(".", 1)[1]  # each prefix is one dotted component
        if name in stripped:
            raise CheckpointError(f"the checkpoint holds weight {name!r} twice (with and without a prefix)")
        stripped[name] = value
    return stripped


def read_official_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The model weights of an official checkpoint file, by official name, prefixes stripped,
    on the CPU. Never runs code named by the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"official checkpoint file {str(path)!r} does not exist; pass the run's "
                              "artifacts/ckpt/last.pickle")
    try:
        if zipfile.is_zipfile(path):
            payload = torch.load(path, map_location="cpu", weights_only=True)
        else:
            with open(path, "rb") as stream:
                payload = _RestrictedUnpickler(stream).load()
    except Exception as error:  # pickle and torch raise many types for a damaged or foreign file
        raise CheckpointError(f"{str(path)!r} is not a readable checkpoint ({first_line(error)}); "
                              "re-download it") from error
    return strip_prefixes(_state_dict_of(payload, path))
