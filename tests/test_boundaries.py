"""``equibench boundaries``: the decision-boundary figure on a coarse grid with the tiny test
checkpoints: shapes, determinism, a method without weights skipped with its reason in the
caption, bad input as one error line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from equibench.baselines.settings import MethodOptions
from equibench.boundaries import DATASET_NAMES, BoundaryConfig, caption, make_splits, measure_boundaries, run_boundaries
from equibench.cli import app
from equibench.errors import InvalidInputError, MethodUnavailableError

GRID = 6


@pytest.fixture
def config(tiny_equi_path, tiny_star_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    options = MethodOptions(weights={"equitabpfn": str(tiny_equi_path), "tabpfn-star": str(tiny_star_path)})
    return BoundaryConfig(methods=("equitabpfn", "tabpfn-v1", "knn"), samples=40, grid=GRID, options=options)


def test_splits_are_standardised_stratified_and_gridded():
    splits = make_splits(samples=50, grid=GRID, seed=0)
    assert tuple(splits) == DATASET_NAMES
    for split in splits.values():
        assert split.X_train.shape == (30, 2) and split.X_test.shape == (20, 2)
        assert split.X_train.dtype == np.float32 and set(split.y_test) == {0, 1}
        assert split.xx.shape == split.yy.shape == (GRID, GRID) and split.grid_points.shape == (GRID * GRID, 2)


def test_panels_and_the_skipped_method_with_its_reason(config):
    result = measure_boundaries(config)
    assert result.methods == ["equitabpfn", "knn"]
    assert list(result.skipped) == ["tabpfn-v1"] and result.skipped["tabpfn-v1"].startswith("no weights")
    for dataset in DATASET_NAMES:
        for method in result.methods:
            probability = result.probabilities[dataset, method]
            assert probability.shape == (GRID, GRID) and ((0 <= probability) & (probability <= 1)).all()
            assert 0 <= result.accuracy[dataset, method] <= 1
    assert "Not shown: TabPFNv1 (no weights: pass `weights={'tabpfn-v1': 'DIR'}` or set EQUIBENCH_TABPFN_WEIGHTS" in caption(result)
    assert "ECOC" not in caption(result)  # two-class data: the note on more than 10 classes does not apply
    table = result.table()
    assert len(table) == 3 * 3 and set(table[table.status == "skipped"].method) == {"tabpfn-v1"}


def test_the_pfn_panels_are_the_same_for_the_same_seed(config):
    config = BoundaryConfig(**{**config.__dict__, "methods": ("equitabpfn",)})
    first, second = measure_boundaries(config), measure_boundaries(config)
    assert all(np.array_equal(first.probabilities[key], second.probabilities[key]) for key in first.probabilities)
    other = make_splits(config.samples, GRID, seed=1)["moons"]
    assert not np.array_equal(other.X_train, make_splits(config.samples, GRID, seed=0)["moons"].X_train)


def test_the_files_are_the_same_for_the_same_seed(config, tmp_path):
    config = BoundaryConfig(**{**config.__dict__, "methods": ("knn", "tabpfn-v1")})
    _, first = run_boundaries(config, tmp_path / "a")
    _, second = run_boundaries(config, tmp_path / "b")
    assert [path.name for path in first] == ["decision-boundaries.png", "decision-boundaries.pdf",
                                             "decision-boundaries.csv"]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second))
    table = pd.read_csv(first[2])
    assert table.loc[table.method == "tabpfn-v1", "reason"].str.startswith("no weights").all()
    assert table.loc[table.method == "knn", "accuracy"].between(0.5, 1).all()


def test_no_method_able_to_run_is_an_error(config, tmp_path):
    with pytest.raises(MethodUnavailableError, match="no method could run: tabpfn-v1: no weights"):
        run_boundaries(BoundaryConfig(methods=("tabpfn-v1",), grid=GRID, options=config.options), tmp_path)


@pytest.mark.parametrize("changes, message", [
    ({"methods": ("knn", "nope")}, "unknown method 'nope'"),
    ({"methods": ("knn", "knn")}, "listed more than once"),
    ({"grid": 1}, "at least 2 points per side"),
    ({"samples": 5}, "`samples` must be at least 20"),
])
def test_bad_settings_are_refused(changes, message):
    with pytest.raises(InvalidInputError, match=message):
        BoundaryConfig(**changes)


def test_the_command_prints_the_accuracies_and_the_caption(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    result = CliRunner().invoke(app, ["boundaries", "--out", str(tmp_path), "--methods", "knn,tabpfn-v2", "--grid",
                                      str(GRID), "--samples", "40", "--no-progress"], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "Not shown: TabPFNv2 (no weights: pass --weights tabpfn-v2=DIR or set EQUIBENCH_TABPFN_WEIGHTS" in result.stdout
    assert "skipped" in result.stdout
    assert (tmp_path / "decision-boundaries.pdf").is_file()
    bad = CliRunner().invoke(app, ["boundaries", "--out", str(tmp_path), "--grid", "1"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --grid needs at least 2 points per side")
