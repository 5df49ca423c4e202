"""Your own tables in `equibench evaluate`: suite-file entries naming CSV/parquet files, and
the Python API `evaluate_frame`; same protocol, store and report as OpenML tasks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from equibench import evaluate_frame
from equibench.cli import app
from equibench.errors import InvalidInputError
from equibench.preprocessing import TableEncoder
from equibench.tasks.suites import load_suite, load_task
from equibench.tasks.task import stratified_folds

DATA = Path(__file__).parents[1] / "data"
TINY = {"weights": {"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt")}}


def _table(n=120, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], n)
    label = np.where(x + (colour == "red") > 0.5, "sick", "well")
    frame = pd.DataFrame({"x": x, "noise": rng.normal(size=n), "colour": colour, "outcome": label})
    frame.loc[::11, "noise"] = np.nan
    frame["fold"] = np.arange(n) % 4
    return frame


def _suite(tmp_path, entry: str, name="mine") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\ntasks = ["demo-iris", {entry}]\n')
    return path


def test_a_suite_file_names_csv_and_parquet_tables(tmp_path):
    frame = _table()
    (tmp_path / "data").mkdir()
    frame.to_csv(tmp_path / "data" / "patients.csv", index=False)
    frame.drop(columns="fold").to_parquet(tmp_path / "data" / "patients.parquet")
    suite = load_suite(_suite(tmp_path, '{file = "data/patients.csv", target = "outcome", folds = "fold"}, '
                                         '{file = "data/patients.parquet", target = "outcome", name = "pq"}'))
    assert suite.task_ids == ("demo-iris", "file-patients", "file-pq") and not suite.needs_openml
    from_csv = load_task("file-patients", None, suite.files)
    assert list(from_csv.X.columns) == ["x", "noise", "colour"] and from_csv.categorical.tolist() == [False, False, True]
    assert from_csv.n_folds == 4 and (from_csv.test_folds == frame["fold"].to_numpy()).all()
    assert set(from_csv.classes) == {"sick", "well"}
    from_parquet = load_task("file-pq", None, suite.files)
    assert from_parquet.n_folds == 10
    np.testing.assert_array_equal(from_parquet.test_folds, stratified_folds(frame["outcome"].to_numpy()))


@pytest.mark.parametrize("entry, message", [
    ('{file = "missing.csv", target = "outcome"}', "does not exist"),
    ('{file = "data.csv"}', "needs 'file' and 'target'"),
    ('{file = "data.txt", target = "outcome"}', "must be a .csv or .parquet file"),
    ('{file = "data.csv", target = "outcome", name = "a b"}', "may only hold letters"),
])
def test_bad_table_entries_are_one_clear_error(tmp_path, entry, message):
    _table().to_csv(tmp_path / "data.csv", index=False)
    with pytest.raises(ValueError, match=message):
        load_suite(_suite(tmp_path, entry))


@pytest.mark.parametrize("change, message", [
    (lambda f: f, "has no target column 'label'"),
    (lambda f: f.assign(fold=np.arange(len(f)) % 2), "n >= 3"),
    (lambda f: f.assign(fold=np.arange(len(f)) % 4 + 1), "every fold 0..n-1"),
    (lambda f: f.assign(outcome=f["outcome"].where(f.index != 3)), "1 missing values"),
    # pandas would read the second `outcome` as a feature `outcome.1`: accuracy 1.0, exit 0
    (lambda f: f.set_axis(["x", "outcome", "colour", "outcome", "fold"], axis=1), "several columns named 'outcome'"),
    (lambda f: f.assign(outcome="well"), "holds a single class ('well' in all 120 rows)"),
    (lambda f: f.assign(outcome=np.where(f["fold"] < 2, f["outcome"], "well")), "the train part of fold 0"),
])
def test_bad_tables_are_refused_before_any_cell_runs(tmp_path, change, message):
    change(_table()).to_csv(tmp_path / "data.csv", index=False)
    target = "label" if "target column" in message else "outcome"
    suite = _suite(tmp_path, f'{{file = "data.csv", target = "{target}", folds = "fold"}}')
    result = CliRunner().invoke(app, ["evaluate", "--suite", str(suite), "--out", str(tmp_path / "out"),
                                      "--methods", "knn", "--folds", "0"])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "out").exists()


def test_a_parquet_table_with_a_repeated_column_name_is_refused_naming_it(tmp_path):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    frame = _table()
    names = ["x", "outcome", "outcome"]
    pq.write_table(pa.table([pa.array(frame[name]) for name in names], names=names), tmp_path / "data.parquet")
    suite = load_suite(_suite(tmp_path, '{file = "data.parquet", target = "outcome"}'))
    with pytest.raises(InvalidInputError, match=r"data.parquet' has several columns named 'outcome'"):
        load_task("file-data", None, suite.files)


def test_a_rare_class_without_a_fold_column_is_refused_naming_the_fold(tmp_path):
    frame = _table(n=60).drop(columns="fold").assign(outcome=["sick"] + ["well"] * 59)
    with pytest.raises(InvalidInputError, match=r"train part of fold \d of .* holds only class 'well' .* the rarest "
                                                r"class, 'sick', has 1 rows\): add rows of the rare classes, or give a "
                                                r"'folds' column"):
        evaluate_frame(frame, "outcome", tmp_path / "out", methods="knn", folds=0)


@pytest.mark.parametrize("change, message", [
    (lambda f: f.set_axis(["x", "noise", "outcome", "outcome"], axis=1), "frame has several columns named 'outcome'"),
    (lambda f: f.assign(outcome=[1, "sick", 2.5] * 40),
     r"target column 'outcome' of the frame mixes labels of several types: number \(1\), text \('sick'\)"),
    (lambda f: f.assign(outcome="well"), "holds a single class"),
])
def test_evaluate_frame_refuses_repeated_columns_mixed_labels_and_one_class(tmp_path, change, message):
    with pytest.raises(InvalidInputError, match=message):
        evaluate_frame(change(_table().drop(columns="fold")), "outcome", tmp_path / "out", methods="knn", folds=0)
    assert not (tmp_path / "out").exists()


def test_evaluate_frame_reads_mixed_object_columns_as_the_classifier_does_and_one_method_name(tmp_path):
    frame = _table().drop(columns="fold").assign(mixed=pd.Series([1, "a", 2.5, None] * 30, dtype=object),
                                                 numbers=pd.Series([1, 2.5, None] * 40, dtype=object))
    summary = evaluate_frame(frame, "outcome", tmp_path / "out", methods="knn", folds=0)  # one name, not k, n, n
    assert summary.counts == {"ok": 1} and list(summary.methods()) == ["knn"]
    stored = pd.read_parquet(tmp_path / "out" / "data" / "frame.parquet")
    assert stored["mixed"].tolist()[:3] == ["1", "a", "2.5"] and stored["mixed"].isna().sum() == 30  # text categories
    assert stored["numbers"].dtype == float and stored["numbers"].tolist()[:2] == [1.0, 2.5]
    task = load_task("file-frame", None, load_suite(tmp_path / "out" / "suite.yaml").files)
    assert task.categorical.tolist() == [False, False, True, True, False]
    # the classifiers' encoding of the frame given and of the table stored are the same
    given = TableEncoder(max_features=10).fit_transform(frame.drop(columns="outcome"), task.encoded_labels())
    np.testing.assert_array_equal(given, TableEncoder(max_features=10).fit_transform(task.X, task.encoded_labels()))


def test_cli_evaluates_a_csv_end_to_end_resumes_and_reports(tmp_path):
    _table().to_csv(tmp_path / "data.csv", index=False)
    suite = _suite(tmp_path, '{file = "data.csv", target = "outcome", folds = "fold", name = "patients"}')
    out = tmp_path / "out"
    args = ["evaluate", "--suite", str(suite), "--out", str(out), "--methods", "knn,equitabpfn", "--folds", "0,1",
            "--weights", f"equitabpfn={TINY['weights']['equitabpfn']}", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(out / "results.csv", dtype={"task_id": str})
    mine = rows[rows.task_id == "file-patients"]
    assert len(mine) == 4 and (mine.status == "ok").all() and set(mine.dataset) == {"patients"}
    assert mine.loc[mine.method == "knn", "accuracy"].min() > 0.6  # the label is learnable
    assert (mine.n_test == 30).all()  # fold column honoured: 120 rows in 4 folds
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "this run: nothing new" in result.output
    _table(seed=1).to_csv(tmp_path / "data.csv", index=False)  # the data changed under the results
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "file-patients" in result.output and "changed" in result.output
    report = CliRunner().invoke(app, ["report", "--results", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "REPORT.md").read_text()
    assert "## Suite `mine`" in text and "2 tasks, 2 methods, 8 ok cells" in text  # demo-iris + the table


def test_evaluate_frame_runs_the_same_protocol_and_resumes(tmp_path):
    frame = _table().drop(columns="fold")
    summary = evaluate_frame(frame, "outcome", tmp_path / "out", name="patients", methods=("knn",), folds=(0, 1))
    assert summary.counts["ok"] == 2
    # a short summary, not every cell
    assert repr(summary) == (f"<EvaluateSummary patients: 2 cells (ok=2, skipped=0, failed=0); this call wrote ok=2; "
                             f"methods knn; in {str(tmp_path / 'out')!r}>")
    assert summary.methods()["knn"]["ok"] == 2 and summary.table().task_id.tolist() == ["file-patients"] * 2
    rows = pd.read_csv(tmp_path / "out" / "results.csv", dtype={"task_id": str})
    assert rows.task_id.unique().tolist() == ["file-patients"] and (rows.n_test == 12).all()
    assert load_suite(tmp_path / "out" / "suite.yaml").files[0].target == "outcome"
    again = evaluate_frame(frame, "outcome", tmp_path / "out", name="patients", methods=("knn",), folds=(0, 1))
    assert sum(again.counts.values()) == 0 and len(again.pending) == 0
    with pytest.raises(ValueError, match="another frame named 'patients'"):
        evaluate_frame(frame.head(60), "outcome", tmp_path / "out", name="patients", methods=("knn",), folds=(0,))
    with pytest.raises(ValueError, match="no target column 'label'"):
        evaluate_frame(frame, "label", tmp_path / "other")


def test_evaluate_frame_takes_polars_and_a_fold_column(tmp_path):
    pl = pytest.importorskip("polars")
    frame = pl.from_pandas(_table())
    summary = evaluate_frame(frame, "outcome", tmp_path, name="polars-frame", fold_column="fold", methods=("knn",),
                             folds=(3,))
    assert summary.counts["ok"] == 1
    rows = pd.read_csv(tmp_path / "results.csv")
    assert rows.n_test.tolist() == [30] and rows.n_features.tolist() == [3]


def test_a_table_without_rows_is_refused_naming_it(tmp_path):
    """A header-only CSV or a zero-row frame: one clear line, not an IndexError."""
    (tmp_path / "empty.csv").write_text("x,outcome\n")
    suite = load_suite(_suite(tmp_path, '{file = "empty.csv", target = "outcome"}'))
    with pytest.raises(InvalidInputError, match=r"empty.csv' has no rows \(only a header\?\)"):
        load_task("file-empty", None, suite.files)
    with pytest.raises(InvalidInputError, match="has no rows"):
        evaluate_frame(_table().iloc[:0], "outcome", tmp_path / "out", methods="knn", folds=0)


def test_a_missing_fold_column_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(InvalidInputError, match="the frame has no fold column 'folds' \\(fold_column\\)"):
        evaluate_frame(_table(), "outcome", tmp_path / "out", fold_column="folds", methods="knn", folds=0)
    assert not (tmp_path / "out").exists()
