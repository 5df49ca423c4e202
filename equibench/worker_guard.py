"""Worker processes that never outlive the process that started them.

A killed `equibench evaluate` or `pretrain` (SIGKILL, an OOM kill) cannot stop its workers
(evaluate's cells, the prior's batches drawn ahead), and a worker waiting for its next task
would wait for good. Neither loky's pool (which equibench uses) nor ``concurrent.futures``'
stops its workers then: with their parent SIGKILLed, two workers of either (one busy, one
idle) and the pool's resource tracker were all still running 20 s later. So each worker
watches its parent and exits when the parent is gone (within ``POLL_S``; the resource
tracker follows when the last worker is gone). A thread polling ``os.getppid()`` is the
portable way; Linux's ``PR_SET_PDEATHSIG`` would fire when the *thread* that started the
worker ends, and loky starts replacement workers from its own threads. No maintained library
does this for us: loky (joblib 1.6) and ``multiprocessing`` have no parent watch, and psutil
(not a dependency) only polls the same way (``Process.wait`` on a process not its child).
Ctrl-C reaches the whole process group: workers ignore it and the parent stops them (see
evaluate.backends.LocalBackend, pretrain.prefetch).
"""

from __future__ import annotations

import os
import signal
import threading
import time

#: Seconds between two looks at the parent process.
POLL_S = 1.0


def exit_with_parent(parent_pid: int) -> None:
    """In a worker: exit at once (status 1) when the process ``parent_pid`` is no longer its
    parent (it died and the worker was re-parented), and leave SIGINT to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="equibench-exit-with-parent", daemon=True).start()
