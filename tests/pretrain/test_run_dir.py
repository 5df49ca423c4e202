"""The run folder: a new run never replaces another's files, resume needs a saved state, one
process at a time writes it, and the saved state alone rebuilds model.pt exactly."""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from concurrency import twice_at_once
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import FolderInUseError, InvalidInputError
from equibench.model import load_checkpoint
from equibench.pretrain import model_file, pretrain
from equibench.pretrain.run_dir import CONFIG_FILE, LOG_FILE, MODEL_FILE, STATE_FILE, check_fresh, start

from .common import PRIOR, log_records, tiny_config


def test_run_directory_guards(tmp_path):
    with pytest.raises(FileNotFoundError, match="so there is no run to continue; leave out `resume=True` to start one"):
        pretrain(tiny_config(), PRIOR, tmp_path / "run", resume=True, progress=False)
    assert not (tmp_path / "run").exists()  # a refused run leaves no folder behind
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("the user's file\n")
    with pytest.raises(FileNotFoundError, match="does not exist, so there is no run to continue"):
        pretrain(tiny_config(), PRIOR, users, resume=True, progress=False)
    with pytest.raises(FileNotFoundError):
        model_file(users)
    assert (users / "notes.txt").read_text() == "the user's file\n"  # a folder it did not create is kept whole
    assert {p.name for p in users.iterdir()} <= {"notes.txt", ".equibench.lock"}
    (tmp_path / "file").write_text("the user's file\n")
    for resume in (False, True):
        with pytest.raises(FileExistsError, match="is an existing file, not a folder"):
            pretrain(tiny_config(), PRIOR, tmp_path / "file", resume=resume, progress=False)
    assert (tmp_path / "file").read_text() == "the user's file\n"
    pretrain(tiny_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(FileExistsError, match="pass `resume=True` to continue it, `overwrite=True` to replace it"):
        pretrain(tiny_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)


def test_check_fresh_names_the_files_of_another_run(tmp_path):
    (tmp_path / LOG_FILE).write_text("")
    with pytest.raises(FileExistsError, match=f"already holds {LOG_FILE} .*pass `overwrite=True`"):
        check_fresh(tmp_path, overwrite=False)
    check_fresh(tmp_path, overwrite=True)
    (tmp_path / STATE_FILE).write_text("")
    with pytest.raises(FileExistsError, match="already holds a training run"):
        check_fresh(tmp_path, overwrite=False)


def test_start_keeps_the_log_up_to_the_saved_step_and_drops_a_torn_last_line(tmp_path):
    lines = ['{"kind": "step", "step": 1}', '{"kind": "step", "step": 2}', '{"kind": "step", "st']
    (tmp_path / LOG_FILE).write_text("\n".join(lines))
    start(tmp_path, {"train": {}}, resume_step=1)
    assert (tmp_path / LOG_FILE).read_text() == lines[0] + "\n"
    assert json.loads((tmp_path / CONFIG_FILE).read_text()) == {"train": {}}
    (tmp_path / LOG_FILE).write_text("\n".join([lines[0], "{damaged", lines[1]]))
    with pytest.raises(ValueError, match="line 2 is damaged"):
        start(tmp_path, {"train": {}}, resume_step=2)


def test_a_kill_while_start_rewrites_the_log_keeps_the_old_log(tmp_path, monkeypatch):
    lines = "".join(f'{{"kind": "step", "step": {step}}}\n' for step in range(1, 5))
    (tmp_path / LOG_FILE).write_text(lines)
    real_write_text = Path.write_text

    def killed_halfway(path, text, *args, **kwargs):
        real_write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt("simulated kill")

    monkeypatch.setattr(Path, "write_text", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        start(tmp_path, {"train": {}}, resume_step=2)
    monkeypatch.undo()
    assert (tmp_path / LOG_FILE).read_text() == lines
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_FILE]  # no torn config.json, no temporary file


@pytest.mark.parametrize("changes", [
    {"schedule": "schedule-free", "model_overrides": {"norm_first": True}},  # model.pt holds the averaged weights
    {"arch": "tabpfn-star", "schedule": "cosine"},
], ids=["equitabpfn-schedule-free", "tabpfn-star-cosine"])
def test_model_pt_is_rebuilt_exactly_from_the_training_state(tmp_path, changes):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=4, checkpoint_every=4, validate_every=2, **changes), PRIOR, run, progress=False)
    written_model, written_card = load_checkpoint(run / MODEL_FILE)
    (run / MODEL_FILE).rename(tmp_path / "written.pt")  # a committed run keeps no model.pt

    assert model_file(run) == run / MODEL_FILE
    rebuilt_model, rebuilt_card = load_checkpoint(run / MODEL_FILE)
    assert dataclasses.asdict(rebuilt_card) == dataclasses.asdict(written_card)
    assert rebuilt_card.steps == 4 and rebuilt_card.metrics["step"] == 4
    written, rebuilt = written_model.state_dict(), rebuilt_model.state_dict()
    assert written.keys() == rebuilt.keys()
    assert all(torch.equal(written[name], rebuilt[name]) for name in written)
    before = (run / MODEL_FILE).read_bytes()
    model_file(run)  # an existing model.pt is used as it is
    assert (run / MODEL_FILE).read_bytes() == before


def test_export_of_a_run_folder_rebuilds_a_missing_model_pt(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3, schedule="schedule-free"), PRIOR, run, progress=False)
    written = load_checkpoint(run / MODEL_FILE)[0].state_dict()
    (run / MODEL_FILE).unlink()
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "shipped.pt"),
                                      "--weights-dtype", "float32"])
    assert result.exit_code == 0, result.output
    shipped, card = load_checkpoint(tmp_path / "shipped.pt")
    assert card.steps == 3 and all(torch.equal(written[k], v) for k, v in shipped.state_dict().items())


def test_a_state_without_its_card_is_refused_as_damaged(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3), PRIOR, run, progress=False)
    state = torch.load(run / STATE_FILE, weights_only=True)
    del state["card"]
    torch.save(state, run / STATE_FILE)
    (run / MODEL_FILE).unlink()
    with pytest.raises(InvalidInputError, match=r"is unreadable \(ValueError: not a training state\)"):
        model_file(run)
    assert not (run / MODEL_FILE).exists()
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "x.pt")])
    assert result.exit_code == 2 and "not a training state" in result.output and "Traceback" not in result.output


@pytest.fixture
def held_folder(tmp_path):
    """``tmp_path / "run"`` locked by another process (as a running pretrain holds it); yields that process."""
    run = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from equibench.outdir_lock import locked_folder\n"
         f"with locked_folder({str(run)!r}):\n    print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=tmp_path,  # not the checkout: import the installed equibench
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def _run_files(run: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in run.iterdir() if not path.name.startswith(".equibench.lock")}


def test_a_run_folder_in_use_refuses_a_second_pretrain_and_a_rebuild(tmp_path, held_folder):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3), PRIOR, tmp_path / "done", progress=False)
    for name in (STATE_FILE, CONFIG_FILE, LOG_FILE):  # a saved run, as if the holder were training it
        (run / name).write_bytes((tmp_path / "done" / name).read_bytes())
    before = _run_files(run)
    for resume in (True, False):
        with pytest.raises(FolderInUseError, match=rf"in use by process {held_folder.pid} .*wait for it to stop"):
            pretrain(tiny_config(steps=3), PRIOR, run, resume=resume, overwrite=True, progress=False)
    with pytest.raises(FolderInUseError, match=f"wait for its next checkpoint, which writes {MODEL_FILE}"):
        model_file(run)
    result = CliRunner().invoke(app, ["pretrain", "--out", str(run), "--size", "tiny", "--steps", "3", "--resume"])
    assert result.exit_code == 2 and f"process {held_folder.pid}" in result.output
    assert "Traceback" not in result.output
    assert _run_files(run) == before  # nothing read, written or removed by the refused processes
    (run / MODEL_FILE).write_bytes((tmp_path / "done" / MODEL_FILE).read_bytes())
    assert model_file(run) == run / MODEL_FILE  # an existing model.pt needs no lock: export while training

    held_folder.kill()
    held_folder.wait()
    (run / MODEL_FILE).unlink()
    assert load_checkpoint(model_file(run))[1].steps == 3  # the OS released the killed holder's lock


def test_two_resumes_at_once_log_every_step_once(tmp_path):
    run = tmp_path / "run"
    config = tiny_config(steps=60, checkpoint_every=5, validate_every=30)
    pretrain(config, PRIOR, run, progress=False, time_limit_s=0)  # checkpointed after step 1
    outcomes = twice_at_once(lambda: pretrain(config, PRIOR, run, resume=True, progress=False))
    assert len(outcomes) == 2 and any(not isinstance(outcome, FolderInUseError) for outcome in outcomes)
    steps = collections.Counter(record["step"] for record in log_records(run) if record["kind"] == "step")
    assert sorted(steps) == list(range(1, 61)) and set(steps.values()) == {1}
    assert load_checkpoint(run / MODEL_FILE)[1].steps == 60
