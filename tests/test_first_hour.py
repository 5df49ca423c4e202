"""A newcomer's first hour: the README's commands, verbatim, in a fresh shallow clone
with a small offline OpenML cache (benchmarks/first_hour.py; about 8 minutes on 2 cores)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from shared_cache import SHARED_CACHE, needs_shared_cache

REPOSITORY = Path(__file__).resolve().parents[1]


def _first_hour_module():
    spec = importlib.util.spec_from_file_location("first_hour", REPOSITORY / "benchmarks" / "first_hour.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_readme_states_the_commands_the_script_runs():
    first_hour = _first_hour_module()
    readme = (REPOSITORY / "README.md").read_text()
    for step in first_hour.readme_steps(Path("DIR")):
        assert first_hour.readme_states(readme, step.title), step.title
    assert not first_hour.readme_states("equibench report --results runs/demo-eval --out runs/demo-report",
                                        first_hour.MAIN_REPORT)


def test_pytest_counts_are_read_from_its_closing_line():
    output = "....\n1028 passed, 12 skipped, 4 xfailed in 156.31s (0:02:36)\n"
    assert _first_hour_module().test_counts(output) == {"passed": 1028, "skipped": 12, "xfailed": 4}


def test_a_step_records_cpu_minutes_of_its_children_and_the_load_it_ran_under(tmp_path):
    """Issue 64, item 14: CPU time (user + sys of the child processes) beside wall time, and the
    load average at each command's start and end, in the table and the recorded entry."""
    first_hour = _first_hour_module()
    burn = tmp_path / "burn.py"  # two worker processes, 0.4 s of CPU each
    burn.write_text("import multiprocessing, time\n\n"
                    "def spin(_):\n    start = time.process_time()\n    while time.process_time() - start < 0.4:\n"
                    "        pass\n\n"
                    "if __name__ == '__main__':\n    with multiprocessing.Pool(2) as pool:\n        pool.map(spin, range(2))\n"
                    "    print(' passed')\n")
    steps = {title: first_hour.Step(title, (sys.executable, str(burn)), (" passed",))
             for title in (first_hour.MAIN_JOB, "pytest")}
    results = [first_hour.run_step(step, tmp_path) for step in steps.values()]
    for result in results:  # the pool's worker processes count: more CPU than the command's own
        assert result.exit_code == 0 and result.cpu_s >= 0.75 and result.load_start >= 0 and result.load_end >= 0
    lines = first_hour.table(results).splitlines()
    assert lines[0] == "| command | exit | wall | CPU-minutes (user + sys) | load average at start, end |"
    assert lines[2].endswith(f"| {results[0].cpu_s / 60:.1f} | {results[0].load_start:.1f}, {results[0].load_end:.1f} |")
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    first_hour.record(results, ("7",), tmp_path / "clone", benchmarks)
    text = benchmarks.read_text()
    assert f"(load average {results[0].load_start:.1f} at the start, {results[1].load_end:.1f} at the end)" in text
    for label, result in zip(("main job", "tests"), results):
        assert f"- {label}: {first_hour.timing(result)};" in text and "CPU-minutes (load average" in text


@pytest.mark.slow
@needs_shared_cache("7")
@pytest.mark.skipif(shutil.which("git") is None or not (REPOSITORY / ".git").exists(), reason="needs a git checkout")
def test_the_readmes_commands_work_verbatim_in_a_fresh_clone(tmp_path):
    first_hour = _first_hour_module()
    results = first_hour.first_hour(SHARED_CACHE, ("7",), tmp_path, log=lambda _: None)
    assert [r.step.title for r in results] == [step.title for step in first_hour.readme_steps(Path("DIR"))]
    assert first_hour.problems(results, tmp_path / "clone") == []
    clone = tmp_path / "clone"
    assert (clone / "runs" / "pretrain-equitabpfn" / "model.pt").is_file()
    assert (clone / "runs" / "gt10" / "results.csv").is_file()
