"""`equibench evaluate`: preprocessing, alignment, metrics, suites, the results store,
failure handling and resume after SIGKILL."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import accuracy_score, f1_score, log_loss, roc_auc_score
from threadpoolctl import threadpool_limits
from typer.testing import CliRunner

from equibench.baselines import knn as knn_module
from equibench.baselines.knn import KNNMethod
from equibench.cli import app
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.backends import LocalBackend
from equibench.evaluate.config import prepared_settings
from equibench.evaluate.metrics import cell_metrics
from equibench.evaluate.plan import plan_cells, task_infos
from equibench.evaluate.results_store import ResultsStore
from equibench.evaluate.tabzilla import TabZillaPreprocessor
from equibench.model import default_checkpoint
from equibench.tasks.suites import load_suite

DATA = Path(__file__).parents[1] / "data"
COMMITTED = Path(__file__).parents[2] / "results" / "demo"
QUICK = dict(suite="demo", methods=("knn", "linear-model"), folds=(0,))


def _tiny(**changes):
    """Both PFNs on the tiny fixed checkpoints (``weights`` in ``changes`` replaces some), so
    tests never depend on the shipped ones."""
    weights = {"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt"),
               **changes.pop("weights", {})}
    return EvaluateConfig(**{**QUICK, "weights": weights, **changes})


# -- preprocessing, alignment, metrics -----------------------------------------------------

def test_preprocessing_is_fitted_on_the_train_rows_only():
    rng = np.random.default_rng(0)
    train = pd.DataFrame({"num": rng.normal(5.0, 2.0, 200), "cat": rng.choice(["a", "b", "c"], 200)})
    test = pd.DataFrame({"num": [np.nan, 1e6], "cat": ["zzz", np.nan]})
    y = rng.integers(0, 2, 200)
    fitted = TabZillaPreprocessor(np.array([False, True])).fit(train, y)
    # the missing test value is imputed with the TRAIN mean: it maps where the train mean maps
    at_mean = fitted.transform(pd.DataFrame({"num": [train["num"].mean()], "cat": ["a"]}))
    out = fitted.transform(test)
    assert out[0, 0] == pytest.approx(at_mean[0, 0], abs=1e-6)
    # an unseen level and a missing one share code -1 (scaled with the train statistics)
    assert out[0, 1] == out[1, 1] and np.isfinite(out).all()
    # refitting with test rows appended would change the quantiles: the transform of the train
    # rows does not depend on anything but the train rows
    again = TabZillaPreprocessor(np.array([False, True])).fit(train, y).transform(train)
    np.testing.assert_array_equal(again, fitted.transform(train))


def test_feature_selection_keeps_the_informative_columns():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(300, 130)))
    y = (X[7] + X[90] > 0).astype(int).to_numpy()
    fitted = TabZillaPreprocessor(np.zeros(130, bool), max_features=100).fit(X, y)
    assert fitted.transform(X).shape == (300, 100)
    assert {7, 90} <= set(fitted.selector_.get_support(indices=True))


def test_probabilities_are_aligned_when_a_fold_misses_a_class():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 3, 0)  # classes 1, 2 and 4 of the task's 5 are absent from train
    X_val, y_val = X[:10], np.array([0, 1, 3, 4, 0, 3, 0, 3, 2, 0])
    method = KNNMethod(n_classes=5).fit(X, y, X_val, y_val)
    proba = method.predict_proba(X[:7])
    assert proba.shape == (7, 5) and np.allclose(proba.sum(axis=1), 1.0)
    assert (proba[:, [1, 2, 4]] == 0).all()
    np.testing.assert_array_equal(proba.argmax(axis=1), y[:7])
    single = KNNMethod(n_classes=3).fit(X, np.full(60, 2))
    np.testing.assert_array_equal(single.predict_proba(X[:2]), [[0, 0, 1], [0, 0, 1]])


def test_metrics_match_sklearn_computed_by_hand():
    y = np.array([0, 1, 2, 2, 1, 0])
    proba = np.array([
        [0.7, 0.2, 0.1, 0.0], [0.1, 0.6, 0.3, 0.0], [0.2, 0.2, 0.6, 0.0],
        [0.5, 0.1, 0.4, 0.0], [0.3, 0.3, 0.4, 0.0], [0.4, 0.4, 0.2, 0.0],
    ])  # class 3 is in the task but in neither the test labels nor the predictions
    metrics = cell_metrics(y, proba)
    predicted = np.array([0, 1, 2, 0, 2, 0])
    assert metrics["accuracy"] == pytest.approx(4 / 6)
    assert metrics["f1"] == pytest.approx(f1_score(y, predicted, average="weighted"))
    clipped = np.clip(proba, 1e-15, 1)
    expected_loss = -np.mean(np.log(clipped / clipped.sum(1, keepdims=True))[np.arange(6), y])
    assert metrics["log_loss"] == pytest.approx(expected_loss)
    # one-vs-one macro AUC over the classes present, by hand for the pair (0, 1) vs sklearn
    assert metrics["auc"] == pytest.approx(
        roc_auc_score(y, proba[:, :3] / proba[:, :3].sum(1, keepdims=True), multi_class="ovo", average="macro")
    )
    binary = cell_metrics(np.array([0, 1, 1, 0]), np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.9, 0.1]]))
    assert binary["auc"] == pytest.approx(1.0) and binary["accuracy"] == pytest.approx(0.75)
    assert binary["log_loss"] == pytest.approx(log_loss([0, 1, 1, 0], [[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.9, 0.1]]))
    assert accuracy_score([0, 1, 1, 0], [0, 1, 0, 0]) == binary["accuracy"]


# -- suites ------------------------------------------------------------------------------

def test_builtin_suites_hold_the_papers_tasks():
    assert len(load_suite("gt10").task_ids) == 10 and len(load_suite("le10").task_ids) == 76
    demo = load_suite("demo")
    assert not demo.needs_openml and "demo-synthetic-30" in demo.task_ids


def test_user_suite_files(tmp_path):
    (tmp_path / "mine.toml").write_text('name = "mine"\ntasks = [5, "demo-iris"]\n')
    (tmp_path / "mine.yaml").write_text("tasks: [7, 41]\n")
    assert load_suite(tmp_path / "mine.toml").task_ids == ("5", "demo-iris")
    assert load_suite(tmp_path / "mine.yaml") == load_suite(tmp_path / "mine.yaml")
    assert load_suite(tmp_path / "mine.yaml").name == "mine"


@pytest.mark.parametrize("name, text, message", [
    ("a.toml", "tasks = []", "non-empty 'tasks' list"),
    ("b.toml", "tasks = [", "cannot read suite file"),
    ("c.yaml", "tasks: [1, banana]", "neither an OpenML task id"),
    ("d.yaml", "tasks: [demo-nothing]", "unknown demo task"),
    ("e.yaml", "tasks: [3, 3]", "more than once"),
    ("f.json", "{}", "must end in .toml, .yaml or .yml"),
])
def test_bad_suite_files_are_clear_errors(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        load_suite(tmp_path / name)
    with pytest.raises(ValueError, match="neither a built-in suite"):
        load_suite("gt11")


# -- evaluate ------------------------------------------------------------------------------

def test_evaluate_writes_the_table_probabilities_and_manifest(tmp_path):
    summary = evaluate(_tiny(methods=("knn", "equitabpfn", "tabpfn-star")), tmp_path, progress=False)
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == len(summary.cells) == 6 * 3 and set(table.status) == {"ok"}
    assert table.groupby(["task_id", "fold", "method", "variant"]).size().max() == 1
    row = table[(table.task_id == "demo-synthetic-30") & (table.method == "tabpfn-star")].iloc[0]
    assert row.n_classes == 30 and row.n_test == 300
    stored = np.load(tmp_path / row.proba_file)
    assert stored["proba"].shape == (300, 30)
    assert cell_metrics(stored["y_true"], stored["proba"].astype(float))["accuracy"] == pytest.approx(row.accuracy)
    # each cell stores its method's diagnostics: a PFN's contexts as a mapping, a baseline none
    cells = {path.stem: json.loads(path.read_text()) for path in (tmp_path / "cells").glob("*.json")}
    assert {key.split("__")[3] for key, cell in cells.items() if "diagnostics" in cell} == {"equitabpfn", "tabpfn-star"}
    diagnostics = cells["demo__demo-synthetic-30__fold0__tabpfn-star__n1"]["diagnostics"]
    assert diagnostics == {**json.loads(row.diagnostics), "context": "subsample", "context_groups": 1}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["settings"]["seed"] == 0 and manifest["invocations"][0]["versions"]["torch"]
    # a second run has nothing left to do and duplicates nothing
    again = evaluate(_tiny(methods=("knn", "equitabpfn", "tabpfn-star")), tmp_path, progress=False)
    assert again.pending == [] and len(pd.read_csv(tmp_path / "results.csv")) == 18


def test_a_run_and_a_dry_run_load_their_suite_once(tmp_path, monkeypatch):
    loads = []
    for module in [module for name, module in sys.modules.items() if name.startswith("equibench.evaluate")]:
        if hasattr(module, "load_suite"):
            load = module.load_suite
            monkeypatch.setattr(module, "load_suite", lambda name, load=load: loads.append(name) or load(name))
    for dry_run in (True, False):
        evaluate(_tiny(methods=("knn",)), tmp_path, dry_run=dry_run, progress=False)
    assert loads == ["demo", "demo"]


def test_same_seed_same_numbers_and_parallel_jobs_agree(tmp_path):
    # every cell runs on --threads-per-cell threads (1), not on this process's own (2 here)
    with _threads(2):
        serial = evaluate(_tiny(), tmp_path / "a", progress=False)
        assert torch.get_num_threads() == 2 and not torch.are_deterministic_algorithms_enabled()  # restored
    with LocalBackend(2) as backend:
        evaluate(_tiny(), tmp_path / "b", backend=backend, progress=False)
    columns = ["task_id", "method", "accuracy", "auc", "f1", "log_loss", "threads"]
    a = pd.read_csv(tmp_path / "a" / "results.csv")[columns]
    b = pd.read_csv(tmp_path / "b" / "results.csv")[columns]
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(serial.cells) == 12 and set(a.threads) == {1}
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert {fingerprint["threads_per_cell"] for fingerprint in manifest["settings"]["methods"].values()} == {1}


def test_default_jobs_fill_the_cores_with_cells_of_the_threads_per_cell():
    from equibench.evaluate.backends import available_cores, make_backend

    for threads in (1, 2, available_cores() + 1):
        with make_backend(None, threads_per_cell=threads) as backend:
            assert backend.workers() == max(1, available_cores() // threads)


def test_the_cores_count_respects_a_containers_cpu_quota(monkeypatch):
    from joblib.externals.loky.backend import context

    from equibench.evaluate.backends import available_cores, default_jobs

    monkeypatch.setattr(context, "_cpu_count_cgroup", lambda os_cpu_count: 1)  # cgroups' cpu.max: one core
    assert available_cores() == 1 and default_jobs() == 1


def test_cells_run_on_the_threads_per_cell_whatever_this_process_runs_on(tmp_path):
    with _threads(1):
        evaluate(_tiny(methods=("linear-model",), threads_per_cell=2), tmp_path / "two", progress=False)
        assert torch.get_num_threads() == 1
    assert set(pd.read_csv(tmp_path / "two" / "results.csv").threads) == {2}


def test_resuming_with_another_thread_count_is_refused_or_reruns_every_cell(tmp_path):
    evaluate(_tiny(methods=("knn",)), tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"made with `threads_per_cell` 1 .*rerun with it to resume, pass "
                                         r"`rerun_changed=True` to rerun them all with `threads_per_cell` 2"):
        evaluate(_tiny(methods=("knn", "linear-model"), threads_per_cell=2), tmp_path, progress=False)
    assert len(pd.read_csv(tmp_path / "results.csv")) == 6  # nothing run, nothing forgotten
    summary = evaluate(_tiny(methods=("knn", "linear-model"), threads_per_cell=2), tmp_path, progress=False,
                       rerun_changed=True)
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(summary.pending) == 12 and len(table) == 12 and set(table.threads) == {2}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["settings"]["methods"]["knn"]["threads_per_cell"] == 2


def test_rerun_changed_never_deletes_the_cells_of_methods_outside_the_run(tmp_path):
    # a folder whose cells were made with other settings: rerunning one method with
    # rerun_changed replaces that method's cells only
    evaluate(_tiny(methods=("knn", "linear-model")), tmp_path, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for fingerprint in manifest["settings"]["methods"].values():
        fingerprint["threads_per_cell"] = 2
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    knn_cells = sorted((tmp_path / "cells").glob("*__knn__*.json"))
    before = {path.name: path.read_bytes() for path in knn_cells}
    summary = evaluate(_tiny(methods=("linear-model",)), tmp_path, progress=False, rerun_changed=True)
    assert len(summary.pending) == 6
    assert {path.name: path.read_bytes() for path in sorted((tmp_path / "cells").glob("*__knn__*.json"))} == before
    table = pd.read_csv(tmp_path / "results.csv")
    assert sorted(table.method.unique()) == ["knn", "linear-model"] and len(table) == 12
    recorded = json.loads((tmp_path / "manifest.json").read_text())["settings"]["methods"]
    assert recorded["knn"]["threads_per_cell"] == 2 and recorded["linear-model"]["threads_per_cell"] == 1
    # and a later run of the kept method still sees its cells as made with other settings
    with pytest.raises(ValueError, match="made with `threads_per_cell` 2"):
        evaluate(_tiny(methods=("knn",)), tmp_path, progress=False)


def test_cli_refuses_to_resume_with_another_thread_count_in_one_line(tmp_path):
    arguments = ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--jobs", "1", "--out", str(tmp_path)]
    assert CliRunner().invoke(app, arguments).exit_code == 0
    result = CliRunner().invoke(app, [*arguments, "--threads-per-cell", "2"], terminal_width=400)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and re.search(r"threads.per.cell 1\b", lines[0])


def test_a_failing_method_gives_a_failed_row_and_the_run_goes_on(tmp_path, monkeypatch):
    def broken(self, X, y, X_val, y_val, n_seen):
        raise RuntimeError("this learner is broken")

    monkeypatch.setattr(knn_module.KNNMethod, "_fit", broken)
    summary = evaluate(_tiny(), tmp_path, progress=False)
    table = pd.read_csv(tmp_path / "results.csv")
    failed = table[table.method == "knn"]
    assert set(failed.status) == {"failed"} and failed.reason.str.contains("this learner is broken").all()
    assert "RuntimeError" in (tmp_path / failed.traceback_file.iloc[0]).read_text()
    assert set(table[table.method == "linear-model"].status) == {"ok"}
    assert summary.counts == {"failed": 6, "ok": 6}
    monkeypatch.undo()  # fixed: the rerun retries only the failed cells
    rerun = evaluate(_tiny(), tmp_path, progress=False)
    assert len(rerun.pending) == 6 and set(pd.read_csv(tmp_path / "results.csv").status) == {"ok"}


def test_a_worker_with_another_equibench_version_refuses_its_cells(tmp_path, monkeypatch):
    monkeypatch.setattr("equibench.evaluate.cells.__version__", "0.0.0-other")  # the worker's version
    evaluate(_tiny(methods=("knn",), folds=(0,)), tmp_path, progress=False)
    table = pd.read_csv(tmp_path / "results.csv")
    assert set(table.status) == {"failed"}
    assert table.reason.str.contains("this worker runs equibench 0.0.0-other").all()
    assert table.reason.str.contains("install the same version on every worker").all()
    monkeypatch.undo()
    assert set(evaluate(_tiny(methods=("knn",), folds=(0,)), tmp_path, progress=False).counts) == {"ok"}


def test_missing_weights_and_packages_are_skipped_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    monkeypatch.setitem(sys.modules, "xgboost", None)
    evaluate(_tiny(methods=("tabpfn-v2", "xgboost"), folds=(0,)), tmp_path, progress=False)
    table = pd.read_csv(tmp_path / "results.csv")
    assert set(table.status) == {"skipped"}
    assert table[table.method == "tabpfn-v2"].reason.str.contains("no weights").all()
    assert table[table.method == "xgboost"].reason.str.contains('pip install "xgboost-cpu"').all()


def test_an_uncached_task_is_one_clear_message_and_the_others_run(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):  # no network, whatever the machine has
        raise OSError("network access is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    (tmp_path / "suite.yaml").write_text("tasks: [999999, demo-iris]\n")
    cache = tmp_path / "empty-cache"
    (cache / "org" / "openml" / "www").mkdir(parents=True)
    summary = evaluate(_tiny(suite=str(tmp_path / "suite.yaml"), openml_cache=str(cache)), tmp_path / "out", progress=False)
    assert set(summary.missing) == {"999999"} and not summary.task_errors
    assert "999999" in summary.missing["999999"] and "openml_cache" in summary.missing["999999"]
    assert len(summary.missing_cells) == 2 and summary.counts == {"ok": 2}
    table = pd.read_csv(tmp_path / "out" / "results.csv", dtype={"task_id": str})
    assert set(table.task_id) == {"demo-iris"} and set(table.status) == {"ok"}  # missing: no failed rows
    # the command line names the missing task once, with the next step in its own flags
    result = CliRunner().invoke(app, ["evaluate", "--suite", str(tmp_path / "suite.yaml"), "--methods", "knn",
                                      "--folds", "0", "--jobs", "1", "--openml-cache", str(cache), "--out",
                                      str(tmp_path / "cli")], terminal_width=400)
    assert result.exit_code == 0, result.output
    assert "missing: 1 of 2 suite tasks are not in the OpenML cache" in result.stderr
    assert "point --openml-cache at your OpenML cache folder" in result.stderr


@pytest.mark.slow
def test_ensemble_variants_are_named_from_the_settings_and_resume(tmp_path):
    evaluate(_tiny(methods=("equitabpfn",), ensembles=(1, 2)), tmp_path, progress=False)
    assert sorted(set(pd.read_csv(tmp_path / "results.csv").variant)) == ["n1", "n2"]
    methods = json.loads((tmp_path / "manifest.json").read_text())["settings"]["methods"]
    assert methods["knn"] == {"threads_per_cell": 1}
    assert methods["tabpfn-v1"] == {"tabpfn_weights": None, "threads_per_cell": 1}
    assert set(methods["equitabpfn"]) == {"checkpoint_sha256", "max_train_rows", "feature_transforms", "subsample",
                                          "local", "threads_per_cell"}
    assert methods["equitabpfn"]["feature_transforms"] == ["none", "quantile"]
    summary = evaluate(_tiny(methods=("equitabpfn",), ensembles=(2, 4)), tmp_path, progress=False)
    assert [cell.settings.n_estimators for cell in summary.pending] == [4] * 6


def test_the_committed_demo_store_reads_with_the_typed_settings(monkeypatch):
    """Read-only: the committed store's recorded settings are what the typed settings give
    today, and every cell its last run plans is stored under the name the settings derive."""
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    manifest = json.loads((COMMITTED / "manifest.json").read_text())
    recorded = manifest["invocations"][-1]["config"]
    # recorded before `weights` replaced the per-method options, none of which was set
    unset = {"tabpfn_weights": None, "tabicl_checkpoint": None, "official_checkpoint": None,
             "equitabpfn_checkpoint": "default", "tabpfn_star_checkpoint": "default"}
    assert {key: recorded.pop(key, value) for key, value in unset.items()} == unset
    config = EvaluateConfig(**{key: tuple(value) if isinstance(value, list) else value for key, value in recorded.items()})
    settings = prepared_settings(config)
    recorded_methods = manifest["settings"]["methods"]
    # the last run's methods record its threads per cell; the others keep what their own runs recorded
    assert {name: recorded_methods[name] for name in config.methods} == {
        name: {**settings[name].fingerprint(), "threads_per_cell": config.threads_per_cell} for name in config.methods}
    assert {name: {k: v for k, v in fingerprint.items() if k != "threads_per_cell"}
            for name, fingerprint in recorded_methods.items()} == {
        name: method.fingerprint() for name, method in settings.items() if name in recorded_methods}
    assert set(settings) - set(recorded_methods) == {"equitabpfn-ft", "tabpfn-star-ft"}  # registered after the run
    suite = load_suite(config.suite)
    cells = plan_cells(config, suite, task_infos(suite, None), settings)
    assert len(cells) == 6 * 10 * 2 and {cell.key for cell in cells} <= ResultsStore(COMMITTED).finished_keys()


def test_resuming_with_different_settings_is_refused_or_replaces(tmp_path):
    evaluate(_tiny(methods=("knn", "tabpfn-star")), tmp_path, progress=False)
    with pytest.raises(ValueError, match="made with seed 0"):
        evaluate(_tiny(methods=("knn",), seed=1), tmp_path, progress=False)
    other = _tiny(methods=("knn", "tabpfn-star"), weights={"tabpfn-star": str(default_checkpoint("tabpfn-star"))})
    with pytest.raises(ValueError, match="results of tabpfn-star made with different settings.*rerun_changed"):
        evaluate(other, tmp_path, progress=False)
    # adding a method is fine; changing the EquiTabPFN checkpoint is too while it has no cells
    evaluate(_tiny(methods=("knn", "linear-model"), weights={"equitabpfn": str(default_checkpoint("equitabpfn"))}),
             tmp_path, progress=False)
    before = pd.read_csv(tmp_path / "results.csv")
    summary = evaluate(other, tmp_path, progress=False, rerun_changed=True)
    after = pd.read_csv(tmp_path / "results.csv")
    assert len(summary.pending) == 6 and len(after) == len(before) == 18 and set(after.status) == {"ok"}
    assert not after[after.method == "tabpfn-star"].accuracy.equals(before[before.method == "tabpfn-star"].accuracy)


@pytest.mark.parametrize("args, message", [
    (["--methods", "knn,nope"], "unknown method 'nope'"),
    (["--folds", "zero"], "--folds takes comma-separated integers"),
    (["--jobs", "0"], "jobs must be at least 1"),
    (["--threads-per-cell", "0"], "must be at least 1, got 0"),
    (["--ensembles", "0"], "ensemble sizes must be positive"),
    (["--weights", "equitabpfn=/no/such.pt"], "does not exist"),
    (["--weights", f"equitabpfn={DATA / 'tiny-tabpfn-star.pt'}"], "not equitabpfn"),
    (["--folds", "10"], "folds 0..9"),
])
def test_cli_bad_input(tmp_path, args, message):
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--out", str(tmp_path), *args])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "results.csv").exists()


def test_cli_dry_run_lists_cells(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn,equitabpfn", "--folds", "0-1",
                                      "--ensembles", "1,4", "--out", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "36 cells, 36 to run" in result.output and not (tmp_path / "results.csv").exists()


@contextlib.contextmanager
def _threads(count: int):
    """This process on ``count`` torch and BLAS threads (as a subprocess with OMP_NUM_THREADS=count)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        with threadpool_limits(count):
            yield
    finally:
        torch.set_num_threads(before)


def _children(pid: int) -> list[int]:
    """Process ids of ``pid``'s children (Linux)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped by a container's init does not)."""
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:4]
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc (Linux)")
def test_resume_after_sigkill_loses_nothing_and_duplicates_nothing(tmp_path):
    command = [
        sys.executable, "-m", "equibench.cli", "evaluate", "--suite", "demo", "--methods", "knn,linear-model,equitabpfn",
        "--folds", "0-1", "--weights", f"equitabpfn={DATA / 'tiny-equitabpfn.pt'}",
        "--weights", f"tabpfn-star={DATA / 'tiny-tabpfn-star.pt'}", "--out", str(tmp_path / "run"), "--no-progress",
        "--jobs", "2",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # cwd outside the checkout: `-m` puts the cwd on sys.path, which would shadow an installed (non-editable) package
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as stderr_file:
        process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr_file)
        cells = tmp_path / "run" / "cells"
        deadline = time.monotonic() + 300
        while process.poll() is None and len(list(cells.glob("*.json"))) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        exited_by_itself = process.poll() is not None
        workers = _children(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not exited_by_itself or process.returncode == 0, stderr.read_text()
    # its worker processes notice and exit instead of finishing their cells for nobody
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not [pid for pid in workers if _alive(pid)]
    done_before = len(list(cells.glob("*.json")))
    assert 5 <= done_before < 36, "the run should have been killed part-way"
    if (tmp_path / "run" / "results.csv").exists():  # whatever snapshot exists is a valid table
        pd.read_csv(tmp_path / "run" / "results.csv")
    resumed = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    assert len(table) == 36 and set(table.status) == {"ok"}
    assert table.groupby(["task_id", "fold", "method", "variant"]).size().max() == 1
    assert not list((tmp_path / "run").glob("**/.*.tmp"))
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert len(manifest["invocations"]) == 2 and manifest["invocations"][1]["pending"] == 36 - done_before
    # the resumed table equals an uninterrupted serial run (whose cells also run on one thread)
    with _threads(2):
        evaluate(_tiny(methods=("knn", "linear-model", "equitabpfn"), folds=(0, 1)), tmp_path / "clean",
                 progress=False)
    clean = pd.read_csv(tmp_path / "clean" / "results.csv")
    columns = ["task_id", "fold", "method", "accuracy", "auc", "f1", "log_loss"]
    pd.testing.assert_frame_equal(table[columns].reset_index(drop=True), clean[columns].reset_index(drop=True))


@pytest.mark.slow
def test_a_killed_worker_process_fails_its_cells_and_the_run_goes_on(tmp_path):
    config = _tiny(methods=("knn", "linear-model", "decision-tree"), folds=(0, 1, 2))
    backend = LocalBackend(2)
    others = {child.pid for child in multiprocessing.active_children()}  # children that are not the pool's

    def kill_a_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            workers = [child.pid for child in multiprocessing.active_children() if child.pid not in others]
            if list((tmp_path / "cells").glob("*.json")) and workers:
                os.kill(workers[0], signal.SIGKILL)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    with backend:
        summary = evaluate(config, tmp_path, backend=backend, progress=False)
    killer.join()
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 54 and table.groupby(["task_id", "fold", "method"]).size().max() == 1
    died = table[table.status == "failed"]
    assert summary.counts["failed"] == len(died) >= 1
    assert died.reason.str.contains("worker process died").all()
    rerun = evaluate(config, tmp_path, progress=False)
    assert len(rerun.pending) == len(died) and set(pd.read_csv(tmp_path / "results.csv").status) == {"ok"}
