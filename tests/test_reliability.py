"""Regression tests of issue 16: nothing lost, nothing silently wrong, no raw traceback, no hang.

One test (or a few) per numbered item of the issue; each asserts the message a user sees and
that no file beside equibench's own was lost."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from concurrency import children, twice_at_once, wait_gone
from typer.testing import CliRunner

import equibench.pretrain.loss as pretrain_module
from equibench import EquiTabPFNClassifier
from equibench.baselines import knn as knn_module
from equibench.cli import app
from equibench.errors import InvalidInputError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.results_store import ResultsStore
from equibench.model import CheckpointError, load_checkpoint, save_checkpoint
from equibench.normalize import apply_normalization, fit_normalization
from equibench.outdir_lock import FolderInUseError
from equibench.preprocessing import TableEncoder
from equibench.pretrain import NonFiniteLossError, TrainConfig, pretrain
from equibench.prior import PriorConfig
from equibench.report import build_report
from equibench.tasks.openml import working_cache
from equibench.tasks.suites import load_suite

DATA = Path(__file__).parent / "data"
TINY = dict(weights={"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt")})
QUICK = EvaluateConfig(suite="demo", methods=("knn",), folds=(0,), **TINY)  # 6 cells, about a second
PRIOR = PriorConfig(rows=96)


def _train_config(**changes) -> TrainConfig:
    settings = dict(arch="equitabpfn", size="tiny", steps=6, batch_size=3, lr=1e-3, warmup_steps=2, checkpoint_every=3,
                    validate_every=3, validation_batches=1, bundled_validation=False, device="cpu")
    return TrainConfig(**{**settings, **changes})


def _snapshot(files: list[Path]) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in files}


def _user_files(folder: Path, names: list[str]) -> dict[Path, bytes]:
    """Write files a user put into ``folder`` and return their contents, to check they survive."""
    for number, name in enumerate(names):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"the user's own file {number}\n".encode())
    return _snapshot([folder / name for name in names])


def _assert_survived(files: dict[Path, bytes]) -> None:
    for path, content in files.items():
        assert path.is_file() and path.read_bytes() == content, f"{path} was lost or changed"


def _clean_error(result) -> str:
    """The CLI output of a failed command: one `error:` line, never a traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (AttributeError, KeyError, TypeError))
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    return result.output


# -- 1. report --out keeps the files it did not write ---------------------------------------

def _results(tmp_path: Path, name: str = "results", config: EvaluateConfig = QUICK) -> Path:
    evaluate(config, tmp_path / name, progress=False)
    return tmp_path / name


@pytest.fixture(scope="module")
def demo_results(tmp_path_factory) -> Path:
    return _results(tmp_path_factory.mktemp("demo"), config=EvaluateConfig(
        suite="demo", methods=("knn", "decision-tree"), folds=(0,), **TINY))


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory) -> Path:
    return _results(tmp_path_factory.mktemp("quick"))


def _copy(results: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(results, tmp_path / "results"))


def test_1_report_removes_only_its_own_earlier_files(demo_results, tmp_path):
    out = tmp_path / "report"
    user = _user_files(out, ["figures/mine.png", "figures/plot.pdf", "tables/notes.md", "tables/data.csv",
                             "tables/paper.tex", "draft.md"])
    build_report([demo_results], out)
    first = json.loads((out / ".equibench-report.json").read_text())["files"]
    assert "REPORT.md" in first and any(name.startswith("figures/") for name in first)
    # a second report whose suite is named differently writes other files: the first one's go, the user's stay
    (tmp_path / "other.yaml").write_text("name: other\ntasks: [demo-iris, demo-wine, demo-digits]\n")
    build_report([_results(tmp_path, "other", EvaluateConfig(suite=str(tmp_path / "other.yaml"),
                                                              methods=("knn", "decision-tree"), folds=(0, 1), **TINY))], out)
    _assert_survived(user)
    assert not [name for name in first if name.startswith(("tables/demo", "figures/demo")) and (out / name).exists()]
    assert (out / "tables" / "other_aggregate.csv").is_file()
    assert not list(out.glob(".report-*"))


def test_1_report_refuses_to_overwrite_a_file_it_did_not_write(demo_results, tmp_path):
    out = tmp_path / "report"
    user = _user_files(out, ["tables/demo_aggregate.csv"])
    with pytest.raises(ValueError, match=r"demo_aggregate.csv.*exists and was not written by a report; "
                                         r"move it away or choose another `out_dir`"):
        build_report([demo_results], out)
    _assert_survived(user)
    assert not (out / "REPORT.md").exists() and not list(out.glob(".report-*"))


def test_1_a_report_folder_without_its_list_of_files_is_never_overwritten(demo_results, tmp_path):
    out = tmp_path / "report"
    build_report([demo_results], out)
    (out / ".equibench-report.json").unlink()  # nothing says which files a report wrote
    user = _user_files(out, ["figures/mine.png"])
    before = _snapshot(sorted(path for path in out.rglob("*") if path.is_file() and path.name != ".equibench.lock"))
    with pytest.raises(InvalidInputError, match="was not written by a report"):
        build_report([demo_results], out)
    _assert_survived(before)
    _assert_survived(user)


def test_1_a_report_failing_midway_leaves_the_previous_one_whole(demo_results, tmp_path, monkeypatch):
    out = tmp_path / "report"
    build_report([demo_results], out)
    before = _snapshot(sorted(path for path in out.rglob("*") if path.is_file() and path.name != ".equibench.lock"))

    def broken(*args, **kwargs):
        raise RuntimeError("disk full while drawing")

    monkeypatch.setattr("equibench.report.figures.critical_difference_diagram", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_report([demo_results], out)
    _assert_survived(before)
    assert not list(out.glob(".report-*"))


# -- 2. evaluate removes only the store's own temporary files ---------------------------------

def test_2_evaluate_and_dry_run_keep_other_temporary_files(tmp_path):
    out = tmp_path / "run"
    user = _user_files(out, [".draft.tmp", "notes/.x.tmp", "cells/.mine.tmp", "probas/.a.npz.tmp", "deep/er/.y.tmp"])
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0",
                                      "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    _assert_survived(user)
    own = out / "cells" / ".demo__demo-iris__fold0__knn__default.json.abcd1234.tmp"  # left by a killed run
    own.write_text("{")
    evaluate(QUICK, out, progress=False)
    _assert_survived(user)
    assert not own.exists()


def test_2_dry_run_writes_nothing(tmp_path, quick_results):
    run = _copy(quick_results, tmp_path)
    before = {path: path.stat().st_mtime_ns for path in run.rglob("*")}
    summary = evaluate(QUICK, run, dry_run=True, progress=False)
    assert summary.pending == []
    assert {path: path.stat().st_mtime_ns for path in run.rglob("*")} == before
    evaluate(QUICK, tmp_path / "new", dry_run=True, progress=False)
    assert not (tmp_path / "new").exists()


# -- 3. pretrain never overwrites a model it did not make ------------------------------------

@pytest.mark.parametrize("present", [["model.pt", "config.json", "log.jsonl"], ["model.pt"]])
def test_3_pretrain_refuses_files_of_another_run(tmp_path, present):
    user = _user_files(tmp_path, present)
    with pytest.raises(FileExistsError, match=f"already holds {', '.join(present)} .*pass `overwrite=True`"):
        pretrain(_train_config(), PRIOR, tmp_path, progress=False)
    _assert_survived(user)
    result = CliRunner().invoke(app, ["pretrain", "--out", str(tmp_path), "--size", "tiny", "--steps", "1",
                                      "--no-bundled-validation", "--no-progress"])
    assert "pass --overwrite to replace them" in _clean_error(result)  # the library's overwrite=True, as the flag
    _assert_survived(user)
    pretrain(_train_config(steps=2), PRIOR, tmp_path, progress=False, overwrite=True)
    assert load_checkpoint(tmp_path / "model.pt")[1].steps == 2


# -- 4. one writer per folder -----------------------------------------------------------------

def test_4_a_second_evaluate_on_a_locked_folder_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from equibench.outdir_lock import locked_folder\n"
         f"with locked_folder({str(out)!r}):\n    print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FolderInUseError, match=rf"is in use by process {holder.pid} on .*wait for it to finish"):
            evaluate(QUICK, out, progress=False)
        result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--out", str(out)])
        assert f"process {holder.pid}" in _clean_error(result)
        # a dry run only reads, so it needs no lock
        assert len(evaluate(QUICK, out, dry_run=True, progress=False).pending) == 6
    finally:
        holder.kill()
        holder.wait()
    assert not (out / "cells").exists()
    evaluate(QUICK, out, progress=False)  # the OS released the killed holder's lock


def test_4_two_concurrent_runs_one_folder_lose_no_invocation(tmp_path):
    out = tmp_path / "run"
    outcomes = twice_at_once(lambda: evaluate(QUICK, out, progress=False))
    refused = [outcome for outcome in outcomes if isinstance(outcome, FolderInUseError)]
    finished = [outcome for outcome in outcomes if not isinstance(outcome, FolderInUseError)]
    evaluate(QUICK, out, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["invocations"]) == len(finished) + 1 and all("finished" in run for run in manifest["invocations"])
    assert len(finished) >= 1 and len(refused) + len(finished) == 2
    assert len(pd.read_csv(out / "results.csv")) == 6


# -- 5. non-finite numbers ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["lr", "weight_decay", "grad_clip"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf")])
def test_5_non_finite_settings_are_refused(name, value):
    with pytest.raises(ValueError, match=f"`{name}` must be a finite number"):
        _train_config(**{name: value})


def test_5_cli_lr_inf_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["pretrain", "--out", str(tmp_path / "run"), "--lr", "inf", "--size", "tiny"])
    assert "--lr must be a finite number, got inf" in _clean_error(result)
    assert not (tmp_path / "run").exists()


def test_5_a_non_finite_loss_stops_the_run_keeping_the_last_checkpoint(tmp_path, monkeypatch):
    real = pretrain_module.masked_test_loss
    calls = []

    def diverging(*args):
        calls.append(1)
        loss = real(*args)
        return loss * float("nan") if len(calls) >= 5 else loss  # step 5 diverges

    monkeypatch.setattr(pretrain_module, "masked_test_loss", diverging)
    with pytest.raises(NonFiniteLossError, match=r"step 5: the training loss is nan .*lower the learning rate"):
        pretrain(_train_config(), PRIOR, tmp_path, progress=False)
    model, card = load_checkpoint(tmp_path / "model.pt")  # step 3, finite
    assert card.steps == 3
    for line in (tmp_path / "log.jsonl").read_text().splitlines():  # strict JSON: no NaN token
        json.loads(line, parse_constant=lambda token: pytest.fail(f"log.jsonl holds {token}"))
    result = CliRunner().invoke(app, ["pretrain", "--out", str(tmp_path / "cli"), "--size", "tiny", "--steps", "6",
                                      "--batch-size", "3", "--rows", "96", "--no-bundled-validation", "--no-progress"])
    assert result.exit_code == 1 and "the training loss is nan" in result.output


def test_5_non_finite_weights_are_refused_and_never_predict_silently(tmp_path, tiny_equi_path):
    model, card = load_checkpoint(tiny_equi_path)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    save_checkpoint(model, tmp_path / "nan.pt", card)
    with pytest.raises(CheckpointError, match="holds NaN or infinite weights .*training diverged"):
        load_checkpoint(tmp_path / "nan.pt")
    result = CliRunner().invoke(app, ["equivariance", "--checkpoints", str(tmp_path / "nan.pt"), "--datasets", "2",
                                      "--out", str(tmp_path / "eq"), "--no-toy"])
    assert "NaN or infinite weights" in _clean_error(result)
    X, y = np.random.default_rng(0).normal(size=(40, 3)), np.arange(40) % 2
    classifier = EquiTabPFNClassifier(checkpoint=model, n_estimators=1, device="cpu").fit(X, y)
    with pytest.raises(FloatingPointError, match="NaN or infinite probabilities"):
        classifier.predict_proba(X)


# -- 6. report uses the committed cells ---------------------------------------------------------

def test_6_report_reads_the_cells_not_a_stale_table(demo_results, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(demo_results, results)
    full = build_report([results], tmp_path / "full").read_text()
    csv = (results / "results.csv").read_text().splitlines()
    (results / "results.csv").write_text("\n".join(csv[:3]) + "\n")  # a snapshot from before a kill
    stale = build_report([results], tmp_path / "stale").read_text()
    assert "12 stored cells in cells/ (its results.csv, a snapshot, was stale)" in stale
    assert stale.split("## Suite", 1)[1] == full.split("## Suite", 1)[1]
    assert "12 stored cells in cells/)" in full  # results.csv was current
    (results / "results.csv").unlink()
    # a folder without the snapshot (as results/ commits them) reads the same, without a note
    assert "12 stored cells in cells/)" in build_report([results], tmp_path / "none").read_text()


# -- 7. damaged probability files are recomputed --------------------------------------------

def test_7_truncated_emptied_or_deleted_probabilities_are_recomputed(tmp_path, quick_results):
    out = _copy(quick_results, tmp_path)
    probas = sorted((out / "probas").glob("*.npz"))
    probas[0].write_bytes(probas[0].read_bytes()[:100])
    probas[1].write_bytes(b"")
    probas[2].unlink()
    store = ResultsStore(out)
    assert len(store.damaged) == 3
    assert "does not match its recorded SHA-256" in store.damaged[probas[0].stem]
    assert store.damaged[probas[2].stem].endswith("is missing")
    assert len(evaluate(QUICK, out, dry_run=True, progress=False).pending) == 3
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--out",
                                      str(out), "--no-progress", *sum((["--weights", f"{k}={v}"] for k, v in TINY["weights"].items()), [])])
    assert result.exit_code == 0 and "3 stored cells were damaged and were recomputed" in result.output
    assert "this run: 3 ok" in result.output
    for path in probas[:3]:
        row = json.loads((out / "cells" / f"{path.stem}.json").read_text())
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row["proba_sha256"]
        assert np.load(path)["proba"].shape[0] == row["n_test"]


# -- 8. suite names cannot escape --out ------------------------------------------------------

@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "", "a b", "/abs"])
def test_8_suite_names_are_validated(tmp_path, name):
    suite = tmp_path / "suite.yaml"
    suite.write_text(json.dumps({"name": name, "tasks": ["demo-iris"]}))
    with pytest.raises(ValueError, match="a suite name becomes part of file names"):
        load_suite(suite)
    before = sorted(tmp_path.parent.iterdir())
    result = CliRunner().invoke(app, ["evaluate", "--suite", str(suite), "--methods", "knn", "--out", str(tmp_path / "o")])
    assert "use 1 to 100 letters, digits" in _clean_error(result)
    assert sorted(tmp_path.parent.iterdir()) == before and not (tmp_path / "o").exists()


# -- 9. tiny and huge units -----------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-12, 1e12, 1e200, 1e300])
def test_9_normalization_is_scale_free(scale):
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(64, 4)))
    z = apply_normalization(x, *fit_normalization(x))
    scaled = x * scale
    z_scaled = apply_normalization(scaled, *fit_normalization(scaled))
    assert torch.allclose(z_scaled, z, atol=1e-9) and z.abs().max() > 1


def test_9_constant_columns_are_still_constant_at_every_scale():
    for value in (1e-300, 0.1, 3.7, 1e300):
        mean, std = fit_normalization(torch.full((16, 1), value, dtype=torch.float64))
        assert std.item() == 1.0 and mean.item() == value


@pytest.mark.parametrize("scale", [1e-300, 1e-100, 1e100, 1e300])
def test_9_the_classifier_sees_data_in_tiny_and_huge_units(tiny_equi_path, scale):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    reference = EquiTabPFNClassifier(checkpoint=tiny_equi_path, n_estimators=2, device="cpu", random_state=0).fit(X, y)
    scaled = EquiTabPFNClassifier(checkpoint=tiny_equi_path, n_estimators=2, device="cpu", random_state=0).fit(X * scale, y)
    np.testing.assert_allclose(scaled.predict_proba(X * scale), reference.predict_proba(X), atol=1e-5)


# -- 10. datetimes and complex columns ----------------------------------------------------------

def test_10_datetimes_are_numeric_time_and_complex_columns_are_refused():
    dates = pd.to_datetime(["2020-01-01", "2020-06-01", "2021-01-01", None])
    frame = pd.DataFrame({"when": dates, "zoned": dates.tz_localize("Europe/Paris"),
                          "took": pd.to_timedelta([1, 2, 3, None], unit="h")})
    encoder = TableEncoder(max_features=100)
    values = encoder.fit_transform(frame, np.array([0, 1, 0, 1]))
    assert values[0, 0] == pd.Timestamp("2020-01-01").timestamp() and values[0, 1] == values[0, 0] - 3600
    assert values[1, 2] == 7200 and np.isnan(values[3]).all()
    unseen = encoder.transform(pd.DataFrame({"when": pd.to_datetime(["2030-01-01"]),
                                             "zoned": pd.to_datetime(["2030-01-01"]).tz_localize("UTC"),
                                             "took": pd.to_timedelta([10], unit="h")}))
    assert np.isfinite(unseen).all() and unseen[0, 0] > values[2, 0]  # an unseen date keeps its place in time
    with pytest.raises(ValueError, match="column 'z' holds complex numbers.*separate columns"):
        TableEncoder(100).fit_transform(pd.DataFrame({"z": [1 + 2j, 3j], "x": [1.0, 2.0]}), np.array([0, 1]))


# -- 11. failed cells make a non-zero exit -----------------------------------------------------

def test_11_evaluate_exits_non_zero_when_cells_failed(tmp_path, monkeypatch):
    def broken(self, X, y, X_val, y_val, n_seen):
        raise RuntimeError("this learner is broken")

    monkeypatch.setattr(knn_module.KNNMethod, "_fit", broken)
    # --jobs 1: the cells run in this process, where the broken learner is patched in
    args = ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--no-progress", "--jobs", "1"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 1 and "6 cells of this run failed" in result.output and "rerun the command" in result.output
    assert "knn: 6 cells failed: RuntimeError: this learner is broken" in result.stderr  # one line per reason
    assert f"and {tmp_path / 'a' / 'tracebacks'}/" in result.stderr  # named: it exists
    assert "next: equibench report" not in result.stdout  # nothing to report
    assert set(pd.read_csv(tmp_path / "a" / "results.csv").status) == {"failed"}
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--allow-failures"])
    assert result.exit_code == 0 and "6 cells of this run failed" in result.output


# -- 12. no orphaned workers, clean stop on SIGTERM ----------------------------------------------

def _start_parallel_run(tmp_path: Path) -> tuple[subprocess.Popen, set[int]]:
    command = [sys.executable, "-m", "equibench.cli", "evaluate", "--suite", "demo", "--jobs", "2", "--folds", "0-4",
               "--methods", "knn,linear-model,decision-tree,random-forest", "--out", str(tmp_path / "run"), "--no-progress"]
    process = subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not list((tmp_path / "run" / "cells").glob("*.json")):
        time.sleep(0.1)
    workers = children(process.pid)
    assert process.poll() is None and len(workers) >= 2, "the run should be in progress with its workers"
    return process, workers


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_12_workers_exit_when_their_parent_is_killed(tmp_path):
    process, workers = _start_parallel_run(tmp_path)
    process.send_signal(signal.SIGKILL)
    process.wait()
    left = wait_gone(workers, 15)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "workers outlived their killed parent"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_12_sigterm_stops_the_run_cleanly_and_it_resumes(tmp_path):
    process, workers = _start_parallel_run(tmp_path)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "interrupted: every finished cell is stored" in stderr
    assert not wait_gone(workers, 15)
    out = tmp_path / "run"
    cells = len(list((out / "cells").glob("*.json")))
    assert len(pd.read_csv(out / "results.csv")) == cells and not list(out.glob("**/.*.tmp"))
    assert "interrupted" in json.loads((out / "manifest.json").read_text())["invocations"][-1]
    assert len(ResultsStore(out).damaged) == 0


# -- 13 and 14. one clear line instead of a traceback ------------------------------------------

def test_13_out_paths_that_are_files_or_folders(tmp_path, demo_results, tiny_equi_path):
    existing = tmp_path / "file.txt"
    existing.write_text("the user's file\n")
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--out", str(existing)])
    assert "is an existing file, not a folder" in _clean_error(result)
    result = CliRunner().invoke(app, ["report", "--results", str(demo_results), "--out", str(existing)])
    assert "is an existing file, not a folder" in _clean_error(result)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--out", str(existing / "sub")])
    assert str(existing) in _clean_error(result)
    assert existing.read_text() == "the user's file\n"
    result = CliRunner().invoke(app, ["export", str(tiny_equi_path), "--out", str(tmp_path)])
    assert "is a folder; pass a file path" in _clean_error(result)
    result = CliRunner().invoke(app, ["export", str(tiny_equi_path), "--out", str(existing)])
    assert "already exists; pass --overwrite" in _clean_error(result)
    assert existing.read_text() == "the user's file\n"


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pretrain") / "run"
    pretrain(_train_config(), PRIOR, out, progress=False)
    return out


def test_13_curves_torn_log_and_bad_out(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    log = (run / "log.jsonl").read_text()
    (run / "log.jsonl").write_text(log[: len(log) - 20])  # the last line torn by a kill
    result = CliRunner().invoke(app, ["curves", str(run), "--out", str(tmp_path / "c.png")])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["curves", str(run), "--out", str(tmp_path / "c.txt")])
    assert "has no image file extension; use .png, .pdf or .svg" in _clean_error(result)
    assert "--out " in _clean_error(result) and "out_path" not in _clean_error(result)  # the flag, not the parameter
    lines = log.splitlines()
    (run / "log.jsonl").write_text("\n".join([lines[0], lines[1][:10], *lines[2:]]) + "\n")
    result = CliRunner().invoke(app, ["curves", str(run), "--out", str(tmp_path / "c.png")])
    assert "log.jsonl' line 2 is damaged" in _clean_error(result)


def test_14_resume_drops_a_torn_last_log_line_and_refuses_a_truncated_state(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    config = _train_config(steps=8)
    log = (run / "log.jsonl").read_text()
    (run / "log.jsonl").write_text(log + '{"kind": "step", "st')
    with pytest.raises(ValueError, match="the settings differ"):  # reaches the settings check: the log is no obstacle
        pretrain(config, PRIOR, run, resume=True, progress=False)
    pretrain(_train_config(), PRIOR, run, resume=True, progress=False)
    assert all(json.loads(line) for line in (run / "log.jsonl").read_text().splitlines())
    state = run / "train_state.pt"
    state.write_bytes(state.read_bytes()[:1000])
    with pytest.raises(ValueError, match="train_state.pt' is unreadable .*truncated: continue from its model.pt with `init_from`"):
        pretrain(_train_config(), PRIOR, run, resume=True, progress=False)
    result = CliRunner().invoke(app, ["pretrain", "--out", str(run), "--size", "tiny", "--resume"])
    assert "is unreadable" in _clean_error(result)


@pytest.mark.parametrize("content, message", [
    ('{"invocations": [', "manifest.json' is damaged"),
    ('[]', "manifest.json' is damaged (no 'invocations' list)"),
    ('{"invocations": []}', "manifest.json' is damaged (no 'settings' with 'seed', 'methods' and 'suite')"),
])
def test_14_a_damaged_manifest_is_named(tmp_path, quick_results, content, message):
    out = _copy(quick_results, tmp_path)
    (out / "manifest.json").write_text(content)
    cells = _snapshot(sorted((out / "cells").iterdir()))
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--out", str(out)])
    assert message in _clean_error(result) and "move it aside" in result.output
    _assert_survived(cells)


def test_14_damaged_cell_files_are_recomputed_by_evaluate_and_named_by_report(tmp_path, quick_results):
    out = _copy(quick_results, tmp_path)
    first, second = sorted((out / "cells").glob("*.json"))[:2]
    first.write_text(first.read_text()[:40])
    second.write_text('{"status": "ok"}')
    with pytest.raises(ValueError, match=r"2 stored cells of .* are damaged \(e.g. .*unreadable.*rerun `evaluate\(config="):
        build_report([out], tmp_path / "report")
    summary = evaluate(QUICK, out, progress=False)
    assert len(summary.damaged) == 2 and "lacks the keys" in summary.damaged[second.stem]
    assert summary.counts == {"ok": 2}
    build_report([out], tmp_path / "report")


def test_14_a_truncated_results_csv_is_named(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "results.csv").write_bytes(b"suite,task_id\n\"demo,1")
    result = CliRunner().invoke(app, ["report", "--results", str(out), "--out", str(tmp_path / "report")])
    assert "results.csv' is unreadable" in _clean_error(result)


def test_13_a_torn_file_in_the_working_openml_cache_is_copied_again(tmp_path):
    source = tmp_path / "source"
    data = source / "org" / "openml" / "www" / "datasets" / "1" / "dataset.arff"
    data.parent.mkdir(parents=True)
    data.write_bytes(os.urandom(5000))
    work = working_cache(source, tmp_path / "work")
    copy = work / data.relative_to(source)
    copy.write_bytes(copy.read_bytes()[:100])  # a copy cut short by a kill
    working_cache(source, work)
    assert copy.read_bytes() == data.read_bytes()
    assert not [path for path in work.rglob("*") if path.name.endswith(".tmp")]


def test_13_a_column_numeric_at_fit_and_text_at_predict(tiny_equi_path):
    X = pd.DataFrame({"a": np.arange(20.0), "b": np.arange(20.0) % 3})
    classifier = EquiTabPFNClassifier(checkpoint=tiny_equi_path, n_estimators=1, device="cpu").fit(X, np.arange(20) % 2)
    with pytest.raises(ValueError, match=r"column 1 was numeric when fitted but now holds non-numeric values \(e.g. 'x'\)"):
        classifier.predict(X.assign(b=["x"] * 20))


@pytest.mark.parametrize("checkpoint, message", [
    ("", "empty"),
    (" ", "empty"),
    (".", "is a folder, not a file"),
    ("DIR", "is a folder, not a file"),
])
def test_14_checkpoint_paths_that_are_not_files(tmp_path, checkpoint, message):
    checkpoint = str(tmp_path) if checkpoint == "DIR" else checkpoint
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(checkpoint)
    with pytest.raises(CheckpointError, match=message):
        EquiTabPFNClassifier(checkpoint=checkpoint).fit(np.zeros((4, 2)), [0, 1, 0, 1])


@pytest.mark.parametrize("labels", [[0, 1, None, 1], [0.0, 1.0, np.nan, 1.0], ["a", "b", None, "a"]])
def test_14_missing_labels_are_named(tiny_equi_path, labels):
    with pytest.raises(ValueError, match=r"y has 1 missing labels \(None or NaN\), e.g. at rows \[2\]"):
        EquiTabPFNClassifier(checkpoint=tiny_equi_path, device="cpu").fit(np.zeros((4, 2)), np.array(labels, dtype=object))


@pytest.mark.parametrize("labels, kinds", [([1, "a", 2.5, 1], "float, int, str"), ([True, "a", True, "a"], "bool, str")])
def test_14_labels_of_several_types_are_named(tiny_equi_path, labels, kinds):
    with pytest.raises(ValueError, match=rf"y mixes labels of several types \({kinds}\); make them one type"):
        EquiTabPFNClassifier(checkpoint=tiny_equi_path, device="cpu").fit(np.zeros((4, 2)), np.array(labels, dtype=object))


def test_14_integer_and_float_labels_together_are_numbers(tiny_equi_path):
    model = EquiTabPFNClassifier(checkpoint=tiny_equi_path, device="cpu").fit(
        np.arange(8.0).reshape(4, 2), np.array([1, 2.0, 1, 2.0], dtype=object))
    assert model.classes_.tolist() == [1.0, 2.0] and model.predict(np.arange(8.0).reshape(4, 2)).dtype == np.float64


def test_14_backward_fold_ranges_and_rejected_runs_leave_no_folder(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--folds", "3-1", "--out", str(tmp_path / "a")])
    assert "--folds: the range 3-1 runs backwards; write it low-high, e.g. 1-3" in _clean_error(result)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "10",
                                      "--out", str(tmp_path / "b")])
    assert "folds 0..9" in _clean_error(result)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_13_an_unwritable_out_is_one_line_naming_the_file(tmp_path, monkeypatch):
    def denied(self):
        raise PermissionError(13, "Permission denied", str(self.root / "results.csv"))

    monkeypatch.setattr(ResultsStore, "write_table", denied)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0",
                                      "--out", str(tmp_path / "run"), "--no-progress"])
    assert "Permission denied: '" in _clean_error(result) and "choose a folder you can write to" in result.output


@pytest.mark.parametrize("flag, value, message", [
    ("--weights", "equitabpfn=", "--weights takes METHOD=PATH, got 'equitabpfn='"),
    ("--weights", "equitabpfn=DIR", "is a folder, not a file"),
])
def test_14_evaluate_checkpoint_options_that_are_not_files(tmp_path, flag, value, message):
    value = value.replace("DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--out", str(tmp_path / "o"),
                                      flag, value])
    assert message in _clean_error(result) and not (tmp_path / "o").exists()


def test_14_a_diverged_training_state_is_refused_before_anything_is_exported(trained_run, tmp_path):
    """A run whose model.pt is missing and whose training state holds NaN weights: `export`
    refuses it in one line before it writes model.pt or --out."""
    from equibench.pretrain import STATE_FILE, state_file
    from equibench.pretrain.run_dir import load_state

    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    state = load_state(run)
    for tensor in state["model"].values():
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
    state_file.write(state, run / STATE_FILE)
    (run / "model.pt").unlink()
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "shipped.pt")])
    assert result.exit_code == 2, result.output
    assert "the training state in" in _clean_error(result) and "NaN or infinite weights" in _clean_error(result)
    assert not (run / "model.pt").exists() and not (tmp_path / "shipped.pt").exists()
