"""The inference settings study (benchmarks/inference_settings.py): the fixed task split and
a study that resumes from its CSV after a kill with the same scores as an uninterrupted one."""

from __future__ import annotations

import dataclasses
import sys

import pandas as pd
import pytest
from sklearn import datasets

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.tasks import demo_task, stratified_folds


class _Killed(Exception):
    pass


def test_halves_alternate_by_sorted_id_within_each_group(benchmark_module):
    study = benchmark_module("inference_settings")
    groups = {30: "<=10", 10: "<=10", 20: "<=10", 5: ">10", 7: ">10"}
    assert study.halves(groups) == {10: "selection", 20: "held-out", 30: "selection", 5: "selection", 7: "held-out"}


def small_task(name: str, task_id: str, rows: int = 300):
    """The first ``rows`` rows of a demo task (10 stratified folds), as an OpenML task id."""
    task = demo_task(name)
    y = task.y[:rows]
    return dataclasses.replace(task, task_id=task_id, X=task.X.iloc[:rows], y=y, test_folds=stratified_folds(y))


@pytest.mark.parametrize("classifier", [EquiTabPFNClassifier, TabPFNStarClassifier])
def test_the_first_setting_is_the_classifiers_defaults(benchmark_module, classifier):
    study = benchmark_module("inference_settings")
    defaults = classifier().get_params()
    assert {name: defaults[name] for name in next(iter(study.SETTINGS.values()))} == next(iter(study.SETTINGS.values()))


@pytest.fixture
def small_study(benchmark_module, monkeypatch, tiny_equi_path):
    """The study on two <=10-class tasks, one >10-class task and the iris bundled dataset, with
    two settings of the tiny checkpoint."""
    study = benchmark_module("inference_settings")
    tasks = {int(i): small_task(name, task_id=i) for i, name in [("11", "iris"), ("12", "wine"), ("13", "synthetic-15")]}
    monkeypatch.setattr(study, "load_cached_tasks", lambda cache_dir: tasks)
    monkeypatch.setattr(study, "BUNDLED_DATASETS", {"iris": datasets.load_iris})
    monkeypatch.setattr(study, "SETTINGS", {
        "1 none": {"n_estimators": 1, "feature_transforms": ("none",), "softmax_temperature": 0.8},
        "2 none+quantile T1.0": {"n_estimators": 2, "feature_transforms": ("none", "quantile"), "softmax_temperature": 1.0},
    })

    def run(csv):
        monkeypatch.setattr(sys, "argv", ["inference_settings.py", "--openml-cache", "unused",
                                          "--checkpoint", str(tiny_equi_path), "--csv", str(csv)])
        study.main()

    return study, run


def test_a_killed_study_resumes_with_the_scores_of_an_uninterrupted_one(small_study, monkeypatch, tmp_path, capsys):
    study, run = small_study
    run(tmp_path / "whole.csv")
    whole = pd.read_csv(tmp_path / "whole.csv")
    assert len(whole) == 2 * (5 + 10 + 10 + 10)  # settings x (bundled folds + the tasks' folds)
    assert set(whole.half) == {"bundled", "selection", "held-out"}
    assert set(whole[whole.dataset == "synthetic-15"].group) == {">10"}

    measure, calls = study.fold_scores, []

    def killed_after_8_folds(*args):
        calls.append(1)
        if len(calls) > 8:
            raise _Killed
        return measure(*args)

    monkeypatch.setattr(study, "fold_scores", killed_after_8_folds)
    with pytest.raises(_Killed):
        run(tmp_path / "resumed.csv")
    kept = pd.read_csv(tmp_path / "resumed.csv")
    # bundled iris's 5 folds are kept; the unit in flight, the OpenML task named iris too, is lost
    assert len(kept) == 5 and set(kept.task) == {-1}
    monkeypatch.setattr(study, "fold_scores", measure)
    capsys.readouterr()
    run(tmp_path / "resumed.csv")
    resumed = pd.read_csv(tmp_path / "resumed.csv")
    key = ["setting", "dataset", "fold"]
    pd.testing.assert_frame_equal(resumed.sort_values(key).reset_index(drop=True),
                                  whole.sort_values(key).reset_index(drop=True))
    table = capsys.readouterr().out
    assert "| 1 none |" in table and "| 2 none+quantile T1.0 |" in table
    assert "selection median change" in table


def test_a_finished_study_measures_nothing_again(small_study, monkeypatch, tmp_path, capsys):
    study, run = small_study
    run(tmp_path / "scores.csv")
    monkeypatch.setattr(study, "fold_scores", lambda *args: pytest.fail("a measured unit was measured again"))
    capsys.readouterr()
    run(tmp_path / "scores.csv")
    assert "<=10 selection acc" in capsys.readouterr().out


@pytest.mark.parametrize("flag, value, message", [
    ("--checkpoint", "missing.pt", "missing.pt: no such file"),
    ("--csv", "other.csv", "other.csv: not a file of this study"),
    ("--threads", "0", "--threads takes a positive number, got 0"),
])
def test_bad_arguments_get_one_line(benchmark_module, monkeypatch, tmp_path, capsys, flag, value, message):
    study = benchmark_module("inference_settings")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["inference_settings.py", "--openml-cache", "unused", flag, value])
    with pytest.raises(SystemExit) as exit_info:
        study.main()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "other.csv").read_text() == "a,b\n1,2\n"


def test_a_missing_cache_gets_one_line(benchmark_module, monkeypatch, tmp_path, capsys):
    study = benchmark_module("inference_settings")
    monkeypatch.setattr(sys, "argv", ["inference_settings.py", "--openml-cache", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit) as exit_info:
        study.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not an OpenML cache" in err
