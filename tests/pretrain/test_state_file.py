"""train_state.pt in parts under a size cap (max_file_mb): parts within the cap, an exact resume,
a kill mid-save keeps the previous state, and a missing or damaged part is refused."""

from __future__ import annotations

import json

import pytest
import torch

import equibench.pretrain.loop as loop_module
import equibench.pretrain.state_file as state_file_module
from equibench.errors import InvalidInputError
from equibench.model import load_checkpoint
from equibench.pretrain import STATE_FILE, pretrain
from equibench.pretrain.run_dir import load_state

from .common import PRIOR, kill_during_step, step_losses, tiny_config

CAP_MB = 0.05


def parts(run) -> list:
    return sorted(run.glob(f"{STATE_FILE}.*.part-*"))


def test_a_capped_state_is_written_in_parts_and_resumes_exactly(tmp_path, monkeypatch):
    pretrain(tiny_config(), PRIOR, tmp_path / "straight", progress=False)
    real_sample = kill_during_step(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny_config(max_file_mb=CAP_MB), PRIOR, tmp_path / "resumed", progress=False)
    written = parts(tmp_path / "resumed")
    assert len(written) >= 3 and all(part.stat().st_size <= CAP_MB * 1e6 for part in written)
    index = json.loads((tmp_path / "resumed" / STATE_FILE).read_text())
    assert [part["file"] for part in index["parts"]] == [part.name for part in written]
    assert load_state(tmp_path / "resumed")["step"] == 3

    monkeypatch.setattr(loop_module, "sample_batch", real_sample)
    pretrain(tiny_config(max_file_mb=CAP_MB), PRIOR, tmp_path / "resumed", resume=True, progress=False)
    assert step_losses(tmp_path / "resumed") == step_losses(tmp_path / "straight")
    straight, _ = load_checkpoint(tmp_path / "straight" / "model.pt")
    resumed, _ = load_checkpoint(tmp_path / "resumed" / "model.pt")
    assert all(torch.equal(a, b) for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()))
    assert not set(parts(tmp_path / "resumed")) & set(written)  # the step-3 parts were removed
    assert load_state(tmp_path / "resumed")["step"] == 6


def test_a_kill_while_saving_parts_keeps_the_previous_state(tmp_path, monkeypatch):
    run = tmp_path / "run"
    pretrain(tiny_config(max_file_mb=CAP_MB), PRIOR, run, progress=False, time_limit_s=0)  # saves step 1
    before = {path.name: path.read_bytes() for path in run.glob(f"{STATE_FILE}*")}
    real_write = state_file_module.atomic_write
    calls = {"n": 0}

    def dies_at_the_second_part(path, write):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated kill")
        return real_write(path, write)

    monkeypatch.setattr(state_file_module, "atomic_write", dies_at_the_second_part)
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny_config(max_file_mb=CAP_MB), PRIOR, run, resume=True, progress=False)  # saving step 3
    assert load_state(run)["step"] == 1 and (run / STATE_FILE).read_bytes() == before[STATE_FILE]
    assert len(parts(run)) == len(before)  # the old parts and the interrupted save's first one
    monkeypatch.setattr(state_file_module, "atomic_write", real_write)
    # the next save (here without a cap: one file) leaves no part behind
    pretrain(tiny_config(), PRIOR, run, resume=True, progress=False)
    assert load_state(run)["step"] == 6 and parts(run) == []


def test_a_missing_or_damaged_part_is_refused_naming_it(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3, max_file_mb=CAP_MB), PRIOR, run, progress=False)
    first = parts(run)[0]
    content = first.read_bytes()
    first.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))
    with pytest.raises(InvalidInputError, match=rf"part '.*{first.name}' does not match its index"):
        load_state(run)
    first.unlink()
    with pytest.raises(InvalidInputError, match=rf"its part '{first.name}' is missing; copy every"):
        pretrain(tiny_config(steps=3, max_file_mb=CAP_MB), PRIOR, run, resume=True, progress=False)
    (run / STATE_FILE).write_text("{not json")
    with pytest.raises(InvalidInputError, match="is unreadable"):
        load_state(run)


def test_a_new_run_removes_the_parts_of_the_run_it_replaces(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3, max_file_mb=CAP_MB), PRIOR, run, progress=False)
    pretrain(tiny_config(steps=3, max_file_mb=10.0), PRIOR, run, overwrite=True, progress=False)
    assert parts(run) == [] and load_state(run)["step"] == 3  # within the cap: one file
    with pytest.raises(ValueError, match=r"`max_file_mb` must be a number of MB >= 0.001 \(left out: one file\)"):
        tiny_config(max_file_mb=0)


def test_saving_and_removing_parts_leaves_a_users_files_beside_them(tmp_path):
    path = tmp_path / STATE_FILE
    users = {name: tmp_path / name for name in ("notes.txt", f"{STATE_FILE}.backup", f"{STATE_FILE}.part-000")}
    for name, file in users.items():
        file.write_text(name)
    state = {"weights": torch.arange(40_000, dtype=torch.float32)}
    state_file_module.write(state, path, max_bytes=50_000)
    assert len(parts(tmp_path)) > 1
    assert torch.equal(state_file_module.read(path)["weights"], state["weights"])
    state_file_module.write(state, path)  # one file again: the parts go, nothing else
    state_file_module.remove(path)
    assert not parts(tmp_path) and not path.exists()
    assert all(file.read_text() == name for name, file in users.items())


def test_parts_whose_index_is_gone_are_named_and_never_deleted_by_default(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3, max_file_mb=CAP_MB), PRIOR, run, progress=False)
    kept = parts(run)
    assert len(kept) > 1
    (run / STATE_FILE).unlink()  # the small index lost (not copied), the parts intact
    with pytest.raises(InvalidInputError, match=r"the index of a training state saved in parts, is missing, but "
                                                r"\d+ of its parts are here .*restore train_state.pt"):
        pretrain(tiny_config(steps=6, max_file_mb=CAP_MB), PRIOR, run, resume=True, progress=False)
    with pytest.raises(FileExistsError, match=r"holds \d+ parts of a training state whose index train_state.pt is "
                                              r"missing; restore train_state.pt and pass `resume=True`"):
        pretrain(tiny_config(steps=3, max_file_mb=CAP_MB), PRIOR, run, progress=False)
    assert parts(run) == kept  # nothing deleted without overwrite=True
