"""Start-up time of the listing commands against ``equibench --help``, as whole processes.

Each round runs every command once (in turn, so that a drift of the machine's speed hits all
alike); the table gives each command's median wall time and the median of its per-round
ratio to ``--help`` of the same round. With ``--against REF`` the same commands also run
from the ``equibench/`` package of the git commit REF (exported to a temporary folder and put
first on PYTHONPATH), for a before/after in one run.

    python benchmarks/cli_startup.py                       # print the table
    python benchmarks/cli_startup.py --against HEAD --record   # and append it to docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from recording import add_record_flag, publish, section

REPOSITORY = Path(__file__).resolve().parents[1]
COMMANDS = (("--help",), ("suites",), ("suites", "--json"), ("methods",), ("--version",))


def wall_seconds(args: tuple[str, ...], env: dict[str, str], cwd: Path) -> float:
    """Seconds ``equibench ARGS`` takes from start to exit (its output thrown away)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "equibench", *args], env=env, cwd=cwd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def exported_package(ref: str, into: Path) -> Path:
    """The ``equibench/`` folder of commit ``ref``, written below ``into``; returns ``into``."""
    archive = subprocess.run(["git", "archive", ref, "equibench"], cwd=REPOSITORY, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(variants: dict[str, dict[str, str]], rounds: int, cwd: Path) -> dict[tuple[str, tuple], list[float]]:
    """(variant, command) -> wall seconds of each round, after one unmeasured warm-up round; run
    in the empty folder ``cwd`` (so that no source tree there shadows the installed package)."""
    times: dict[tuple[str, tuple], list[float]] = {(name, args): [] for name in variants for args in COMMANDS}
    for round_number in range(rounds + 1):
        for name, env in variants.items():
            for args in COMMANDS:
                seconds = wall_seconds(args, env, cwd)
                if round_number:
                    times[name, args].append(seconds)
    return times


def table(times: dict[tuple[str, tuple], list[float]], variants: list[str]) -> str:
    lines = ["| code | command | median wall (s) | median ratio to `--help` |", "|---|---|---:|---:|"]
    for name in variants:
        help_times = times[name, ("--help",)]
        for args in COMMANDS:
            ratios = [mine / help_ for mine, help_ in zip(times[name, args], help_times)]
            lines.append(f"| {name} | `equibench {' '.join(args)}` | {statistics.median(times[name, args]):.3f} | "
                         f"{statistics.median(ratios):.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (after one warm-up round)")
    parser.add_argument("--against", metavar="REF", help="also time the equibench package of this git commit")
    add_record_flag(parser)
    args = parser.parse_args()
    base = {**os.environ, "TERMINAL_WIDTH": "100"}
    base.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as folder:
        variants = {"this tree": base}
        if args.against:
            revision = subprocess.run(["git", "rev-parse", "--short", args.against], cwd=REPOSITORY, text=True,
                                      capture_output=True, check=True).stdout.strip()
            package = exported_package(args.against, Path(folder) / "package")
            variants = {f"`{revision}`": {**base, "PYTHONPATH": str(package)}, **variants}
        (Path(folder) / "cwd").mkdir()
        times = measure(variants, args.rounds, Path(folder) / "cwd")
    body = (f"{args.rounds} rounds of every command as a fresh process (`python -m equibench ...`), after a warm-up "
            f"round; the ratio is taken round by round.\n\n{table(times, list(variants))}")
    publish(section("CLI start-up", body), args.record)


if __name__ == "__main__":
    main()
