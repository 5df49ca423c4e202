"""A newcomer's first hour, checked and timed: the README's commands, verbatim, in a fresh
shallow clone, with a small offline OpenML cache.

    python benchmarks/first_hour.py --openml-cache CACHE [--tasks 7] [--record]

The script clones this repository (``git clone --depth 1``, as the README says), copies the
given tasks of CACHE (default: task 7, audiology, the smallest task of ``gt10``) into a fresh
cache folder, and runs in the clone, exactly as the README writes them:

    equibench evaluate --suite demo --folds 0 --out runs/demo-eval     (the main job)
    equibench report --results runs/demo-eval --out runs/demo-eval/report
    pytest                                                              (the tests)
    equibench pretrain
    equibench evaluate --suite gt10 --openml-cache <the small cache>
    equibench report

It checks that each is in the README verbatim, exits 0 and prints what the README promises
(the main job: its summary and the README's report command as its hint; pytest: no failure;
pretrain: hundreds of steps, its loss drop, how to use the model; evaluate: the tasks missing
from the cache and the next command; report: the folders it read), and that no tracked file
of the clone was modified. It prints each check and, per command, its wall time, its
CPU-minutes (user + sys of the command and the processes it waited for) and the load average
at its start and end (a loaded machine stretches the wall time, not the CPU time); ``--record``
adds them, with the test counts and the main job's cells, to docs/BENCHMARKS.md.
The equibench that runs is the one installed in this Python (for the clone's own code,
install it: ``.ci/run`` installs a clean clone from scratch).
Exit status: 0 every check passed, 1 a check failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: The smallest task of gt10 (audiology: 226 rows, 24 classes): all methods and folds in minutes.
DEFAULT_TASKS = ("7",)
#: The quick start must train at least this many steps in its 5 minutes (on idle cores).
MIN_QUICK_START_STEPS = 100


@dataclass(frozen=True)
class Step:
    """One of the README's commands (``title``, verbatim), what runs, and what it must print."""

    title: str
    argv: tuple[str, ...]
    expected: tuple[str, ...]


@dataclass(frozen=True)
class StepResult:
    step: Step
    exit_code: int
    wall_s: float
    cpu_s: float  # user + sys of the command and its waited-for descendants
    output: str
    load_start: float  # the 1-minute load average when it started ...
    load_end: float  # ... and when it ended

    @property
    def missing(self) -> list[str]:
        """The expected phrases the command did not print."""
        return [phrase for phrase in self.step.expected if phrase not in self.output]


def _equibench(*arguments: str) -> tuple[str, ...]:
    """The ``equibench`` command installed beside this Python, as a user types it."""
    return (str(Path(sys.executable).with_name("equibench")), *arguments)


MAIN_JOB = "equibench evaluate --suite demo --folds 0 --out runs/demo-eval"
MAIN_REPORT = "equibench report --results runs/demo-eval --out runs/demo-eval/report"


def readme_steps(cache: Path) -> list[Step]:
    """The README's main job, its report, its tests and its three main commands, with the small
    cache as ``--openml-cache DIR``."""
    return [
        Step(MAIN_JOB, _equibench(*MAIN_JOB.split()[1:]), ("equitabpfn", f"next: {MAIN_REPORT}")),
        Step(MAIN_REPORT, _equibench(*MAIN_REPORT.split()[1:]), ("runs/demo-eval/report",)),
        Step("pytest", (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"), (" passed",)),
        Step("equibench pretrain", _equibench("pretrain"),
             ("loss (fixed prior batches)", "EquiTabPFNClassifier(checkpoint=", "equibench score")),
        Step("equibench evaluate --suite gt10 --openml-cache DIR",
             _equibench("evaluate", "--suite", "gt10", "--openml-cache", str(cache)),
             ("missing:", "equibench download", "next:", "equitabpfn")),
        Step("equibench report", _equibench("report"), ("results/demo", "results/gt10", "results/le10")),
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
    """Run one command in the clone as a user would, timing its wall and CPU time (the
    ``RUSAGE_CHILDREN`` delta), with the load average at its start and end."""
    load_start = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    environment = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    completed = subprocess.run(step.argv, cwd=clone, env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return StepResult(step, completed.returncode, wall, cpu, completed.stdout + completed.stderr, load_start,
                      os.getloadavg()[0])


def first_hour(openml_cache: Path, task_ids: tuple[str, ...], work_dir: Path, log=print) -> list[StepResult]:
    """Clone, build the small cache, run the commands; the results of each command."""
    clone = shallow_clone(REPOSITORY, work_dir / "clone")
    cache = small_cache(openml_cache, task_ids, work_dir / "openml-cache")
    results = []
    for step in readme_steps(cache):
        log(f"running: {step.title}")
        results.append(run_step(step, clone))
    return results


def readme_states(readme: str, command: str) -> bool:
    """Whether the README's text gives ``command`` whole: at a line start, after ``&&`` or in backticks."""
    return re.search(rf"(^|&& |`){re.escape(command)}(\s|`|$)", readme, re.M) is not None


def test_counts(output: str) -> dict[str, int]:
    """pytest's closing counts, e.g. {"passed": 1028, "skipped": 12, "xfailed": 4}."""
    summary = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return {kind: int(count) for count, kind in re.findall(r"(\d+) (\w+)", summary[-1])} if summary else {}


def quick_start_steps(clone: Path) -> int:
    """The steps the quick start's run folder logged."""
    log_file = clone / "runs" / "pretrain-equitabpfn" / "log.jsonl"
    if not log_file.is_file():
        return 0
    records = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    return max((r["step"] for r in records if r.get("kind") == "step"), default=0)


def checks(results: list[StepResult], clone: Path) -> list[tuple[str, bool, str]]:
    """Every check as (what, passed, detail)."""
    readme = (clone / "README.md").read_text(encoding="utf-8")
    found = []
    for result in results:
        title = result.step.title
        found.append((f"README states `{title}`", readme_states(readme, title), ""))
        found.append((f"`{title}` exits 0", result.exit_code == 0,
                      "" if result.exit_code == 0 else f"exit {result.exit_code}\n{result.output[-3000:]}"))
        found.extend((f"`{title}` prints {phrase!r}", phrase not in result.missing, "") for phrase in result.step.expected)
        if title == "pytest":
            counts = test_counts(result.output)
            found.append(("no test failed", counts.get("passed", 0) > 0 and not counts.get("failed")
                          and not counts.get("error") and not counts.get("errors"), str(counts)))
    steps = quick_start_steps(clone)
    found.append((f"the quick start trained at least {MIN_QUICK_START_STEPS} steps", steps >= MIN_QUICK_START_STEPS,
                  f"{steps} steps"))
    changed = tracked_changes(clone)
    found.append(("no tracked file modified", not changed, "; ".join(changed)))
    return found


def problems(results: list[StepResult], clone: Path) -> list[str]:
    """Every failed check, one line each."""
    return [f"{what}: {detail}" if detail else what for what, passed, detail in checks(results, clone) if not passed]


def table(results: list[StepResult]) -> str:
    lines = ["| command | exit | wall | CPU-minutes (user + sys) | load average at start, end |", "|---|---:|---:|---:|---:|"]
    for result in results:
        lines.append(f"| `{result.step.title}` | {result.exit_code} | {_minutes(result.wall_s)} | "
                     f"{_cpu_minutes(result.cpu_s)} | {result.load_start:.1f}, {result.load_end:.1f} |")
    total_wall = sum(r.wall_s for r in results)
    total_cpu = sum(r.cpu_s for r in results)
    lines.append(f"| all {len(results)} | | {_minutes(total_wall)} | {_cpu_minutes(total_cpu)} | |")
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


def _cpu_minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def timing(result: StepResult) -> str:
    """One command's times in words: wall, CPU-minutes, and the load it ran under."""
    return (f"{_minutes(result.wall_s)} wall, {_cpu_minutes(result.cpu_s)} CPU-minutes (load average "
            f"{result.load_start:.1f} at its start, {result.load_end:.1f} at its end)")


def main_job_cells(clone: Path) -> dict[str, int]:
    """The main job's cells by status, from its results.csv."""
    path = clone / "runs" / "demo-eval" / "results.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as file:
        return dict(Counter(row["status"] for row in csv.DictReader(file)))


def entry(results: list[StepResult], task_ids: tuple[str, ...], clone: Path) -> str:
    """This run's entry in docs/BENCHMARKS.md: the table, the main job's and the tests' times,
    cells and counts, and the quick start's steps."""
    by_title = {result.step.title: result for result in results}
    main, tests = by_title[MAIN_JOB], by_title["pytest"]
    cells = main_job_cells(clone)
    return (
        f"\n### {date.today().isoformat()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(load average {results[0].load_start:.1f} at the start, {results[-1].load_end:.1f} at the end)\n\n"
        f"`python benchmarks/first_hour.py --openml-cache CACHE --tasks {','.join(task_ids)} --record`: a shallow "
        f"clone, a cache of task(s) {', '.join(task_ids)}, the README's commands verbatim; every check passed.\n\n"
        f"{table(results)}\n\n"
        f"- main job: {timing(main)}; {sum(cells.values())} cells "
        f"({', '.join(f'{n} {status}' for status, n in sorted(cells.items()))})\n"
        f"- tests: {timing(tests)}; {', '.join(f'{n} {kind}' for kind, n in test_counts(tests.output).items())}\n"
        f"- quick start: {quick_start_steps(clone)} steps\n"
    )


def record(results: list[StepResult], task_ids: tuple[str, ...], clone: Path,
           path: Path = REPOSITORY / "docs" / "BENCHMARKS.md") -> None:
    """Add this run's :func:`entry` to ``path`` (docs/BENCHMARKS.md), at the end of its section
    "The first hour"."""
    entry_text = entry(results, task_ids, clone)
    heading = "## The first hour (`benchmarks/first_hour.py`)"
    text = path.read_text(encoding="utf-8")
    if heading not in text:
        text += f"\n{heading}\n\nThe README's commands, verbatim, in a fresh clone (checked: exit codes, " \
                "what each prints, no tracked file modified).\n"
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))  # the section ends where the next one starts
    end = len(text) if end < 0 else end + 1
    path.write_text(text[:end].rstrip("\n") + "\n" + entry_text + ("\n" + text[end:] if end < len(text) else ""),
                    encoding="utf-8")


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
        clone = work_dir / "clone"
        found = checks(results, clone)
        for what, passed, detail in found:
            print(f"{'ok    ' if passed else 'FAILED'} {what}" + (f" ({detail})" if detail and passed else ""))
        failed = [(what, detail) for what, passed, detail in found if not passed]
        for what, detail in failed:
            print(f"check failed: {what}" + (f": {detail}" if detail else ""), file=sys.stderr)
        if not failed and args.record:
            record(results, task_ids, clone)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
