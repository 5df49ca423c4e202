"""The run folder: a new run never replaces another's files, resume needs a saved state, and
the saved state alone rebuilds model.pt exactly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import InvalidInputError
from equibench.model import load_checkpoint
from equibench.pretrain import model_file, pretrain
from equibench.pretrain.run_dir import CONFIG_FILE, LOG_FILE, MODEL_FILE, STATE_FILE, check_fresh, start

from .common import PRIOR, tiny_config


def test_run_directory_guards(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; start with resume=False"):
        pretrain(tiny_config(), PRIOR, tmp_path / "run", resume=True, progress=False)
    pretrain(tiny_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(FileExistsError, match="pass resume=True to continue it, overwrite=True to replace it"):
        pretrain(tiny_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)


def test_check_fresh_names_the_files_of_another_run(tmp_path):
    (tmp_path / LOG_FILE).write_text("")
    with pytest.raises(FileExistsError, match=f"already holds {LOG_FILE} .*pass overwrite=True"):
        check_fresh(tmp_path, overwrite=False)
    check_fresh(tmp_path, overwrite=True)
    (tmp_path / STATE_FILE).write_text("")
    with pytest.raises(FileExistsError, match="already holds a training run"):
        check_fresh(tmp_path, overwrite=False)
    with pytest.raises(FileExistsError, match="is an existing file, not a folder"):
        check_fresh(tmp_path / LOG_FILE, overwrite=False)


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


def test_a_state_without_its_card_refuses_to_rebuild_model_pt(tmp_path):
    run = tmp_path / "run"
    pretrain(tiny_config(steps=3), PRIOR, run, progress=False)
    state = torch.load(run / STATE_FILE, weights_only=True)
    del state["card"]  # as saved by equibench before the card was kept in the state
    torch.save(state, run / STATE_FILE)
    (run / MODEL_FILE).unlink()
    with pytest.raises(InvalidInputError, match="without the model card.*resume the run for at least one checkpoint"):
        model_file(run)
    assert not (run / MODEL_FILE).exists()
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "x.pt")])
    assert result.exit_code == 2 and "without the model card" in result.output and "Traceback" not in result.output
