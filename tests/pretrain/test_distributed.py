"""Two-process data parallelism through torchrun (slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from equibench.model import load_checkpoint

from .common import log_records


@pytest.mark.slow
def test_two_process_data_parallel_training(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    command = [torchrun, "--standalone", "--nproc-per-node", "2", "--no-python", "equibench", "pretrain",
               "--out", str(tmp_path), "--size", "tiny", "--steps", "3", "--batch-size", "2", "--rows", "64",
               "--device", "cpu", "--no-bundled-validation", "--no-progress", "--checkpoint-every", "2"]
    # torchrun finds `equibench` on PATH: this Python's, activated or not
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])}
    # both processes agree to stop at the time limit (after step 1), then resume
    stopped = subprocess.run([*command, "--time-limit", "1e-9"], check=True, timeout=300, env=env, cwd=tmp_path,
                             capture_output=True, text=True)
    assert "stopped by --time-limit at step 1 of 3" in stopped.stdout
    subprocess.run([*command, "--resume"], check=True, timeout=300, env=env, cwd=tmp_path)
    _, card = load_checkpoint(tmp_path / "model.pt")
    assert card.training["world_size"] == 2 and card.datasets_seen == 3 * 2 * 2
    assert [r["step"] for r in log_records(tmp_path) if r["kind"] == "step"] == [1, 2, 3]  # only rank 0 logs
