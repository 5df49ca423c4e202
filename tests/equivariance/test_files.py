"""`equibench equivariance` end to end: the results folder it writes and its bad inputs."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from equibench.cli import app
from equibench.equivariance.files import describe_checkpoint
from equibench.model import default_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = (DATA / "tiny-equitabpfn.pt", DATA / "tiny-tabpfn-star.pt")


def _cli(tmp_path, *args):
    checkpoints = [arg for path in TINY for arg in ("--checkpoints", str(path))]
    return CliRunner().invoke(app, ["equivariance", *checkpoints, "--out", str(tmp_path), *args])


def test_cli_writes_the_tables_figures_and_readme(tmp_path):
    result = _cli(tmp_path, "--classes", "3,12", "--ensembles", "1,2", "--datasets", "2", "--rows", "64",
                  "--toy-grid", "10")
    assert result.exit_code == 0, result.output
    expected = {"equivariance.csv", "equivariance.md", "equivariance-gap.png", "equivariance-gap.pdf",
                "nine-point-toy.png", "nine-point-toy.pdf", "README.md"}
    assert {p.name for p in tmp_path.iterdir()} == expected
    frame = pd.read_csv(tmp_path / "equivariance.csv")
    assert set(zip(frame.checkpoint, frame.K)) == {("tiny-equitabpfn", 3), ("tiny-tabpfn-star", 3),
                                                   ("tiny-equitabpfn", 12)}
    assert "K=12 skipped" in result.output and "K=12 skipped" in (tmp_path / "README.md").read_text()
    # the grey reference points name their source
    assert "The grey reference points are the values of the project's specification" in (tmp_path / "README.md").read_text()
    for label in ("TabPFNv1 (ECOC >10)", "TabPFNv2 (ECOC >10)"):  # the toy's default rows, without weights here
        assert f"9-point toy: {label} not drawn (" in (tmp_path / "README.md").read_text()
    assert not math.isnan(frame.argmax_change_std.iloc[0])
    table = (tmp_path / "equivariance.md").read_text().splitlines()
    assert table[0] == "| checkpoint | arch | K | ensemble | arg-max changes (%) | log-prob RMS | datasets |"
    assert table[1] == "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
    assert any(line.startswith("| tiny-equitabpfn | EquiTabPFN | 3 | 1 | 0.00 ± 0.00 |") for line in table)
    assert "| tiny-tabpfn-star | TabPFN\\* | 3 | 1 |" in "\n".join(table)
    readme = [line for line in (tmp_path / "README.md").read_text().splitlines() if line.startswith("| ")]
    assert readme[:2] == table[:2] and set(readme) < set(table)  # the one-member rows
    assert [line.split(" | ")[3] for line in readme[2:]] == ["1", "1", "1"]
    digest = hashlib.sha256(TINY[0].read_bytes()).hexdigest()[:12]
    assert f"{TINY[0]} (sha256 {digest})" in (tmp_path / "README.md").read_text()


def test_packaged_checkpoints_are_named_without_this_machine_path():
    packaged = default_checkpoint("equitabpfn")
    described = describe_checkpoint(packaged)
    assert described.startswith(f"{packaged.name} (packaged, sha256 ") and str(packaged.parent) not in described


@pytest.mark.parametrize("args, message", [
    (["--classes", "two"], "--classes takes comma-separated integers"),
    (["--classes", "1,3"], "class counts K must be at least 2"),
    (["--ensembles", "0,2"], "ensemble sizes must be at least 1"),
    (["--datasets", "0"], "number of datasets must be at least 1"),
    (["--rows", "8"], "fewer than 2 per class"),
    (["--checkpoints", "/no/such.pt"], "does not exist"),
])
def test_cli_bad_input(tmp_path, args, message):
    result = CliRunner().invoke(app, ["equivariance", "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "out").exists()
