"""The ``--record`` flag the benchmark scripts share.

A script prints its results as one Markdown section (:func:`section`: a heading with the
script and the date, the machine, the exact command, then the tables) and, with
``--record``, appends that section to docs/BENCHMARKS.md (:func:`publish`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


def add_record_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", action="store_true", help="also append the results to docs/BENCHMARKS.md")


def machine() -> str:
    """CPU model, cores, torch threads, torch and Python versions, and the GPU if CUDA has one."""
    import torch

    from equibench.machine import cpu_name

    threads = torch.get_num_threads()
    text = (f"{cpu_name()}, {os.cpu_count()} cores, {threads} torch thread{'s' if threads != 1 else ''}, "
            f"torch {torch.__version__}, Python {platform.python_version()}")
    return text + (f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "")


def command(argv: list[str] | None = None) -> str:
    """The command that ran the script, without ``--record`` (that only decides where the text goes)."""
    argv = sys.argv if argv is None else argv
    words = ["python", f"benchmarks/{Path(argv[0]).name}", *(word for word in argv[1:] if word != "--record")]
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join(words)


def section(title: str, body: str, argv: list[str] | None = None, date: datetime.date | None = None) -> str:
    """``body`` under a ``##`` heading that names the script and the date (UTC), then the
    machine and the command."""
    argv = sys.argv if argv is None else argv
    date = date or datetime.datetime.now(datetime.timezone.utc).date()
    return (f"\n## {title} (`benchmarks/{Path(argv[0]).name}`), {date.isoformat()}\n\n"
            f"Machine: {machine()}. Command: `{command(argv)}`.\n\n{body.strip()}\n")


def publish(text: str, record: bool, path: Path = BENCHMARKS_MD) -> None:
    """Print ``text``; with ``record``, also append it to ``path`` (docs/BENCHMARKS.md)."""
    print(text)
    if record:
        with path.open("a") as handle:
            handle.write(text)
