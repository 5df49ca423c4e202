"""The training state file (``train_state.pt``), whole or in parts under a size cap.

Whole, it is a ``torch.save`` file. With a cap (``max_bytes``) on a larger state, the saved
bytes are cut into ``train_state.pt.<digest>.part-000``, ``-001``, ... of at most ``max_bytes``
each, and ``train_state.pt`` becomes a small JSON index naming them with their sizes and
sha256 (``digest`` begins the sha256 of the whole state). Each file is written atomically,
the index last, so a kill at any instant leaves the previous complete state or the new one;
parts that the index does not name (the previous save's, or an interrupted one's) are deleted
after it is replaced. :func:`read` takes either form.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import torch

from ..atomic_files import atomic_write, atomic_write_text
from ..errors import InvalidInputError
from ..model.checkpoint import atomic_torch_save

INDEX_FORMAT = "equibench-train-state-parts"


def write(state: dict, path: Path, max_bytes: int | None = None) -> None:
    """Save ``state`` at ``path``: one file, or parts of at most ``max_bytes`` and their index."""
    if max_bytes is None:
        atomic_torch_save(state, path)
        _remove_parts(path, keep=set())
        return
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getbuffer()
    if len(data) <= max_bytes:
        atomic_write(path, lambda tmp: tmp.write_bytes(data))
        _remove_parts(path, keep=set())
        return
    digest = hashlib.sha256(data).hexdigest()
    parts = []
    for number, start in enumerate(range(0, len(data), max_bytes)):
        chunk = data[start:start + max_bytes]
        name = f"{path.name}.{digest[:16]}.part-{number:03d}"
        atomic_write(path.parent / name, lambda tmp, chunk=chunk: tmp.write_bytes(chunk))
        parts.append({"file": name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    index = {"format": INDEX_FORMAT, "bytes": len(data), "sha256": digest, "parts": parts}
    atomic_write_text(path, json.dumps(index, indent=1) + "\n")
    _remove_parts(path, keep={part["file"] for part in parts})


def read(path: Path) -> object:
    """The state saved at ``path`` (either form), on the CPU. A part that is missing or does not
    match the index raises InvalidInputError naming it."""
    with path.open("rb") as stream:
        is_index = stream.read(1) == b"{"
    if not is_index:
        return torch.load(path, map_location="cpu", weights_only=True)
    index = json.loads(path.read_text())
    if index.get("format") != INDEX_FORMAT:
        raise ValueError(f"a JSON file, but not an {INDEX_FORMAT} index")
    data = bytearray()
    for part in index["parts"]:
        part_path = path.parent / part["file"]
        if not part_path.is_file():
            raise InvalidInputError(
                f"{str(path)!r} is saved in parts and its part {part['file']!r} is missing; copy every "
                f"{path.name}.*.part-* file of that folder along with {path.name}"
            )
        chunk = part_path.read_bytes()
        if len(chunk) != part["bytes"] or hashlib.sha256(chunk).hexdigest() != part["sha256"]:
            raise InvalidInputError(
                f"part {str(part_path)!r} does not match its index {path.name} (size or sha256 differ): it is "
                "damaged or incomplete; copy it again from the folder that wrote it"
            )
        data += chunk
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def orphan_parts(path: Path) -> list[Path]:
    """Parts of a state saved at ``path`` when its index ``path`` itself is missing (lost or not
    copied), sorted; empty when the index exists or there are none."""
    return [] if path.exists() else sorted(path.parent.glob(f"{path.name}.*.part-*"))


def remove(path: Path) -> None:
    """Delete the state saved at ``path``, parts included."""
    path.unlink(missing_ok=True)
    _remove_parts(path, keep=set())


def _remove_parts(path: Path, keep: set[str]) -> None:
    for part in path.parent.glob(f"{path.name}.*.part-*"):
        if part.name not in keep:
            part.unlink(missing_ok=True)
