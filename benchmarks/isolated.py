"""One configuration per fresh interpreter, so that its peak memory is the process's own.

A script that uses this runs itself again as ``script --one JSON`` for each configuration;
the child prints its result as one JSON line.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    """This process's resident-memory high-water mark."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return peak_rss_mb()


def run_isolated(script: str, spec: dict, env: dict | None = None) -> dict:
    """``script --one JSON(spec)`` in a fresh interpreter (with ``env``, else this one's
    environment): its result, or ``{"error": last stderr line}``."""
    done = subprocess.run([sys.executable, script, "--one", json.dumps(spec)], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(result: dict, key: str, spec: str) -> str:
    """``result[key]`` formatted for a table, or the run's error where it has none."""
    return format(result[key], spec) if key in result else result.get("error", "")
