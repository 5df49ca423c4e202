"""Training curves: a continued run's lineage, and the `equibench curves` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import InvalidInputError
from equibench.pretrain import pretrain
from equibench.pretrain.curves import (
    EQUIVARIANCE_ERROR,
    EQUIVARIANCE_SPREAD,
    plot_training_curves,
    read_lineage,
    run_labels,
)

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


def test_runs_named_alike_get_labels_that_tell_them_apart(tmp_path):
    assert list(run_labels(["runs/a", "runs/b"])) == ["a", "b"]
    labels = run_labels([tmp_path / "equitabpfn" / "deeper-6", tmp_path / "tabpfn-star" / "deeper-6", tmp_path / "x"])
    assert labels == {"equitabpfn/deeper-6": tmp_path / "equitabpfn" / "deeper-6",
                      "tabpfn-star/deeper-6": tmp_path / "tabpfn-star" / "deeper-6", "x": tmp_path / "x"}
    with pytest.raises(InvalidInputError, match="is given twice"):
        run_labels([tmp_path / "run", Path(str(tmp_path)) / "." / "run"])


def test_cli_curves_draws_every_run_of_two_named_alike(tmp_path):
    for arch in ("first", "second"):
        pretrain(tiny_config(steps=2), PRIOR, tmp_path / arch / "run", progress=False)
    result = CliRunner().invoke(app, ["curves", str(tmp_path / "first" / "run"), str(tmp_path / "second" / "run"),
                                      "--out", str(tmp_path / "curves.png")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["curves", str(tmp_path / "first" / "run"), str(tmp_path / "first" / "run"),
                                      "--out", str(tmp_path / "c.png")])
    assert result.exit_code == 2 and "is given twice" in result.output


def _png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")  # the IHDR chunk's width


def test_the_equivariance_error_observed_while_training_is_logged_and_drawn(tmp_path):
    """The top of the paper's equivariance figure: the error at each validation, per run; a
    log without it (written before it was measured) keeps the three-panel figure."""
    for arch in ("equitabpfn", "tabpfn-star"):
        pretrain(tiny_config(arch=arch, steps=1, validate_every=1), PRIOR, tmp_path / arch, progress=False)
    errors = {arch: read_lineage(tmp_path / arch)[1][EQUIVARIANCE_ERROR] for arch in ("equitabpfn", "tabpfn-star")}
    assert (errors["equitabpfn"] == 0).all() and len(errors["equitabpfn"]) == 2
    assert (errors["tabpfn-star"] > 0).all()
    plot_training_curves({"equi": tmp_path / "equitabpfn", "star": tmp_path / "tabpfn-star"}, tmp_path / "with.png")
    log = tmp_path / "tabpfn-star" / "log.jsonl"
    assert all(line["prior_equivariance_error_std"] >= 0 for line in map(json.loads, log.read_text().splitlines())
               if line["kind"] == "validation")
    plot_training_curves({"star": tmp_path / "tabpfn-star"}, tmp_path / "band.png")
    log.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != EQUIVARIANCE_SPREAD}) + "\n"
                           for line in log.read_text().splitlines()))
    plot_training_curves({"star": tmp_path / "tabpfn-star"}, tmp_path / "no-band.png")
    assert (tmp_path / "band.png").read_bytes() != (tmp_path / "no-band.png").read_bytes()  # the band is drawn
    log.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != EQUIVARIANCE_ERROR}) + "\n"
                           for line in log.read_text().splitlines()))
    plot_training_curves({"star": tmp_path / "tabpfn-star"}, tmp_path / "without.png")
    assert _png_width(tmp_path / "with.png") > _png_width(tmp_path / "without.png") * 1.2
