"""benchmarks/deeper_branch.py: the branches' commands and their validation table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def branches(benchmark_module, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports suffix_average
    module = benchmark_module("deeper_branch")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    return module


def test_each_branch_resumes_its_own_folder_with_its_layers(branches, tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(branches, "source_checkpoint", lambda arch, commit: tmp_path / arch / f"source-{commit}.pt")
    monkeypatch.setattr(subprocess, "run", lambda command, env: commands.append((command, env)) or
                        subprocess.CompletedProcess(command, 0))
    assert branches.run_branch("deeper-6", "equitabpfn", "abc123", 30, threads=1) == 0
    (tmp_path / "equitabpfn" / "restart-4").mkdir(parents=True)
    (tmp_path / "equitabpfn" / "restart-4" / "train_state.pt").write_bytes(b"")
    branches.run_branch("restart-4", "equitabpfn", "abc123", 30, threads=2, until_step=900)

    (deeper, deeper_env), (restart, restart_env) = commands
    assert deeper[deeper.index("--layers") + 1] == "6" and restart[restart.index("--layers") + 1] == "4"
    assert deeper[deeper.index("--init-from") + 1] == str(tmp_path / "equitabpfn" / "source-abc123.pt")
    assert deeper[deeper.index("--out") + 1] == str(tmp_path / "equitabpfn" / "deeper-6")
    assert "--resume" not in deeper and restart[-1] == "--resume"
    assert deeper_env["OMP_NUM_THREADS"] == "1" and restart_env["OMP_NUM_THREADS"] == "2"
    assert deeper[deeper.index("--steps") + 1] == "100000" and restart[restart.index("--steps") + 1] == "900"
    # identical recipes apart from the layers: the comparison is fair
    assert deeper[: deeper.index("--layers")] == restart[: restart.index("--layers")]


def test_a_missing_commit_is_one_clear_line(branches):
    with pytest.raises(SystemExit, match="no results/pretraining/equitabpfn/train_state.pt at commit 'nonesuch'"):
        branches.source_checkpoint("equitabpfn", "nonesuch")


def test_table_puts_the_branches_side_by_side(branches, tmp_path):
    assert "no branch of equitabpfn has validated yet" in branches.table("equitabpfn")
    for name, losses in (("restart-4", [0.66, 0.65]), ("deeper-6", [0.66, 0.64])):
        folder = tmp_path / "equitabpfn" / name
        folder.mkdir(parents=True)
        records = [{"kind": "step", "step": 1, "loss": 0.5}] + [
            {"kind": "validation", "step": 250 * i, "prior_loss": loss, "prior_accuracy": 0.7, "iris_accuracy": 0.96}
            for i, loss in enumerate(losses)
        ]
        (folder / "log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    lines = branches.table("equitabpfn").splitlines()
    assert lines[0] == "| step | branch | prior loss | prior acc. | iris |"
    assert lines[2:] == [
        "| 0 | restart-4 | 0.6600 | 70.0 | 96.0 |", "| 0 | deeper-6 | 0.6600 | 70.0 | 96.0 |",
        "| 250 | restart-4 | 0.6500 | 70.0 | 96.0 |", "| 250 | deeper-6 | 0.6400 | 70.0 | 96.0 |",
    ]


def test_a_resumed_branch_does_not_need_the_weights_it_started_from(branches, tmp_path, monkeypatch):
    def unavailable(arch, commit):
        raise AssertionError("a resumed branch rebuilt its source checkpoint")

    monkeypatch.setattr(branches, "source_checkpoint", unavailable)
    (tmp_path / "tabpfn-star" / "deeper-6").mkdir(parents=True)
    (tmp_path / "tabpfn-star" / "deeper-6" / "train_state.pt").write_bytes(b"")
    command = branches.branch_command("deeper-6", "tabpfn-star", "abc123", 5, device="cuda")
    assert command[command.index("--init-from") + 1] == str(tmp_path / "tabpfn-star" / "source-abc123.pt")
    assert command[-1] == "--resume"
