"""Atomic file writes: a reader, or a process killed mid-write, never sees a partial file.

Only the standard library is imported here, so that light modules (the download manifest,
the output-folder lock) can use it without loading torch.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path`` (named
    ``.<name>.XXXXXXXX.tmp``), flush it to disk, then rename it to ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except PermissionError:  # named for the file asked for, not its temporary sibling
        raise PermissionError(
            f"cannot write {str(path)!r}: the folder {str(path.parent)!r} is not writable; choose a writable place"
        ) from None
    os.close(handle)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as stream:
            os.fsync(stream.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text))
