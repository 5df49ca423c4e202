"""The tests that need an OpenML cache say, when they skip, how to provide one (issue 64, item 15)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared_cache import VARIABLE, missing_reason

ROOT = Path(__file__).resolve().parents[1]


def test_the_reason_names_the_variable_the_tasks_and_how_to_fill_a_cache(tmp_path):
    (tmp_path / "org" / "openml" / "www" / "tasks" / "59").mkdir(parents=True)
    assert missing_reason(tmp_path, ("59",)) is None
    reason = missing_reason(tmp_path, ("59", "7"))
    assert reason == (f"needs an OpenML cache holding task(s) 59,7; {tmp_path} lacks 7: set "
                      "EQUIBENCH_TEST_OPENML_CACHE=DIR, an OpenML cache folder with them (fill one with "
                      "`equibench download --tasks 59,7 --cache DIR`)")


def test_tests_run_without_a_cache_are_skipped_with_that_reason(tmp_path):
    """pytest itself, pointed at an empty folder: every cache test of test_openml.py skips, saying how."""
    env = {**os.environ, VARIABLE: str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider",
                             "tests/tasks/test_openml.py", "-k", "cached or uncached or cut"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert result.returncode == 0 and len(skips) == 5 and "5 skipped" in result.stdout, result.stdout
    for skip in skips:
        assert f"set {VARIABLE}=DIR" in skip and "`equibench download --tasks 59,11,7 --cache DIR`" in skip
