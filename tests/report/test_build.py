"""`equibench report` on synthetic results directories (no model is run)."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from equibench.cli import app
from equibench.evaluate.results_store import COLUMNS, ResultsStore
from equibench.figures import save_figure
from equibench.report import build_report, figures
from equibench.report.build import load_results
from equibench.report.tables import relative_speed

FOLDS = 3
# method -> (variant, accuracy offset, mean time per fold in seconds)
ENTRIES = [
    ("knn", "default", 0.00, 0.02),
    ("xgboost", "default", 0.06, 1.5),
    ("equitabpfn", "n1", 0.08, 0.1),
    ("equitabpfn", "n4", 0.09, 0.4),
    ("tabpfn-star", "n1", 0.04, 0.3),
    ("tabpfn-star", "n4", 0.05, 1.2),
]
FIGURES = {
    "gt10": ["relative_accuracy", "critical_difference_auc", "ensembles_auc_vs_time", "ensembles_auc_ratio_speedup"],
    "le10": ["relative_accuracy"],  # one variant per method: no bubble plot
}
TABLES = ["gt10_aggregate", "gt10_runtime", "gt10_ensembles", "gt10_ensembles_auc_ratio_speedup", "le10_aggregate",
          "le10_runtime", "skipped_failed"]


def _row(suite: str, task: str, fold: int, method: str, variant: str, **values) -> dict:
    row = dict.fromkeys(COLUMNS, "")
    row.update(suite=suite, task_id=task, dataset=f"data-{task}", fold=fold, method=method, variant=variant,
               status="ok", seed=0, n_train=100, n_val=20, n_test=20, n_features=5, n_features_used=5, n_classes=12)
    row.update(values)
    return row


def _suite_rows(suite: str, tasks: list[str], rng: np.random.Generator, entries: list[tuple] = ENTRIES) -> list[dict]:
    rows = []
    for task in tasks:
        base = rng.uniform(0.5, 0.8)
        for fold in range(FOLDS):
            for method, variant, offset, time_s in entries:
                accuracy = float(np.clip(base + offset + rng.normal(0, 0.03), 0.05, 0.99))
                rows.append(_row(
                    suite, task, fold, method, variant, accuracy=accuracy, auc=min(0.999, accuracy + 0.1),
                    f1=accuracy - 0.02, log_loss=1 - accuracy, time_fit_s=time_s * rng.uniform(0.5, 1.0),
                    time_predict_s=time_s * rng.uniform(0.0, 0.5),
                ))
    return rows


def _write_results(directory: Path, rows: list[dict]) -> Path:
    directory.mkdir(parents=True)
    pd.DataFrame(rows, columns=COLUMNS).to_csv(directory / "results.csv", index=False)
    manifest = {"settings": {"seed": 0}, "invocations": [{
        "command": f"equibench evaluate --suite {rows[0]['suite']} --out {directory}", "config": {},
        "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T01:00:00+00:00",
        "versions": {"python": "3.11", "equibench": "0.1.0"}, "git_sha": "abc1234",
        "machine": {"cpu": "test cpu", "cpu_count": 2},
    }]}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.fixture(scope="module")
def results_dirs(tmp_path_factory) -> list[Path]:
    """gt10: 4 tasks, plus a skipped and a failed row; le10: 2 tasks, n1 variants only, whose
    TabPFN* AUC is missing on 4 of 6 cells (so only 2 cells are paired for the CD diagram)."""
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("results")
    gt10 = _suite_rows("gt10", ["5", "7", "41", "3022"], rng)
    gt10.append(_row("gt10", "5", 0, "tabpfn-v2", "n1", status="skipped", reason="no weights"))
    failed = next(row for row in gt10 if (row["task_id"], row["fold"], row["method"]) == ("41", 2, "xgboost"))
    failed.update(status="failed", reason="MemoryError", accuracy="", auc="", f1="", log_loss="")
    le10 = _suite_rows("le10", ["3", "4"], rng, [entry for entry in ENTRIES if entry[1] != "n4"])
    for row in [row for row in le10 if row["method"] == "tabpfn-star"][:4]:
        row["auc"] = ""
    return [_write_results(root / "gt10", gt10), _write_results(root / "le10", le10)]


@pytest.fixture(scope="module")
def report(results_dirs, tmp_path_factory) -> Path:
    return build_report(results_dirs, tmp_path_factory.mktemp("report"))


def _ok_rows(results_dirs: list[Path], suite: str) -> list[dict]:
    rows = []
    for directory in results_dirs:
        with (directory / "results.csv").open() as handle:
            rows += [row for row in csv.DictReader(handle) if row["suite"] == suite and row["status"] == "ok"]
    return rows


def _fold_values(rows: list[dict], method: str, variant: str, column: str) -> dict[tuple[str, int], float]:
    return {(row["task_id"], int(row["fold"])): float(row[column]) for row in rows
            if (row["method"], row["variant"]) == (method, variant) and row[column] != ""}


def _expected(rows: list[dict], method: str, variant: str) -> dict[str, float]:
    """Aggregate row computed from the raw CSV rows with plain Python."""
    accuracy, knn = _fold_values(rows, method, variant, "accuracy"), _fold_values(rows, "knn", "default", "accuracy")
    tasks = sorted({task for task, _ in accuracy})
    relative, task_means, fold_sds = [], [], []
    for task in tasks:
        folds = [key for key in accuracy if key[0] == task]
        paired = [key for key in folds if key in knn]
        mine, theirs = statistics.mean(accuracy[k] for k in paired), statistics.mean(knn[k] for k in paired)
        relative.append(100 * (mine - theirs) / theirs)
        task_means.append(statistics.mean(accuracy[k] for k in folds))
        fold_sds.append(statistics.stdev(accuracy[k] for k in folds))
    times = [float(row["time_fit_s"]) + float(row["time_predict_s"]) for row in rows
             if (row["method"], row["variant"]) == (method, variant)]
    return {"median_rel_accuracy_pct": statistics.median(relative),
            "accuracy_mean_pct": 100 * statistics.mean(task_means),
            "accuracy_sem_pct": 100 * statistics.stdev(task_means) / math.sqrt(len(task_means)),
            "accuracy_fold_sd_pct": 100 * statistics.mean(fold_sds),
            "time_s": statistics.mean(times), "n_tasks": len(tasks), "n_folds": len(times),
            "folds_per_task_min": min(len([k for k in accuracy if k[0] == task]) for task in tasks),
            "folds_per_task_max": max(len([k for k in accuracy if k[0] == task]) for task in tasks),
            "n_seeds": len({row["seed"] for row in rows if (row["method"], row["variant"]) == (method, variant)})}


def test_every_figure_and_table_is_written_and_referenced(report: Path):
    out, text = report.parent, report.read_text()
    for suite, names in FIGURES.items():
        for name in names:
            for suffix in ("png", "pdf"):
                path = out / "figures" / f"{suite}_{name}.{suffix}"
                assert path.is_file() and path.stat().st_size > 1000, path
                assert f"figures/{path.name}" in text
    assert sorted(path.name for path in (out / "figures").iterdir()) == sorted(
        f"{suite}_{name}.{suffix}" for suite, names in FIGURES.items() for name in names for suffix in ("png", "pdf"))
    for name in TABLES:
        for suffix in ("md", "tex", "csv"):
            assert (out / "tables" / f"{name}.{suffix}").is_file(), name
        assert f"tables/{name}.tex" in text and f"tables/{name}.csv" in text
        assert (out / "tables" / f"{name}.md").read_text() in text
    assert "\\toprule" in (out / "tables" / "gt10_aggregate.tex").read_text()
    assert "equibench evaluate --suite gt10" in text and "abc1234" in text and "python 3.11" in text


@pytest.mark.parametrize("suite, method, variant, entry", [
    ("gt10", "xgboost", "default", "XGBoost"),
    ("gt10", "equitabpfn", "n1", "EquiTabPFN (n1)"),
    ("le10", "tabpfn-star", "n1", "TabPFN* (ECOC >10)"),
])
def test_aggregate_table_matches_an_independent_computation(report, results_dirs, suite, method, variant, entry):
    table = pd.read_csv(report.parent / "tables" / f"{suite}_aggregate.csv", index_col="entry")
    expected = _expected(_ok_rows(results_dirs, suite), method, variant)
    for column, value in expected.items():
        assert table.at[entry, column] == pytest.approx(value), column
    assert list(table["median_rel_accuracy_pct"]) == sorted(table["median_rel_accuracy_pct"], reverse=True)
    assert "EquiTabPFN (n4)" not in table.index  # main tables: smallest ensemble only


def test_tables_say_how_many_tasks_folds_and_seeds_each_number_rests_on(report):
    aggregate = (report.parent / "tables" / "gt10_aggregate.md").read_text().splitlines()
    assert aggregate[0].endswith("| fold-to-fold s.d. of accuracy (%) | time per fold (s) | tasks | folds per task | seeds |")
    # xgboost lost one of 41's three folds: 2-3 folds per task
    assert [line for line in aggregate if line.startswith("| XGBoost |")][0].endswith("| 4 | 2-3 | 1 |")
    ensembles = (report.parent / "tables" / "gt10_ensembles.md").read_text().splitlines()
    assert ensembles[0].endswith("| tasks | folds per task | seeds |") and ensembles[2].endswith("| 4 | 3 | 1 |")
    assert "seed-to-seed spread of the stochastic trainings is not in these numbers" in report.read_text()


def test_skipped_and_failed_rows_are_counted_not_scored(report):
    failures = pd.read_csv(report.parent / "tables" / "skipped_failed.csv")
    assert failures.to_dict("records") == [
        {"suite": "gt10", "method": "tabpfn-v2", "skipped": 1, "failed": 0, "most_common_reason": "no weights",
         "reason_count": 1},
        {"suite": "gt10", "method": "xgboost", "skipped": 0, "failed": 1, "most_common_reason": "MemoryError",
         "reason_count": 1},
    ]
    assert "TabPFNv2" not in pd.read_csv(report.parent / "tables" / "gt10_aggregate.csv")["entry"].tolist()


def test_speedup_of_equitabpfn_over_tabpfn_star(report, results_dirs):
    runtime = pd.read_csv(report.parent / "tables" / "gt10_runtime.csv", index_col="variant")
    rows = _ok_rows(results_dirs, "gt10")
    for variant in ("n1", "n4"):
        equi, star = (
            {key: _fold_values(rows, method, variant, "time_fit_s")[key]
             + _fold_values(rows, method, variant, "time_predict_s")[key]
             for key in _fold_values(rows, method, variant, "time_fit_s")}
            for method in ("equitabpfn", "tabpfn-star")
        )
        ratio = statistics.mean(star.values()) / statistics.mean(equi.values())
        assert runtime.at[variant, "speedup"] == pytest.approx(ratio)
    assert list(runtime.index) == ["n1", "n4"]


def test_speed_is_said_as_faster_or_slower_never_a_speed_up_below_one(report):
    """Issue 64, item 13: EquiTabPFN at 3x less time reads "3.00× faster"; 4.2x more, "4.20× slower"."""
    assert [relative_speed(value) for value in (3.0, 1 / 4.2, 1.0, 0.999, float("nan"))] == [
        "3.00× faster", "4.20× slower", "as fast (1.00×)", "as fast (1.00×)", "n/a"]
    text = report.read_text()
    runtime = text.split("### Runtime: EquiTabPFN vs TabPFN", 1)[1].split("###", 1)[0]
    assert "| variant | folds | EquiTabPFN (s) | TabPFN\\* (s) | EquiTabPFN vs TabPFN\\* |" in runtime
    assert "× faster |" in runtime and "speed-up" not in runtime
    bars = pd.read_csv(report.parent / "tables" / "gt10_ensembles_auc_ratio_speedup.csv", index_col="entry")
    shown = (report.parent / "tables" / "gt10_ensembles_auc_ratio_speedup.md").read_text()
    for entry, speedup in bars["speedup"].items():
        assert relative_speed(speedup) in shown
    assert "committed" not in text  # a user's own results are stored, not committed


def test_critical_difference_diagram_needs_five_paired_cells(report):
    text = report.read_text()
    assert "No critical-difference diagram for le10: only 2 (task, fold) cells have an AUC" in text
    assert not list((report.parent / "figures").glob("le10_critical_difference*"))
    assert "Critical-difference diagram of gt10" in text


def test_ensemble_table_marks_the_pareto_front(report):
    table = pd.read_csv(report.parent / "tables" / "gt10_ensembles.csv", index_col="entry")
    assert set(table.index) == {"KNN", "XGBoost", "EquiTabPFN (n1)", "EquiTabPFN (n4)", "TabPFN* (ECOC >10) (n1)",
                                "TabPFN* (ECOC >10) (n4)"}
    for entry in table.index:
        dominated = ((table["time_s"] <= table.at[entry, "time_s"])
                     & (table["auc_rel_pct"] > table.at[entry, "auc_rel_pct"])).any()
        assert table.at[entry, "pareto"] == (not dominated), entry


def test_suite_without_knn_is_reported_not_fatal(tmp_path):
    rows = [row for row in _suite_rows("custom", ["1", "2"], np.random.default_rng(1)) if row["method"] != "knn"]
    report = build_report([_write_results(tmp_path / "custom", rows)], tmp_path / "report")
    text = report.read_text()
    assert "custom has no KNN rows" in text
    assert not list((tmp_path / "report" / "figures").glob("*relative_accuracy*"))
    table = pd.read_csv(tmp_path / "report" / "tables" / "custom_aggregate.csv")
    assert table["median_rel_accuracy_pct"].isna().all() and len(table) == 3


def test_bad_input_names_the_directory_and_what_to_run(tmp_path):
    with pytest.raises(ValueError, match=r"missing. does not exist .*: run `evaluate\(config=EvaluateConfig\(suite='SUITE'\), "
                                         r"out_dir='.*missing'\)`"):
        build_report([tmp_path / "missing"], tmp_path / "report")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"'.*empty' has no results.csv: .*`evaluate\(config="):
        build_report([tmp_path / "empty"], tmp_path / "report")
    skipped = [_row("demo", "1", 0, "tabpfn-v1", "n1", status="skipped", reason="no weights")]
    directory = _write_results(tmp_path / "skipped", skipped)
    with pytest.raises(ValueError, match=r"skipped.*no ok rows \(1 skipped\): run `evaluate\(config=EvaluateConfig\(suite='demo'\)"):
        build_report([directory], tmp_path / "report")


def test_cli_report_reproduces_the_same_files(report, results_dirs, tmp_path):
    """A second run (through the CLI) writes byte-identical tables, figures and REPORT.md."""
    missing = CliRunner().invoke(app, ["report", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "r")])
    assert missing.exit_code == 2 and f"`equibench evaluate --suite SUITE --out {tmp_path / 'missing'}`" in missing.output
    args = [arg for directory in results_dirs for arg in ("--results", str(directory))]
    result = CliRunner().invoke(app, ["report", *args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    again = tmp_path / "r" / "REPORT.md"
    assert result.stdout.strip().splitlines() == [f"read {', '.join(map(str, results_dirs))}", str(again)]
    assert again.read_bytes() == report.read_bytes()
    for first in sorted((report.parent / "tables").iterdir()) + sorted((report.parent / "figures").iterdir()):
        second = again.parent / first.parent.name / first.name
        assert first.read_bytes() == second.read_bytes(), first.name


def test_cli_report_without_options_reads_the_results_folders_here(tmp_path, monkeypatch):
    """No --results: every results/<name> folder here that holds results; the report goes to
    results/report only for exactly those, else to runs/report; with none, one error line."""
    rng = np.random.default_rng(0)
    only_xgboost = [("xgboost", "default", 0.0, 0.1)]  # no KNN, one method: no figure, a quick report
    for suite in ("demo", "gt10"):
        _write_results(tmp_path / "results" / suite, _suite_rows(suite, ["1"], rng, only_xgboost))
    (tmp_path / "results" / "pretraining").mkdir()  # holds no results: not read
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["report"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["read results/demo, results/gt10", "results/report/REPORT.md"]
    assert "From `results/demo` (3 rows of results.csv" in (tmp_path / "results/report/REPORT.md").read_text()
    result = runner.invoke(app, ["report", "--results", "results/gt10", "--results", "results/demo"])
    assert result.exit_code == 0 and result.stdout.splitlines()[-1] == "results/report/REPORT.md"
    result = runner.invoke(app, ["report", "--results", "results/demo"])  # not the folders here: not results/report
    assert result.exit_code == 0 and result.stdout.splitlines() == ["read results/demo", "runs/report/REPORT.md"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = runner.invoke(app, ["report"])
    assert result.exit_code == 2 and "pass --results DIR" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (elsewhere / "runs").exists()



def test_ratio_speedup_bars_are_tabpfn_stars_variants_against_equitabpfn(report, results_dirs):
    """The bubble figure's right panel, recomputed from the raw rows with plain Python."""
    table = pd.read_csv(report.parent / "tables" / "gt10_ensembles_auc_ratio_speedup.csv", index_col="entry")
    assert list(table.index) == ["TabPFN* (ECOC >10) (n1)", "TabPFN* (ECOC >10) (n4)"]
    rows = _ok_rows(results_dirs, "gt10")
    knn = _fold_values(rows, "knn", "default", "auc")

    def ratio(method: str, variant: str) -> float:
        auc = _fold_values(rows, method, variant, "auc")
        tasks = sorted({task for task, _ in auc})
        return statistics.mean(statistics.mean(auc[k] for k in auc if k[0] == task and k in knn)
                               / statistics.mean(knn[k] for k in auc if k[0] == task and k in knn) for task in tasks)

    equi_time = _fold_values(rows, "equitabpfn", "n1", "time_fit_s")
    for variant in ("n1", "n4"):
        entry = f"TabPFN* (ECOC >10) ({variant})"
        assert table.at[entry, "auc_ratio"] == pytest.approx(ratio("tabpfn-star", variant))
        star_time = {key: value + _fold_values(rows, "tabpfn-star", variant, "time_predict_s")[key]
                     for key, value in _fold_values(rows, "tabpfn-star", variant, "time_fit_s").items()}
        equi = {key: value + _fold_values(rows, "equitabpfn", "n1", "time_predict_s")[key]
                for key, value in equi_time.items()}
        paired = sorted(star_time.keys() & equi.keys())
        expected = statistics.mean(star_time[k] for k in paired) / statistics.mean(equi[k] for k in paired)
        assert table.at[entry, "speedup"] == pytest.approx(expected)
        assert table.at[entry, "equitabpfn_auc_ratio"] == pytest.approx(ratio("equitabpfn", "n1"))
    assert "No AUC-ratio and speed-up bars" not in report.read_text()


@pytest.mark.slow
def test_cli_report_without_options_regenerates_the_committed_report_byte_for_byte(tmp_path, monkeypatch):
    """`equibench report` in a checkout rewrites results/report from results/demo, gt10, large, le10:
    the same bytes as committed, so it leaves the checkout unmodified (about 15 s)."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    committed = root / "results" / "report"
    for suite in ("demo", "gt10", "large", "le10"):
        shutil.copytree(root / "results" / suite, tmp_path / "results" / suite, ignore=shutil.ignore_patterns("probas"))
        (tmp_path / "results" / suite / "probas").symlink_to(root / "results" / suite / "probas")  # only read
    shutil.copytree(committed, tmp_path / "results" / "report", ignore=shutil.ignore_patterns(".equibench.lock*"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["report"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "read results/demo, results/gt10, results/large, results/le10"
    written = sorted(path.relative_to(tmp_path / "results" / "report") for path in
                     (tmp_path / "results" / "report").rglob("*") if path.is_file() and "lock" not in path.name)
    assert written == sorted(path.relative_to(committed) for path in committed.rglob("*")
                             if path.is_file() and "lock" not in path.name)
    for name in written:
        assert (tmp_path / "results" / "report" / name).read_bytes() == (committed / name).read_bytes(), name


# -- stored cells read with their types checked (issue 51, item 9) ---------------------------

def _cells_results(directory: Path) -> Path:
    """A results folder of committed cells (cells/*.json through the results store), no model run."""
    rows = _suite_rows("demo", ["1", "2"], np.random.default_rng(3), ENTRIES[:1])
    store = ResultsStore(directory)
    for row in rows:
        key = f"{row['suite']}__{row['task_id']}__fold{row['fold']}__{row['method']}__{row['variant']}"
        store.write(key, {name: value for name, value in row.items() if value != ""})
    return directory


@pytest.mark.parametrize("field, value, message", [
    ("accuracy", "high", "has accuracy 'high', not a finite number"),
    ("accuracy", None, "is an ok cell without a finite accuracy (it has None)"),
    ("time_fit_s", float("inf"), "has time_fit_s inf, not a finite number"),
    ("auc", True, "has auc True, not a finite number"),
    ("fold", "0", "has fold '0', not a fold number"),
    ("status", "done", "has the status 'done', not one of ok, skipped, failed"),
    ("method", 7, "has method 7, not text"),
])
def test_a_cell_with_a_field_of_the_wrong_type_is_a_damaged_cell(tmp_path, field, value, message):
    results = _cells_results(tmp_path / "results")
    cell = sorted((results / "cells").glob("*.json"))[1]
    cell.write_text(json.dumps({**json.loads(cell.read_text()), field: value}))
    assert ResultsStore(results).damaged == {cell.stem: f"cell file {str(cell)!r} {message}"}  # evaluate reruns it
    with pytest.raises(ValueError, match=r"1 stored cells of .* are damaged \(e.g. .*" + re.escape(message)):
        build_report([results], tmp_path / "report")
    result = CliRunner().invoke(app, ["report", "--results", str(results), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert message in result.output and "rerun `equibench evaluate" in result.output


def test_a_results_csv_with_a_non_numeric_metric_is_named(tmp_path):
    rows = _suite_rows("demo", ["1", "2"], np.random.default_rng(3), ENTRIES[:2])
    rows[2]["accuracy"] = "high"
    results = _write_results(tmp_path / "results", rows)
    with pytest.raises(ValueError, match=r"results.csv' is damaged: its accuracy column holds 'high' \(row 3\), not a "
                                         r"finite number; rerun `evaluate\(config="):
        build_report([results], tmp_path / "report")


def test_a_report_written_inside_a_results_folder_never_makes_it_look_damaged(tmp_path):
    results = _cells_results(tmp_path / "results")
    for out in (results / "cells", results):
        build_report([results], out)
        assert (out / ".equibench-report.json").is_file()
    (results / "cells" / ".equibench.lock.json").write_text("{}\n")  # as a report killed while it held the lock
    (results / "cells" / "..equibench-report.json.abcd1234.tmp").write_text("{}")  # and mid-write
    store = ResultsStore(results)
    assert store.damaged == {} and len(store.rows()) == 6
    assert store.remove_stray_temporaries() == []  # the report's file, not the store's
    assert len(load_results([results])[0]) == 6


def test_a_suite_with_local_contexts_gets_accuracy_against_fit_and_predict_time(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    entries = [("knn", "default", 0.0, 0.02), ("equitabpfn", "n1", 0.08, 0.3), ("equitabpfn", "n1-subsample", 0.03, 0.6)]
    rows = _suite_rows("large", ["6", "7592"], rng, entries)
    for row in rows:
        if row["method"] == "equitabpfn":
            local = row["variant"] == "n1"
            row.update(diagnostics=json.dumps({"context": "local" if local else "subsample", "context_groups": 8 if local else 1,
                       "context_rows": 250.0 if local else 3000.0, "context_classes": 4.5 if local else 12.0}))
    drawn = []
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem, **kw: drawn.append(figure) or save_figure(figure, stem, **kw))
    out = build_report([_write_results(tmp_path / "large", rows)], tmp_path / "report")
    report = out.read_text()
    assert "### Tables past the context: accuracy vs time" in report
    # issue 64, item 17: XGBoost's time is in its fit, a PFN's in its predict: both panels, both columns
    panels = next(figure for figure in drawn if figure.get_suptitle() == "large: accuracy vs time").axes
    assert [axes.get_xlabel() for axes in panels] == ["mean fit + predict time per 1,000 test rows (s, log scale)",
                                                      "mean predict time per 1,000 test rows (s, log scale)"]
    assert "| fit + predict s / 1,000 rows | predict s / 1,000 rows |" in report
    assert (tmp_path / "report" / "figures" / "large_contexts_accuracy_vs_time.png").is_file()
    table = pd.read_csv(tmp_path / "report" / "tables" / "large_contexts.csv")
    local = table.set_index("entry").loc["EquiTabPFN (n1)"]
    assert local["context_rows"] == 250 and local["context_groups"] == 8 and local["tasks"] == 2
    predicted = [1000 * r["time_predict_s"] / r["n_test"] for r in rows if r["variant"] == "n1"]
    assert local["predict_s_per_1k"] == pytest.approx(statistics.mean(predicted))
    spent = [1000 * (r["time_fit_s"] + r["time_predict_s"]) / r["n_test"] for r in rows if r["variant"] == "n1"]
    assert local["fit_predict_s_per_1k"] == pytest.approx(statistics.mean(spent))
    assert math.isnan(table.set_index("entry").loc["KNN", "context_rows"])
