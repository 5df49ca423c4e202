"""The networks behind the classifiers: checkpoint files loaded once per process (every
estimator gets its own copy) and the references that pickles and fit states record."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path

from torch import nn

from ..errors import CheckpointError, InvalidInputError
from ..model import default_checkpoint, load_checkpoint
from ..model.checkpoint import packaged_checkpoint_dir, packaged_checkpoints


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> nn.Module:
    # mtime and size are part of the key so that a rewritten file is loaded again
    return load_checkpoint(path)[0]


@functools.lru_cache(maxsize=8)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _cache_key(path: str | os.PathLike) -> tuple[str, int, int]:
    stat = Path(path).stat()
    return str(path), stat.st_mtime_ns, stat.st_size


def shared_network(path: str | os.PathLike) -> nn.Module:
    """The network of checkpoint file ``path``, loaded once per process and shared by every
    caller: read it, never modify or move it (estimators take their own copy)."""
    return _load_cached(*_cache_key(path))


def _load_file(path: Path) -> tuple[nn.Module, str]:
    """A private copy of the model in checkpoint file ``path`` and the file's sha256."""
    key = _cache_key(path)
    return copy.deepcopy(_load_cached(*key)), _file_sha256(*key)


def checkpoint_reference(path: Path, sha256: str) -> dict:
    """How a fitted classifier names its checkpoint in a pickle or a fit state: a packaged
    checkpoint by file name (found again in any installation that ships the same file), any
    other file by absolute path; both with the sha256 of the file's bytes."""
    packaged = path.parent == packaged_checkpoint_dir().resolve()
    return {"packaged": path.name, "sha256": sha256} if packaged else {"path": str(path), "sha256": sha256}


def model_from_reference(reference: dict) -> tuple[nn.Module, Path]:
    """Load the model a :func:`checkpoint_reference` names, checking the file's sha256;
    returns it and the file it came from."""
    if "packaged" in reference:
        available = {path.name: path.resolve() for path in packaged_checkpoints()}
        path = available.get(reference["packaged"])
        where = f"packaged checkpoint {reference['packaged']!r}"
        if path is None:
            raise CheckpointError(
                f"the saved classifier uses the {where}, which this installation of equibench does not ship "
                f"(it has {sorted(available) or 'none'}); install the equibench version it was fitted with"
            )
    else:
        path = Path(reference["path"])
        where = f"checkpoint file {reference['path']!r}"
        if not path.is_file():
            raise CheckpointError(
                f"the saved classifier uses the {where}, which does not exist here; pass checkpoint=PATH "
                "to load_from_fit_state with a copy of that file"
            )
    model, sha256 = _load_file(path)
    if sha256 != reference["sha256"]:
        raise CheckpointError(
            f"the {where} has changed since the classifier was fitted (sha256 {sha256[:12]}..., expected "
            f"{reference['sha256'][:12]}...); install the equibench version it was fitted with, or refit"
        )
    return model, path


def load_model(checkpoint, arch: str, owner: str) -> tuple[nn.Module, dict | None]:
    """A private copy of the ``arch`` network that the ``checkpoint`` parameter of estimator
    class ``owner`` names ("default", a path or a model object), and the reference to its
    checkpoint file (None for a model object)."""
    reference = None
    if isinstance(checkpoint, nn.Module):
        model = copy.deepcopy(checkpoint)
    else:
        if isinstance(checkpoint, str) and checkpoint == "default":
            checkpoint = default_checkpoint(arch)
        if isinstance(checkpoint, str) and not checkpoint.strip():
            raise CheckpointError("checkpoint is an empty string; pass 'default' or the path of a checkpoint file")
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise InvalidInputError(
                f"checkpoint must be 'default', a file path or a model object, got {type(checkpoint).__name__}"
            )
        path = Path(checkpoint).resolve()
        if path.is_dir():
            raise CheckpointError(
                f"checkpoint {str(path)!r} is a folder, not a file; pass the checkpoint file inside it (a "
                "pretraining output folder holds model.pt)"
            )
        if not path.is_file():
            raise CheckpointError(
                f"checkpoint file {str(path)!r} does not exist; pass the path of a file written by "
                "`equibench pretrain`, or checkpoint='default' for the packaged one"
            )
        model, sha256 = _load_file(path)
        reference = checkpoint_reference(path, sha256)
    if getattr(model, "arch", None) != arch:
        raise InvalidInputError(
            f"{owner} needs a {arch!r} model but the checkpoint holds "
            f"{getattr(model, 'arch', type(model).__name__)!r}; use the matching classifier"
        )
    return model, reference
