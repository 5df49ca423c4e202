"""Training curves: a continued run's lineage, and the `equibench curves` command."""

from __future__ import annotations

from typer.testing import CliRunner

from equibench.cli import app
from equibench.pretrain import pretrain
from equibench.pretrain.curves import read_lineage

from .common import PRIOR, tiny_config


def test_the_curves_of_a_continued_run_start_with_the_first_run(tmp_path):
    first = pretrain(tiny_config(steps=3), PRIOR, tmp_path / "first", progress=False).model_path
    pretrain(tiny_config(steps=3, init_from=str(first), seed=1), PRIOR, tmp_path / "second", progress=False)
    steps, validations, starts = read_lineage(tmp_path / "second")
    assert list(steps["step"]) == [1, 2, 3, 4, 5, 6] and starts == [3]
    assert list(validations["step"]) == [0, 3, 3, 6]


def test_cli_curves(tmp_path):
    pretrain(tiny_config(steps=2), PRIOR, tmp_path / "run", progress=False)
    runner = CliRunner()
    result = runner.invoke(app, ["curves", str(tmp_path / "run"), "--out", str(tmp_path / "curves.png")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    result = runner.invoke(app, ["curves", str(tmp_path / "missing"), "--out", str(tmp_path / "c.png")])
    assert result.exit_code == 2 and "pretraining output directory" in result.output
