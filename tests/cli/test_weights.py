"""``--weights METHOD=PATH``: the one option that gives methods their weights, declared per
method in the registry; its refusals and the environment variables behind it."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from equibench.baselines.base import Method
from equibench.baselines.registry import METHODS, MethodSpec, UserWeights, weights_methods
from equibench.baselines.settings import MethodOptions, UserWeightsSettings
from equibench.cli import app
from equibench.cli.failures import with_flags
from equibench.cli.options import weights_map
from equibench.errors import InvalidInputError, MethodUnavailableError
from equibench.evaluate import EvaluateConfig

TAKERS = ("the methods that take weights: equitabpfn, tabpfn-star, equitabpfn-ft, tabpfn-star-ft, equitabpfn-official, tabpfn-v1, tabpfn-v2, tabpfn, "
          "tabicl")
DEMO = ["--suite", "demo", "--folds", "0", "--jobs", "1", "--no-progress"]


def _settings(out) -> dict:
    return json.loads((out / "manifest.json").read_text())["settings"]["methods"]


def test_values_are_split_at_the_first_equals_sign():
    assert weights_map(["tabicl=a=b.ckpt", " tabpfn-v1=runs/w/"]) == {"tabicl": "a=b.ckpt", "tabpfn-v1": "runs/w/"}
    assert weights_map(None) == {}


@pytest.mark.parametrize("args, line", [
    (["--weights", "tabicl"], f"--weights takes METHOD=PATH, got 'tabicl'; {TAKERS}"),
    (["--weights", "=x.ckpt"], f"--weights takes METHOD=PATH, got '=x.ckpt'; {TAKERS}"),
    (["--weights", "tabicl="], f"--weights takes METHOD=PATH, got 'tabicl='; {TAKERS}"),
    (["--weights", "nope=x"], f"--weights: 'nope' is not a method; {TAKERS}"),
    (["--weights", "knn=x"], f"--weights: 'knn' takes no weights; {TAKERS}"),
    (["--weights", "tabicl=a", "--weights", "tabicl=b"], "--weights gives tabicl twice ('a' and 'b'); give it once"),
])
def test_bad_values_are_one_line_naming_the_flag_and_the_methods(tmp_path, args, line):
    result = CliRunner().invoke(app, ["evaluate", *DEMO, "--methods", "knn", "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and result.stderr == f"error: {line}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["boundaries"], ["equivariance", "--classes", "2", "--datasets", "1"]])
def test_the_other_commands_with_weights_refuse_alike(tmp_path, command):
    result = CliRunner().invoke(app, [*command, "--out", str(tmp_path / "out"), "--weights", "knn=x"])
    assert result.exit_code == 2 and result.stderr == f"error: --weights: 'knn' takes no weights; {TAKERS}\n"


def test_a_library_message_naming_an_entry_of_weights_reads_as_the_flag():
    evaluate = typer.main.get_command(app).commands["evaluate"]
    assert with_flags("no weights: pass `weights={'tabicl': 'FILE'}` or set X", evaluate) == \
        "no weights: pass --weights tabicl=FILE or set X"
    assert with_flags("`weights={'tabicl': '/a b/x.ckpt'}` is not a TabICL checkpoint", evaluate) == \
        "--weights tabicl=/a b/x.ckpt is not a TabICL checkpoint"


def test_weights_beat_the_environment_variable_which_gives_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("EQUIBENCH_TABPFN_WEIGHTS", "/env")
    (tmp_path / "given").mkdir()
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["evaluate", *DEMO, "--methods", "tabpfn-v1,tabpfn-v2", "--out", str(out),
                                      "--weights", f"tabpfn-v2={tmp_path / 'given'}"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert _settings(out)["tabpfn-v1"]["tabpfn_weights"] == "/env"  # a stale variable: its cells are skipped
    assert _settings(out)["tabpfn-v2"]["tabpfn_weights"] == str(tmp_path / "given")


@pytest.mark.parametrize("method, path, found", [
    ("tabicl", "tabicl-classifer.ckpt", "no such file or folder"),
    ("tabicl", "weights", "a folder, not a file"),
    ("tabpfn-v2", "tabpfn-wieghts", "no such file or folder"),
    ("tabpfn-v2", "notes.txt", "a file, not a folder"),
    ("equitabpfn-official", "official.pt", "no such file or folder"),
])
def test_a_weights_path_that_is_not_there_is_refused_before_any_cell(tmp_path, monkeypatch, method, path, found):
    """A typo in --weights is bad input (exit 2, nothing written), not every cell of the method
    skipped with exit 0; the library refuses it alike."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights").mkdir()
    (tmp_path / "notes.txt").write_text("weights are in weights/\n")
    result = CliRunner().invoke(app, ["evaluate", *DEMO, "--methods", f"knn,{method}", "--out", "out",
                                      "--weights", f"{method}={path}"])
    what = METHODS[method].weights.what
    assert result.exit_code == 2 and result.stderr == (f"error: --weights {method}={path}: {found}; give {what}, "
                                                       f"or leave it out to skip {method}'s cells\n")
    assert not (tmp_path / "out").exists()
    with pytest.raises(InvalidInputError, match=found):
        EvaluateConfig(suite="demo", weights={method: path})


@dataclass(frozen=True)
class _PriorSettings(UserWeightsSettings):
    """A test method's settings: its weights, and what they are."""

    user_weights = UserWeights("a file of class counts", env="EQUIBENCH_TEST_PRIOR_WEIGHTS")
    weights: str | None = None

    @classmethod
    def from_options(cls, options: MethodOptions, weights: str | None = None) -> _PriorSettings:
        return cls(weights=weights)

    def fingerprint(self) -> dict:
        return {"weights": self.weights}


class _ClassPrior(Method):
    """Predicts the training classes' frequencies, once it has weights."""

    settings: _PriorSettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        if not self.settings.weights:
            raise MethodUnavailableError(self.settings.no_weights(self.name))
        self.prior_ = np.bincount(y, minlength=n_seen) / len(y)

    def _predict_proba(self, X):
        return np.tile(self.prior_, (len(X), 1))


def test_a_method_declared_in_the_registry_takes_weights_with_no_other_change(tmp_path, monkeypatch):
    monkeypatch.setitem(METHODS, "class-prior", MethodSpec("class-prior", "ClassPrior", _PriorSettings,
                                                           lambda: _ClassPrior, cost=1))
    monkeypatch.delenv("EQUIBENCH_TEST_PRIOR_WEIGHTS", raising=False)
    assert weights_methods()[-1] == "class-prior"
    runner = CliRunner()
    row = next(row for row in json.loads(runner.invoke(app, ["methods", "--json"]).stdout)
               if row["method"] == "class-prior")
    assert row["needs_weights"] and row["weights_option"] == "--weights class-prior=FILE"
    assert row["weights_env"] == "EQUIBENCH_TEST_PRIOR_WEIGHTS"
    evaluate = ["evaluate", *DEMO, "--methods", "class-prior"]
    result = runner.invoke(app, [*evaluate, "--out", str(tmp_path / "none")], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert ("class-prior: 6 cells skipped: no weights: pass --weights class-prior=FILE or set "
            "EQUIBENCH_TEST_PRIOR_WEIGHTS: a file of class counts") in result.stdout
    (tmp_path / "counts.txt").write_text("1 1 1\n")
    result = runner.invoke(app, [*evaluate, "--out", str(tmp_path / "given"), "--weights",
                                 f"class-prior={tmp_path / 'counts.txt'}"])
    assert result.exit_code == 0 and "this run: 6 ok" in result.stdout, result.output
    assert _settings(tmp_path / "given")["class-prior"]["weights"] == str(tmp_path / "counts.txt")
    monkeypatch.setenv("EQUIBENCH_TEST_PRIOR_WEIGHTS", "/env")
    result = runner.invoke(app, [*evaluate, "--out", str(tmp_path / "env")])
    assert result.exit_code == 0 and "this run: 6 ok" in result.stdout, result.output
    assert _settings(tmp_path / "env")["class-prior"]["weights"] == "/env"
