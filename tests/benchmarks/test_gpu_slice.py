"""benchmarks/gpu_slice.py: the slice commands and the files packed for the trip back."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch


@pytest.fixture
def gpu_slice(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports cumulative_pretraining
    return benchmark_module("gpu_slice")


def test_a_slice_continues_the_cumulative_run_on_the_device_with_prior_workers(gpu_slice, tmp_path):
    command = gpu_slice.slice_command(tmp_path, "tabpfn-star", 1.234, 900, "cuda", 7)
    assert command[1].endswith("cumulative_pretraining.py") and command[2:5] == ["--root", str(tmp_path), "continue"]
    options = dict(zip(command[5::2], command[6::2]))
    assert options == {"--arch": "tabpfn-star", "--minutes": "1.23", "--until-step": "900", "--device": "cuda",
                       "--prior-workers": "7", "--checkpoint-every": "500"}


def test_pack_copies_each_run_and_gzips_its_log(gpu_slice, tmp_path):
    for arch in ("equitabpfn", "tabpfn-star"):
        run = tmp_path / "runs" / arch
        run.mkdir(parents=True)
        for name in ("train_state.pt", "model.pt", "config.json"):
            (run / name).write_bytes(f"{arch} {name}".encode())
        (run / "log.jsonl").write_text('{"kind": "step", "step": 1}\n' * 3)
    gpu_slice.pack(tmp_path / "runs", tmp_path / "out")
    for arch in ("equitabpfn", "tabpfn-star"):
        packed = tmp_path / "out" / arch
        assert sorted(p.name for p in packed.iterdir()) == ["config.json", "log.jsonl.gz", "model.pt", "train_state.pt"]
        assert (packed / "model.pt").read_bytes() == f"{arch} model.pt".encode()
        assert gzip.decompress((packed / "log.jsonl.gz").read_bytes()) == (tmp_path / "runs" / arch / "log.jsonl").read_bytes()


def _step_lines(steps, tag: str) -> str:
    return "".join(json.dumps({"kind": "step", "step": step, "by": tag}) + "\n" for step in steps)


def test_trim_then_merge_gives_the_whole_log_with_the_slice_after_its_start(gpu_slice, tmp_path):
    root, aside, fetched = tmp_path / "runs", tmp_path / "aside", tmp_path / "fetched"
    for arch in ("equitabpfn", "tabpfn-star"):
        (root / arch).mkdir(parents=True)
        torch.save({"step": 5, "run": {}}, root / arch / "train_state.pt")
        # steps 6-7 were logged by a CPU slice killed before its next checkpoint
        (root / arch / "log.jsonl").write_text(_step_lines(range(1, 8), "cpu"))
    (aside / "equitabpfn").mkdir(parents=True)
    (aside / "equitabpfn" / "notes.txt").write_text("a user's file")  # beside what trim and merge write
    (root / "equitabpfn" / "notes.txt").write_text("a user's file")
    gpu_slice.trim(root, aside, kept_lines=2)
    assert (root / "equitabpfn" / "log.jsonl").read_text() == _step_lines([6, 7], "cpu")
    with pytest.raises(SystemExit, match="already holds a trimmed log"):
        gpu_slice.trim(root, aside)
    for arch in ("equitabpfn", "tabpfn-star"):  # what `run` packs on the device: the slice resumed from step 5
        (fetched / arch).mkdir(parents=True)
        torch.save({"step": 9, "run": {}}, fetched / arch / "train_state.pt")
        for name in ("model.pt", "config.json"):
            (fetched / arch / name).write_text(f"{arch} {name}")
        (fetched / arch / "log.jsonl.gz").write_bytes(gzip.compress(_step_lines(range(6, 10), "gpu").encode()))
    gpu_slice.merge(root, aside, fetched)
    for arch in ("equitabpfn", "tabpfn-star"):
        assert (root / arch / "log.jsonl").read_text() == _step_lines(range(1, 6), "cpu") + _step_lines(range(6, 10), "gpu")
        assert torch.load(root / arch / "train_state.pt")["step"] == 9
        assert (root / arch / "model.pt").read_text() == f"{arch} model.pt"
    assert not (aside / "equitabpfn" / "log.jsonl").exists()
    assert (aside / "equitabpfn" / "notes.txt").read_text() == (root / "equitabpfn" / "notes.txt").read_text() == "a user's file"
