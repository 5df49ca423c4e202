"""An exclusive lock on an output folder: two equibench processes never write one folder at once.

    DIR/.equibench.lock         the lock file (an OS lock through ``filelock``; a killed
                                holder's lock is released by the OS)
    DIR/.equibench.lock.json    who holds it: pid, host, command, since when
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from .atomic_files import atomic_write_text
from .errors import FolderInUseError

LOCK_FILE = ".equibench.lock"
HOLDER_FILE = ".equibench.lock.json"


def _holder(folder: Path) -> str:
    try:
        holder = json.loads((folder / HOLDER_FILE).read_text())
        return (f"process {holder['pid']} on {holder['host']} (`{holder['command']}`, started "
                f"{holder['started']})")
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (it has not recorded itself yet)"


class HeldLock:
    """A held folder lock; set ``remove_folder`` to remove the (then empty) folder on release."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.remove_folder = False


@contextmanager
def locked_folder(folder: str | os.PathLike,
                  advice: str = "wait for it to finish, stop it, or choose another output folder") -> Iterator[HeldLock]:
    """Hold ``folder``'s lock (creating the folder) or raise FolderInUseError at once, naming
    the process that holds it and ending with ``advice``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / LOCK_FILE, timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise FolderInUseError(f"{str(folder)!r} is in use by {_holder(folder)}; {advice}") from None
    held = HeldLock(folder)
    try:
        record = {
            "pid": os.getpid(), "host": socket.gethostname(),
            "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        atomic_write_text(folder / HOLDER_FILE, json.dumps(record) + "\n")
        yield held
    finally:
        (folder / HOLDER_FILE).unlink(missing_ok=True)
        lock.release()
        if held.remove_folder and not (folder / HOLDER_FILE).exists():  # unless taken over
            (folder / LOCK_FILE).unlink(missing_ok=True)
            with suppress(OSError):
                folder.rmdir()
