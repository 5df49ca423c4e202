"""Stopping a run on request: the library's ``stop`` event and the CLI's Ctrl-C / SIGTERM
handling stop after the step in flight, checkpointed, and the run resumes exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from concurrency import children, wait_gone
from typer.testing import CliRunner

from equibench.cli import app
from equibench.cli.training import stop_on_signals
from equibench.pretrain import pretrain

from .common import PRIOR, log_records, step_losses, tiny_config


def test_a_stop_request_stops_after_the_step_in_flight_and_resume_continues_exactly(tmp_path):
    straight = pretrain(tiny_config(), PRIOR, tmp_path / "straight", progress=False)
    assert straight.stopped_by is None
    stop = threading.Event()
    stop.set()  # requested before the first step: that step ends, then the run stops
    stopped = pretrain(tiny_config(), PRIOR, tmp_path / "stopped", progress=False, stop=stop)
    assert (stopped.step, stopped.finished, stopped.stopped_by) == (1, False, "stop request")
    assert torch.load(tmp_path / "stopped" / "train_state.pt", weights_only=True)["step"] == 1  # not a checkpoint step
    resumed = pretrain(tiny_config(), PRIOR, tmp_path / "stopped", resume=True, progress=False, stop=threading.Event())
    assert resumed.finished and resumed.stopped_by is None
    assert step_losses(tmp_path / "stopped") == step_losses(tmp_path / "straight")
    limited = pretrain(tiny_config(), PRIOR, tmp_path / "limited", progress=False, time_limit_s=0)
    assert (limited.step, limited.stopped_by) == (1, "time limit")


def test_the_first_signal_requests_a_stop_and_the_second_interrupts_at_once():
    stop, before = threading.Event(), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
    try:
        with pytest.raises(KeyboardInterrupt), stop_on_signals(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.is_set()  # no exception: the run goes on to the end of its step
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_signal_the_process_ignores_stays_ignored():
    stop, before = threading.Event(), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a shell's background job
    try:
        with stop_on_signals(stop):
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def _sigint_as_in_a_terminal() -> None:
    """In the child: Ctrl-C's default action, even when the tests run as a background job
    (which ignores SIGINT, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _train_until_signalled(out, number: int, *extra: str) -> tuple[subprocess.CompletedProcess, set[int]]:
    """Run a tiny `equibench pretrain` (its prior drawn by a worker process) in a session of its
    own and send ``number`` to its whole process group (as a terminal's Ctrl-C does), or to it
    alone for SIGKILL, once it has logged three more steps; the completed process and the pids
    of its children then."""
    command = [sys.executable, "-m", "equibench", "pretrain", "--out", str(out), "--size", "tiny", "--steps", "100000",
               "--rows", "64", "--batch-size", "2", "--checkpoint-every", "50000", "--validation-batches", "0",
               "--prior-workers", "1", "--device", "cpu", "--no-progress", *extra]
    log = out / "log.jsonl"
    logged = log.read_text().count('"kind": "step"') if log.exists() else 0
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True,
                               cwd=out.parent,  # not the checkout: run the installed equibench
                               preexec_fn=_sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and log.read_text().count('"kind": "step"') >= logged + 3):
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
        workers = children(process.pid)
        assert workers, "the prior's worker should be running"
        (os.kill if number == signal.SIGKILL else os.killpg)(process.pid, number)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # hung: leave no training behind
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), workers


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_pretrain_command_stops_checkpointed_on_ctrl_c_or_sigterm_and_resumes(tmp_path):
    out = tmp_path / "run"
    for number, extra in ((signal.SIGINT, ()), (signal.SIGTERM, ("--resume",))):
        ran, workers = _train_until_signalled(out, number, *extra)
        assert ran.returncode == 130, ran.stderr
        assert not wait_gone(workers, 15)
        assert "stopping after the step in flight" in ran.stderr and "Traceback" not in ran.stderr + ran.stdout
        steps = [record["step"] for record in log_records(out) if record["kind"] == "step"]
        saved = torch.load(out / "train_state.pt", weights_only=True)["step"]
        assert f"stopped by Ctrl-C or SIGTERM at step {saved} of 100000, checkpointed" in ran.stdout
        assert steps == list(range(1, saved + 1))  # every step trained is saved and logged once: none lost


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_prior_workers_exit_when_pretrain_is_killed(tmp_path):
    ran, workers = _train_until_signalled(tmp_path / "run", signal.SIGKILL)
    assert ran.returncode == -signal.SIGKILL
    left = wait_gone(workers, 15)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the prior's worker (or its resource tracker) outlived the killed training process"


def test_a_run_stopped_at_once_says_what_it_kept(tmp_path, monkeypatch):
    import equibench.pretrain as library

    run = tmp_path / "run"
    command = ["pretrain", "--out", str(run), "--size", "tiny", "--steps", "3", "--rows", "64", "--validation-batches",
               "0", "--checkpoint-every", "2", "--no-progress"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # a second Ctrl-C during a step

    monkeypatch.setattr(library, "pretrain", interrupted)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 130 and "holds no checkpoint of this run yet" in result.output
    assert "--overwrite" in result.output and "Traceback" not in result.output
    monkeypatch.undo()
    assert CliRunner().invoke(app, command).exit_code == 0  # checkpoints at steps 2 and 3
    monkeypatch.setattr(library, "pretrain", interrupted)
    result = CliRunner().invoke(app, [*command, "--resume"])
    assert result.exit_code == 130 and "keeps its last checkpoint, step 3" in result.output
