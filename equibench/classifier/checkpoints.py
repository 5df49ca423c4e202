"""The one checkpoint resolver of the classifiers and the evaluated methods: what a
``checkpoint`` parameter names (:func:`resolve_checkpoint`), the network it holds, loaded
once per process and checked to be the architecture asked for (:func:`shared_network`),
every estimator's own copy (:func:`load_model`), and the name-or-path + sha256 reference that
pickles and fit states record. Every bad case is a :class:`CheckpointError`, worded the same
whoever asked."""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path

from torch import nn

from ..errors import CheckpointError
from ..model import ARCHITECTURES, default_checkpoint, load_checkpoint
from ..model.checkpoint import packaged_checkpoint_dir, packaged_checkpoints

#: The architecture that ``checkpoint="default"`` means when no classifier class says one.
DEFAULT_ARCH = "equitabpfn"


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


def checkpoint_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a checkpoint file's bytes (computed once per version of the file)."""
    return _file_sha256(*_cache_key(path))


def resolve_checkpoint(checkpoint: str | os.PathLike, arch: str | None = None) -> Path:
    """The absolute path of the checkpoint file that ``checkpoint`` names:

    - ``"default"``: the packaged checkpoint of ``arch`` (EquiTabPFN's when ``arch`` is None);
    - an architecture, ``"equitabpfn"`` or ``"tabpfn-star"``: its packaged checkpoint;
    - a packaged checkpoint's name, with or without ``.pt`` (``"tabpfn-star-small"``);
    - any other string or path: a file written by ``equibench pretrain``.

    Names are looked up before paths (write ``./name`` for a file of that name here).
    """
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise CheckpointError(
            f"checkpoint must be 'default', a checkpoint name, a file path or a model object, got "
            f"{type(checkpoint).__name__}"
        )
    owner = f"{arch} " if arch else ""
    if isinstance(checkpoint, str):
        if not checkpoint.strip():
            raise CheckpointError(f"the {owner}checkpoint is empty; pass 'default', a packaged checkpoint's name or "
                                  "the path of a file written by `equibench pretrain`")
        if checkpoint == "default" or checkpoint in ARCHITECTURES:
            return default_checkpoint(checkpoint if checkpoint in ARCHITECTURES else arch or DEFAULT_ARCH).resolve()
        packaged = {name: path for path in packaged_checkpoints() for name in (path.stem, path.name)}
        if checkpoint in packaged:
            return packaged[checkpoint].resolve()
    path = Path(checkpoint).resolve()
    if path.is_dir():
        raise CheckpointError(f"the {owner}checkpoint {str(path)!r} is a folder, not a file; pass the checkpoint "
                              "file inside it (a pretraining output folder holds model.pt)")
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in packaged_checkpoints())) or "none here"
        raise CheckpointError(f"the {owner}checkpoint file {str(path)!r} does not exist; pass a file written by "
                              f"`equibench pretrain`, 'default' or a packaged checkpoint's name ({names})")
    return path


def check_architecture(model: nn.Module, arch: str, source: str | os.PathLike | None = None) -> nn.Module:
    """``model``, refused with a :class:`CheckpointError` unless it is an ``arch`` network."""
    held = getattr(model, "arch", type(model).__name__)
    if held != arch:
        where = f"checkpoint {str(source)!r}" if source is not None else "the model object"
        raise CheckpointError(f"{where} holds a {held} model, not {arch}; pass a {arch} checkpoint, or let "
                              "equibench.classifier_for(checkpoint) pick the classifier")
    return model


def shared_network(checkpoint, arch: str | None = None) -> nn.Module:
    """The network that ``checkpoint`` holds (a model object as it is, a file loaded once per
    process and shared by every caller: read it, never modify or move it), checked to be an
    ``arch`` network when ``arch`` is given."""
    if isinstance(checkpoint, nn.Module):
        return checkpoint if arch is None else check_architecture(checkpoint, arch)
    path = resolve_checkpoint(checkpoint, arch)
    network = _load_cached(*_cache_key(path))
    return network if arch is None else check_architecture(network, arch, path)


def checkpoint_reference(path: Path, sha256: str) -> dict:
    """How a fitted classifier names its checkpoint in a pickle or a fit state: a packaged
    checkpoint by file name (found again in any installation that ships the same file), any
    other file by absolute path; both with the sha256 of the file's bytes."""
    packaged = path.parent == packaged_checkpoint_dir().resolve()
    return {"packaged": path.name, "sha256": sha256} if packaged else {"path": str(path), "sha256": sha256}


def model_from_reference(reference: dict) -> tuple[nn.Module, Path]:
    """A private copy of the model a :func:`checkpoint_reference` names, checking the file's
    sha256; returns it and the file it came from."""
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
    sha256 = checkpoint_sha256(path)
    if sha256 != reference["sha256"]:
        raise CheckpointError(
            f"the {where} has changed since the classifier was fitted (sha256 {sha256[:12]}..., expected "
            f"{reference['sha256'][:12]}...); install the equibench version it was fitted with, or refit"
        )
    return copy.deepcopy(shared_network(path)), path


def load_model(checkpoint, arch: str) -> tuple[nn.Module, dict | None]:
    """A private copy of the ``arch`` network that a classifier's ``checkpoint`` parameter
    names (see :func:`resolve_checkpoint`; or a model object), and the reference to its
    checkpoint file (None for a model object)."""
    if isinstance(checkpoint, nn.Module):
        return copy.deepcopy(check_architecture(checkpoint, arch)), None
    path = resolve_checkpoint(checkpoint, arch)
    return copy.deepcopy(shared_network(path, arch)), checkpoint_reference(path, checkpoint_sha256(path))
