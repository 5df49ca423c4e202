"""The bundled-rows trend script (benchmarks/bundled_trend.py): the bar's accuracy, finer measures, clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

DATA = Path(__file__).resolve().parents[1] / "data"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bundled_trend(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports quality.py beside it
    return benchmark_module("bundled_trend")


def test_cv_row_gives_the_bars_accuracy_and_the_nearest_miss(bundled_trend):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(103, 3))
    y = (X[:, 0] + 0.8 * rng.normal(size=103) > 0).astype(int) + (X[:, 1] > 1)  # 3 classes, noisy
    model = KNeighborsClassifier(n_neighbors=7)
    row = bundled_trend.cv_row(model, X, y)
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    assert row["accuracy"] == pytest.approx(cross_val_score(model, X, y, cv=splitter).mean())
    assert 0 < row["errors"] < len(y) and row["log_loss"] > 0
    assert -1 <= row["nearest_miss"] <= 0


def test_trend_reads_arch_and_step_from_the_cards(bundled_trend):
    checkpoints = [str(DATA / "tiny-equitabpfn.pt"), str(DATA / "tiny-tabpfn-star.pt")]
    table = bundled_trend.trend(checkpoints, ["iris"])
    assert list(table.model) == ["LogisticRegression", f"equitabpfn ({checkpoints[0]})",
                                 f"tabpfn-star ({checkpoints[1]})"]
    assert table.bar[0] == pytest.approx(table.accuracy[0] - 0.01) and table.bar[1:].isna().all()
    assert all(isinstance(step, int) for step in table.step[1:])
    shown = bundled_trend.display(table)
    assert shown.loc[0, "step"] == "n/a" and shown.loc[1, "bar asks"] == "n/a"


def test_a_missing_checkpoint_is_one_line(bundled_trend, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["bundled_trend.py", str(tmp_path / "absent.pt"), "--datasets", "iris"])
    with pytest.raises(SystemExit) as exit_info:
        bundled_trend.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert "absent.pt" in err and "does not exist" in err and "Traceback" not in err


def test_threads_must_be_positive(bundled_trend, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["bundled_trend.py", str(DATA / "tiny-equitabpfn.pt"), "--threads", "0"])
    with pytest.raises(SystemExit) as exit_info:
        bundled_trend.main()
    assert exit_info.value.code == 2
    assert "--threads takes a positive number, got 0" in capsys.readouterr().err
