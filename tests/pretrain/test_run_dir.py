"""The run folder: a new run never replaces another's files, resume needs a saved state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equibench.pretrain import pretrain
from equibench.pretrain.run_dir import CONFIG_FILE, LOG_FILE, STATE_FILE, check_fresh, start

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
