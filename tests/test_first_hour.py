"""A newcomer's first hour: the README's commands, verbatim, in a fresh shallow clone
with a small offline OpenML cache (benchmarks/first_hour.py; about 8 minutes on 2 cores)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
OPENML_CACHE = Path(os.environ.get("EQUIBENCH_TEST_OPENML_CACHE", REPOSITORY.parent / "shared" / "data" / "openml-cache"))


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


@pytest.mark.slow
@pytest.mark.skipif(not (OPENML_CACHE / "org" / "openml" / "www" / "tasks" / "7").is_dir(),
                    reason="needs an OpenML cache with task 7 (EQUIBENCH_TEST_OPENML_CACHE)")
@pytest.mark.skipif(shutil.which("git") is None or not (REPOSITORY / ".git").exists(), reason="needs a git checkout")
def test_the_readmes_commands_work_verbatim_in_a_fresh_clone(tmp_path):
    first_hour = _first_hour_module()
    results = first_hour.first_hour(OPENML_CACHE, ("7",), tmp_path, log=lambda _: None)
    assert [r.step.title for r in results] == [step.title for step in first_hour.readme_steps(Path("DIR"))]
    assert first_hour.problems(results, tmp_path / "clone") == []
    clone = tmp_path / "clone"
    assert (clone / "runs" / "pretrain-equitabpfn" / "model.pt").is_file()
    assert (clone / "runs" / "gt10" / "results.csv").is_file()
