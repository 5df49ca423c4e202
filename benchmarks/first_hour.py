"""A newcomer's first hour, checked and timed: the README's three main commands, verbatim, in
a fresh shallow clone, with a small offline OpenML cache.

    python benchmarks/first_hour.py --openml-cache CACHE [--tasks 7] [--record]

The script clones this repository (``git clone --depth 1``, as the README says), copies the
given tasks of CACHE (default: task 7, audiology, the smallest task of ``gt10``) into a fresh
cache folder, and runs in the clone, exactly as written in the README:

    equibench pretrain
    equibench evaluate --suite gt10 --openml-cache <the small cache>
    equibench report

It checks that each exits 0, that each prints what the README promises (pretrain: how to use
the model; evaluate: the end-of-run summary, the tasks missing from the cache and the next
command; report: the folders it read), and that no tracked file of the clone was modified.
It prints the wall and CPU time of each command; ``--record`` adds them to
docs/BENCHMARKS.md. The equibench that runs is the one installed in this Python (for the
clone's own code, install it: ``.ci/run`` installs a clean clone from scratch).
Exit status: 0 every check passed, 1 a check failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: The smallest task of gt10 (audiology: 226 rows, 24 classes): all methods and folds in minutes.
DEFAULT_TASKS = ("7",)


@dataclass(frozen=True)
class Step:
    """One of the README's commands and what its output must contain."""

    title: str
    arguments: tuple[str, ...]
    expected: tuple[str, ...]


@dataclass(frozen=True)
class StepResult:
    step: Step
    exit_code: int
    wall_s: float
    cpu_s: float
    output: str

    @property
    def missing(self) -> list[str]:
        """The expected phrases the command did not print."""
        return [phrase for phrase in self.step.expected if phrase not in self.output]


def readme_steps(cache: Path) -> list[Step]:
    """The README's three main commands, with the small cache as its ``--openml-cache DIR``."""
    return [
        Step("equibench pretrain", ("pretrain",), ("EquiTabPFNClassifier(checkpoint=", "equibench score")),
        Step("equibench evaluate --suite gt10 --openml-cache DIR",
             ("evaluate", "--suite", "gt10", "--openml-cache", str(cache)),
             ("missing:", "equibench download", "next:", "equitabpfn")),
        Step("equibench report", ("report",), ("results/demo", "results/gt10", "results/le10")),
    ]


def small_cache(source: Path, task_ids: tuple[str, ...], target: Path) -> Path:
    """A fresh openml cache at ``target`` holding only ``task_ids`` of ``source`` (read, never written)."""
    from equibench.tasks.cache_check import _task_description, dataset_file, server_dir, task_file

    for task_id in task_ids:
        task_dir = server_dir(source) / task_file(task_id, "")
        if not (task_dir / "task.xml").is_file():
            raise SystemExit(f"error: task {task_id} is not in the cache {source}; choose --tasks among its tasks")
        dataset_id, _, _ = _task_description(task_dir / "task.xml")
        shutil.copytree(task_dir, server_dir(target) / task_file(task_id, ""))
        shutil.copytree(server_dir(source) / dataset_file(dataset_id, ""), server_dir(target) / dataset_file(dataset_id, ""))
    return target


def shallow_clone(repository: Path, target: Path) -> Path:
    """``git clone --depth 1`` of the repository's committed HEAD."""
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", repository.as_uri(), str(target)], check=True)
    return target


def tracked_changes(clone: Path) -> list[str]:
    """Tracked files of the clone that differ from its commit (``git status``, untracked ignored)."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone, check=True,
                            capture_output=True, text=True).stdout
    return status.splitlines()


def run_step(step: Step, clone: Path) -> StepResult:
    """Run one command in the clone as a user would, timing its wall and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    environment = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    completed = subprocess.run([sys.executable, "-m", "equibench", *step.arguments], cwd=clone, env=environment,
                               capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return StepResult(step, completed.returncode, wall, cpu, completed.stdout + completed.stderr)


def first_hour(openml_cache: Path, task_ids: tuple[str, ...], work_dir: Path, log=print) -> list[StepResult]:
    """Clone, build the small cache, run the three commands; the results of each command."""
    clone = shallow_clone(REPOSITORY, work_dir / "clone")
    cache = small_cache(openml_cache, task_ids, work_dir / "openml-cache")
    results = []
    for step in readme_steps(cache):
        log(f"running: {step.title}")
        results.append(run_step(step, clone))
    return results


def problems(results: list[StepResult], clone: Path) -> list[str]:
    """Every failed check, one line each."""
    found = []
    for result in results:
        if result.exit_code != 0:
            found.append(f"{result.step.title}: exit {result.exit_code}\n{result.output[-3000:]}")
        for phrase in result.missing:
            found.append(f"{result.step.title}: did not print {phrase!r}")
    found.extend(f"tracked file modified: {line}" for line in tracked_changes(clone))
    return found


def table(results: list[StepResult]) -> str:
    lines = ["| command | exit | wall | CPU |", "|---|---:|---:|---:|"]
    for result in results:
        lines.append(f"| `{result.step.title}` | {result.exit_code} | {_minutes(result.wall_s)} | {_minutes(result.cpu_s)} |")
    total_wall = sum(r.wall_s for r in results)
    total_cpu = sum(r.cpu_s for r in results)
    lines.append(f"| all three | | {_minutes(total_wall)} | {_minutes(total_cpu)} |")
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def record(results: list[StepResult], task_ids: tuple[str, ...]) -> None:
    """Add this run's table to docs/BENCHMARKS.md under "The first hour"."""
    path = REPOSITORY / "docs" / "BENCHMARKS.md"
    load = os.getloadavg()[0]
    entry = (
        f"\n### {date.today().isoformat()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(load average {load:.1f} at the end)\n\n"
        f"`python benchmarks/first_hour.py --openml-cache CACHE --tasks {','.join(task_ids)}`: a shallow clone, "
        f"a cache of task(s) {', '.join(task_ids)}, the README's three commands verbatim.\n\n{table(results)}\n"
    )
    heading = "## The first hour (`benchmarks/first_hour.py`)"
    if heading not in path.read_text(encoding="utf-8"):
        entry = f"\n{heading}\n\nThe README's three main commands, verbatim, in a fresh clone (checked: exit codes, " \
                f"what each prints, no tracked file modified).\n{entry}"
    with path.open("a", encoding="utf-8") as file:
        file.write(entry)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openml-cache", type=Path, required=True, help="an OpenML cache holding the tasks (read only)")
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="gt10 task ids to copy (default: 7, audiology)")
    parser.add_argument("--work-dir", type=Path, help="where to clone (default: a temporary folder, removed after)")
    parser.add_argument("--record", action="store_true", help="add the timings to docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    if not args.openml_cache.is_dir():
        print(f"error: --openml-cache {args.openml_cache} is not a folder; give an OpenML cache", file=sys.stderr)
        return 2
    task_ids = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    with tempfile.TemporaryDirectory(prefix="equibench-first-hour-") as temporary:
        work_dir = args.work_dir or Path(temporary)
        results = first_hour(args.openml_cache, task_ids, work_dir)
        print(table(results))
        found = problems(results, work_dir / "clone")
    for line in found:
        print(f"check failed: {line}", file=sys.stderr)
    if not found and args.record:
        record(results, task_ids)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
