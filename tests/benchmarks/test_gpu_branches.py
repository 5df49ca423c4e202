"""benchmarks/gpu_branches.py: the branches' GPU commands, the catch-up, and the parts packed for the trip back."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
import torch


@pytest.fixture
def gpu_branches(benchmark_module, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports its siblings
    module = benchmark_module("gpu_branches")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    import deeper_branch

    monkeypatch.setattr(deeper_branch, "ROOT", tmp_path)
    monkeypatch.setattr(deeper_branch, "source_checkpoint", lambda arch, commit: tmp_path / arch / f"source-{commit}.pt")
    return module


def write_branch(root: Path, key: str, step: int, tag: str = "") -> Path:
    """A branch folder at ``step``: a loadable training state and the other files it travels with."""
    folder = root / key
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"run": {}, "step": step, "weights": torch.arange(500.0)}, folder / "train_state.pt")
    (folder / "log.jsonl").write_text(json.dumps({"kind": "step", "step": step}) + "\n")
    (folder / "config.json").write_text(json.dumps({"tag": tag}))
    (folder / "model.pt").write_bytes(f"{key} {tag}".encode() * 50)
    return folder


def test_branches_are_named_arch_slash_branch(gpu_branches):
    assert gpu_branches.branch("tabpfn-star/deeper-6") == ("tabpfn-star", "deeper-6")
    for wrong in ("deeper-6", "equitabpfn/deeper-8", "xgboost/restart-4"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not ARCH/BRANCH"):
            gpu_branches.branch(wrong)


def test_a_gpu_slice_is_the_cpu_branch_with_only_the_free_settings_changed(gpu_branches, tmp_path):
    import deeper_branch

    gpu = gpu_branches.gpu_command("equitabpfn", "deeper-6", 7.333, 6000, "cuda", 7)
    cpu = deeper_branch.branch_command("deeper-6", "equitabpfn", deeper_branch.FROM_COMMIT["equitabpfn"], 7.33,
                                       until_step=6000)
    options = dict(zip(gpu[gpu.index("--device"):][::2], gpu[gpu.index("--device") + 1:][::2]))
    assert options == {"--device": "cuda", "--prior-workers": "7", "--checkpoint-every": "500", "--validate-every": "500"}
    assert gpu[:gpu.index("--device")] == cpu[:cpu.index("--device")]
    assert gpu[gpu.index("--steps") + 1] == "6000" and gpu[gpu.index("--time-limit") + 1] == "7.33"


def test_pack_and_merge_carry_each_branch_whole_in_parts(gpu_branches, tmp_path):
    device, here = tmp_path / "device", tmp_path / "here"
    for root, tag in ((device, "after"), (here, "before")):
        write_branch(root, "equitabpfn/deeper-6", 6000 if root == device else 521, tag)
        write_branch(root, "tabpfn-star/deeper-6", 6000 if root == device else 0, tag)
    (here / "tabpfn-star" / "deeper-6" / "train_state.pt").unlink()  # a branch started on the device
    gpu_branches.ROOT = device
    parts = gpu_branches.pack([("equitabpfn", "deeper-6"), ("tabpfn-star", "deeper-6")],
                              {"equitabpfn/deeper-6": 521, "tabpfn-star/deeper-6": 0}, tmp_path / "out", part_bytes=1000)
    assert len(parts) > 2 and all(part.stat().st_size <= 1000 for part in parts)
    with pytest.raises(SystemExit, match="already holds branches.tar parts"):  # stale parts would corrupt a merge
        gpu_branches.pack([("equitabpfn", "deeper-6")], {"equitabpfn/deeper-6": 521}, tmp_path / "out")
    gpu_branches.ROOT = here
    gpu_branches.merge(tmp_path / "out")
    for key in ("equitabpfn/deeper-6", "tabpfn-star/deeper-6"):
        for name in gpu_branches.FILES:
            assert (here / key / name).read_bytes() == (device / key / name).read_bytes()


def test_merge_refuses_a_branch_that_moved_on_here_and_changes_nothing(gpu_branches, tmp_path):
    device, here = tmp_path / "device", tmp_path / "here"
    write_branch(device, "equitabpfn/deeper-6", 6000, "after")
    write_branch(device, "equitabpfn/restart-4", 900, "after")
    gpu_branches.ROOT = device
    gpu_branches.pack([("equitabpfn", "restart-4"), ("equitabpfn", "deeper-6")],
                      {"equitabpfn/restart-4": 539, "equitabpfn/deeper-6": 521}, tmp_path / "out")
    write_branch(here, "equitabpfn/restart-4", 539, "before")
    write_branch(here, "equitabpfn/deeper-6", 574, "before")  # trained here while the slice ran
    gpu_branches.ROOT = here
    with pytest.raises(SystemExit, match="deeper-6 is at step 574 here but the slice started from step 521"):
        gpu_branches.merge(tmp_path / "out")
    assert json.loads((here / "equitabpfn" / "restart-4" / "config.json").read_text()) == {"tag": "before"}
    with pytest.raises(SystemExit, match="no branches.tar.000"):
        gpu_branches.merge(tmp_path)


def test_merge_refuses_parts_with_a_gap_and_a_folder_in_use(gpu_branches, tmp_path):
    from equibench.outdir_lock import locked_folder

    device, here = tmp_path / "device", tmp_path / "here"
    write_branch(device, "equitabpfn/deeper-6", 6000, "after")
    gpu_branches.ROOT = device
    parts = gpu_branches.pack([("equitabpfn", "deeper-6")], {"equitabpfn/deeper-6": 521}, tmp_path / "out",
                              part_bytes=1000)
    write_branch(here, "equitabpfn/deeper-6", 521, "before")
    gpu_branches.ROOT = here
    with locked_folder(here / "equitabpfn" / "deeper-6"):
        with pytest.raises(SystemExit, match="is in use by"):
            gpu_branches.merge(tmp_path / "out")
    parts[1].unlink()
    with pytest.raises(SystemExit, match="without a gap"):
        gpu_branches.merge(tmp_path / "out")
    assert json.loads((here / "equitabpfn" / "deeper-6" / "config.json").read_text()) == {"tag": "before"}


def test_the_branch_behind_catches_up_to_the_leaders_step(gpu_branches, tmp_path, monkeypatch):
    steps = {"equitabpfn/deeper-6": 521, "tabpfn-star/deeper-6": 0}
    launched = []

    def run_all(commands):
        launched.append(commands)
        for command in commands:  # each slice ends at its bound, or short of the leader by its time limit
            key = str(Path(command[command.index("--out") + 1]).relative_to(tmp_path))
            steps[key] = min(int(command[command.index("--steps") + 1]), 5864 if key.startswith("equi") else 6000)
        return [0] * len(commands)

    monkeypatch.setattr(gpu_branches, "preflight", lambda device: None)
    monkeypatch.setattr(gpu_branches, "run_all", run_all)
    monkeypatch.setattr(gpu_branches, "steps_done", lambda folder: steps[str(folder.relative_to(tmp_path))])
    monkeypatch.setattr(gpu_branches, "pack", lambda branches, start, out: launched.append(("pack", start)))
    args = argparse.Namespace(branches=[("equitabpfn", "deeper-6"), ("tabpfn-star", "deeper-6")], minutes=7.3,
                              others_minutes=5.0, deadline_minutes=9.6, device="cuda", prior_workers=7, out=tmp_path)
    gpu_branches.run(args)
    shared, catch_up, packed = launched
    assert [command[command.index("--time-limit") + 1] for command in shared] == ["7.3", "5.0"]
    (command,) = catch_up
    assert "equitabpfn" in command[command.index("--out") + 1] and command[command.index("--steps") + 1] == "6000"
    assert command[command.index("--prior-workers") + 1] == "14"
    assert packed == ("pack", {"equitabpfn/deeper-6": 521, "tabpfn-star/deeper-6": 0})


def test_aside_moves_the_committed_results_the_slice_does_not_need_and_back_restores_them(
        gpu_branches, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    files = {"results/pretraining/equitabpfn/train_state.pt": 2**20, "results/pretraining/equitabpfn/config.json": 100, ".gitignore": 0,
             "results/deeper-branches/equitabpfn/deeper-6/train_state.pt": 2**20,
             "results/deeper-branches/equitabpfn/restart-4/train_state.pt": 2**20 + 1, "model/equitabpfn-small.pt": 2**21}
    for name, size in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(name.encode().ljust(size, b"."))
    (repo / ".gitignore").write_text("/runs/\n")  # as in the repository: what is set aside does not travel
    files[".gitignore"] = len("/runs/\n")
    monkeypatch.chdir(repo)
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["git", "add", "."], check=True)
    gpu_branches.ROOT = Path("results/deeper-branches")
    before = gpu_branches.travelling_bytes()
    assert before == sum(files.values())

    moved = gpu_branches.set_aside([("equitabpfn", "deeper-6")], aside=Path("runs/aside"))
    assert sorted(map(str, moved)) == ["results/deeper-branches/equitabpfn/restart-4/train_state.pt",
                                       "results/pretraining/equitabpfn/config.json",
                                       "results/pretraining/equitabpfn/train_state.pt"]
    assert gpu_branches.travelling_bytes() == before - 2**21 - 101
    (repo / moved[0]).write_bytes(b"written since")
    with pytest.raises(SystemExit, match="exists again"):
        gpu_branches.bring_back(Path("runs/aside"))
    assert (repo / "runs/aside" / moved[1]).exists()
    (repo / moved[0]).unlink()
    gpu_branches.bring_back(Path("runs/aside"))
    for name, size in files.items():
        if name != ".gitignore":
            assert (repo / name).read_bytes() == name.encode().ljust(size, b".")
