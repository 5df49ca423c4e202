"""benchmarks/cumulative_pretraining.py: the command and environment a slice runs with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cumulative_pretraining.py"


@pytest.fixture
def cumulative(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # it imports recipe_study
    return benchmark_module("cumulative_pretraining")


def exec_captured(module, monkeypatch) -> dict:
    """Replace the slice's exec with a recorder; returns what it was given."""
    seen = {}

    def execve(path, command, env):
        seen.update(path=path, command=command, env=env)

    monkeypatch.setattr(module.os, "execve", execve)
    return seen


@pytest.mark.parametrize("threads", [1, 2])
def test_a_slice_runs_on_the_threads_it_is_given(cumulative, monkeypatch, tmp_path, threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    seen = exec_captured(cumulative, monkeypatch)
    cumulative.continue_run(tmp_path, "equitabpfn", 5.0, None, threads=threads)
    assert seen["env"]["OMP_NUM_THREADS"] == seen["env"]["MKL_NUM_THREADS"] == str(threads)
    command = seen["command"]
    assert command[1:4] == ["-m", "equibench", "pretrain"] and "--resume" not in command  # a new run here
    assert command[command.index("--arch") + 1] == "equitabpfn" and command[command.index("--time-limit") + 1] == "5.0"


def test_one_thread_is_the_default(cumulative, monkeypatch, tmp_path):
    seen = exec_captured(cumulative, monkeypatch)
    cumulative.continue_run(tmp_path, "tabpfn-star", None, 10)
    assert seen["env"]["OMP_NUM_THREADS"] == "1"


def test_a_non_positive_thread_count_is_one_clear_line(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path), "continue", "--arch", "equitabpfn",
                           "--minutes", "1", "--threads", "0"], capture_output=True, text=True, cwd=SCRIPT.parent)
    assert done.returncode == 2 and "--threads takes a positive number, got 0" in done.stderr
    assert "Traceback" not in done.stderr and not any(tmp_path.iterdir())
