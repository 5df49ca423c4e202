"""`equibench score`: the tables and verdict on stdout (or JSON), the scorecard written as
Markdown and JSON with the command, the exit status by verdict, and one `error:` line for bad
input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris
from typer.testing import CliRunner

from equibench.cli import app
from equibench.cli.scoring import NOT_MET_EXIT_CODE
from equibench.pretrain import validation
from equibench.scoring import Scorecard, evaluate_criteria, run
from equibench.scoring.bar import COLUMNS


def _tiny_iris(return_X_y=True):
    X, y = load_iris(return_X_y=True)
    keep = np.concatenate([np.flatnonzero(y == label)[:10] for label in range(3)])
    return X[keep], y[keep]


def _card(ours: float) -> Scorecard:
    rows = [("bundled", "iris", "iris", 0, "EquiTabPFN", ours), ("bundled", "iris", "iris", 0, "LogisticRegression", 0.9)]
    scores = pd.DataFrame(rows, columns=list(COLUMNS))
    return Scorecard(checkpoint="m.pt", arch="equitabpfn", scores=scores, criteria=evaluate_criteria(scores, "EquiTabPFN"),
                     sha256="ab" * 32, date="2026-11-28T12:00:00+00:00", machine="AMD EPYC (2 cores)", seconds=3.0)


@pytest.fixture
def scored(monkeypatch):
    """`score_checkpoint` replaced: returns the scorecard the test sets, records its arguments."""
    calls = {}

    def fake(checkpoint, **kwargs):
        calls.update(checkpoint=checkpoint, **kwargs)
        return calls["card"]

    monkeypatch.setattr(run, "score_checkpoint", fake)
    return calls


def test_exit_status_follows_the_verdict(scored, tmp_path):
    runner = CliRunner()
    scored["card"] = _card(0.95)
    result = runner.invoke(app, ["score", "m.pt", "--folds", "3", "--threads", "2", "--n-estimators", "1",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "- EquiTabPFN iris: +5.00 points vs LogisticRegression (bar >= -1.0): met" in result.stdout
    assert "criteria were not measured" in result.stdout and "meets the bar" in result.stdout
    assert scored["folds"] == (3,) and scored["threads"] == 2 and scored["n_estimators"] == 1
    assert scored["openml_cache"] is None and str(scored["checkpoint"]) == "m.pt" and scored["progress"] is False
    scored["card"] = _card(0.85)
    result = runner.invoke(app, ["score", "m.pt", "--no-progress"])
    assert result.exit_code == NOT_MET_EXIT_CODE == 3
    assert "NOT met" in result.stdout and "does NOT meet the bar" in result.stdout


def test_out_writes_the_markdown_and_the_json_with_the_command(scored, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scored["card"] = _card(0.95)
    args = ["score", "m.pt", "--n-estimators", "2", "--out", "q.md", "--no-progress", "--out", "q.json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    command = "equibench score m.pt --n-estimators 2 --out q.md --out q.json --no-progress"  # the options' order
    data = json.loads((tmp_path / "q.json").read_text())
    assert data == {**scored["card"].to_dict(), "command": command}
    assert data["sha256"] == "ab" * 32 and data["date"] and data["machine"] and data["seconds"] == 3.0
    assert [(c["name"], c["met"]) for c in data["criteria"]][0] == ("iris", True)
    assert data["scores"][0] == {"group": "bundled", "task": "iris", "dataset": "iris", "fold": 0,
                                 "method": "EquiTabPFN", "accuracy": 0.95}
    markdown = (tmp_path / "q.md").read_text()
    assert markdown == Scorecard.from_dict(data).to_markdown() and f"Command: `{command}`" in markdown
    assert result.stdout == markdown + "\n"


def test_json_output_is_one_document(scored):
    scored["card"] = _card(0.85)
    result = CliRunner().invoke(app, ["score", "m.pt", "--json"])
    assert result.exit_code == NOT_MET_EXIT_CODE
    data = json.loads(result.stdout)
    assert data["met"] is False and data["criteria"][0]["name"] == "iris" and data["criteria"][0]["met"] is False
    assert [c["measured"] for c in data["criteria"][1:]] == [None, None, None]


def test_a_tiny_checkpoint_is_scored_end_to_end(monkeypatch, tiny_equi_path):
    monkeypatch.setattr(validation, "BUNDLED_DATASETS", {"iris": _tiny_iris})
    result = CliRunner().invoke(app, ["score", str(tiny_equi_path), "--n-estimators", "1", "--device", "cpu"])
    assert result.exit_code in (0, NOT_MET_EXIT_CODE), result.output
    assert "| iris |" in result.stdout and "EquiTabPFN iris:" in result.stdout
    assert "5/5" in result.stderr  # the progress, on stderr


@pytest.mark.parametrize("args, message", [
    (["missing.pt"], "does not exist"),
    (["notes.pt"], "not a readable checkpoint"),
    (["{ckpt}", "--openml-cache", "."], "--openml-cache '.' is not an OpenML cache"),
    (["{ckpt}", "--openml-cache", "nowhere"], "--openml-cache 'nowhere' is not a folder"),
    (["{ckpt}", "--openml-cache", "empty"], "holds no task"),
    (["{ckpt}", "--openml-cache", ".", "--folds", "12"], "--folds must be in 0..9"),
    (["{ckpt}", "--folds", "3-1"], "--folds: the range 3-1 runs backwards"),
    (["{ckpt}", "--threads", "0"], "--threads must be a positive number, got 0"),
])
def test_bad_input_is_one_error_line_and_status_2(args, message, tmp_path, monkeypatch, tiny_equi_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.pt").write_text("not a checkpoint")
    (tmp_path / "empty" / "org" / "openml" / "www" / "tasks").mkdir(parents=True)
    args = [arg.replace("{ckpt}", str(tiny_equi_path)) for arg in args]
    result = CliRunner().invoke(app, ["score", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("out, message", [
    ("reports", "--out 'reports' is a folder; pass a file path such as 'reports/score.md'"),
    ("score.txt", "--out 'score.txt': the file name must end in .md (Markdown) or .json (JSON), e.g. 'score.md'"),
    ("nowhere/score.md", "the folder 'nowhere' does not exist; create it first"),
    ("locked/score.md", "the folder 'locked' is not writable; choose another place"),
])
def test_an_unwritable_out_is_refused_before_any_scoring(out, message, scored, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked").chmod(0o555)
    monkeypatch.setattr("os.access", lambda path, mode: str(path) != "locked")  # root ignores permissions
    scored["card"] = _card(0.95)
    result = CliRunner().invoke(app, ["score", "m.pt", "--out", out, "--no-progress"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and message in result.stderr
    assert "checkpoint" not in scored  # refused before the scoring started


def test_an_existing_out_file_is_kept_unless_overwrite(scored, tmp_path, monkeypatch):
    """A scorecard is never replaced without a word: an existing --out is refused before the
    scoring, naming --overwrite, as `export` does; with it the file is replaced."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.md").write_text("my notes\n")
    scored["card"] = _card(0.95)
    result = CliRunner().invoke(app, ["score", "m.pt", "--out", "q.json", "--out", "q.md", "--no-progress"])
    assert result.exit_code == 2 and result.stderr == ("error: --out 'q.md' already exists; pass --overwrite to "
                                                       "replace it, or another path\n")
    assert "checkpoint" not in scored and (tmp_path / "q.md").read_text() == "my notes\n"
    assert not (tmp_path / "q.json").exists()
    result = CliRunner().invoke(app, ["score", "m.pt", "--out", "q.md", "--overwrite", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "q.md").read_text().startswith(result.stdout.splitlines()[0])
