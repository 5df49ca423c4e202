"""``DIR/equibench-download.json``: what `equibench download` wrote into an OpenML cache.

    files   path (relative to DIR/org/openml/www) -> {"sha256", "bytes"} of every file it wrote
    tasks   task id -> {"dataset_id", "name", "rows", "features", "classes", "files": [paths]}
            of every task it found complete (downloaded, or already there and checked)

Files of a cache that are not in ``files`` were put there by someone else: equibench never
replaces them. The record is replaced atomically, so a kill never leaves it half written.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic_files import atomic_write_text
from ..errors import InvalidInputError

MANIFEST = "equibench-download.json"


def file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Manifest:
    path: Path
    files: dict[str, dict] = field(default_factory=dict)
    tasks: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, cache: str | os.PathLike) -> Manifest:
        path = Path(cache) / MANIFEST
        if not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text())
            return cls(path, dict(data["files"]), dict(data["tasks"]))
        except (ValueError, KeyError, TypeError) as error:
            raise InvalidInputError(
                f"{str(path)!r} is not a download record of equibench ({error}); move it away and rerun"
            ) from None

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps({"files": self.files, "tasks": self.tasks}, indent=1, sort_keys=True) + "\n")
