"""A newcomer's first hour: the README's three main commands, verbatim, in a fresh shallow clone
with a small offline OpenML cache (benchmarks/first_hour.py; about 8 minutes on 2 cores)."""

from __future__ import annotations

import importlib.util
import os
import re
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


def test_the_readme_states_the_three_commands_the_script_runs():
    readme = (REPOSITORY / "README.md").read_text()
    for step in _first_hour_module().readme_steps(Path("DIR")):
        assert re.search(rf"^{re.escape(step.title)}\s+#", readme, re.MULTILINE), step.title


@pytest.mark.slow
@pytest.mark.skipif(not (OPENML_CACHE / "org" / "openml" / "www" / "tasks" / "7").is_dir(),
                    reason="needs an OpenML cache with task 7 (EQUIBENCH_TEST_OPENML_CACHE)")
@pytest.mark.skipif(shutil.which("git") is None or not (REPOSITORY / ".git").exists(), reason="needs a git checkout")
def test_the_three_commands_work_verbatim_in_a_fresh_clone(tmp_path):
    first_hour = _first_hour_module()
    results = first_hour.first_hour(OPENML_CACHE, ("7",), tmp_path, log=lambda _: None)
    assert [r.step.arguments[0] for r in results] == ["pretrain", "evaluate", "report"]
    assert first_hour.problems(results, tmp_path / "clone") == []
    clone = tmp_path / "clone"
    assert (clone / "runs" / "pretrain-equitabpfn" / "model.pt").is_file()
    assert (clone / "runs" / "gt10" / "results.csv").is_file()
