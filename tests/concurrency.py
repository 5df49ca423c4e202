"""Concurrency in tests: one call made from two threads at once, and the child processes of
a test's subprocess, read from /proc (Linux): which exist, which are gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from equibench.errors import FolderInUseError


def twice_at_once(call: Callable[[], object]) -> list:
    """Run ``call`` in two threads started together; what each returned, or the
    FolderInUseError it raised."""
    outcomes = []

    def run() -> None:
        try:
            outcomes.append(call())
        except FolderInUseError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def children(pid: int) -> set[int]:
    """The pids of the processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (zombies count as gone)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for ``pids`` to end; those still running."""
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(pids)
