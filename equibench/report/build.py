"""``equibench report``: tables, figures and REPORT.md from one or more ``equibench evaluate``
results directories (stored results only; no model is run).

    OUT/REPORT.md                 every table inline and every figure embedded
    OUT/tables/<suite>_*.md|tex|csv
    OUT/figures/<suite>_*.png|pdf

The main tables, box plots and critical-difference diagrams use each method's smallest
ensemble variant (n1 when present); the runtime table and the bubble plot use every variant.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from ..atomic_files import atomic_write_text
from ..errors import InvalidInputError
from ..evaluate.results_store import cell_files, read_cells, results_table
from ..outdir_lock import locked_folder
from ..tables import markdown_escape, write_table
from . import figures, finetuning, tables

REQUIRED_COLUMNS = ["suite", "task_id", "fold", "method", "variant", "status", "reason", "accuracy", "auc", "f1",
                    "time_fit_s", "time_predict_s"]
NUMERIC_COLUMNS = ["fold", "accuracy", "auc", "f1", "time_fit_s", "time_predict_s"]
CELL_KEY = ["suite", "task_id", "fold", "method", "variant"]
_STATUS_ORDER = {"ok": 0, "skipped": 1, "failed": 2}
_DTYPES = {"task_id": str, "suite": str, "method": str, "variant": str, "reason": str}
#: The files a report wrote (relative paths), so that the next report removes only those.
OUTPUTS_FILE = ".equibench-report.json"
_OUTPUT_NAME = re.compile(r"REPORT\.md|(tables|figures)/[A-Za-z0-9_.-]+")


def _evaluate_hint(results_dir: Path, suite: str = "SUITE") -> str:
    return f"`evaluate(config=EvaluateConfig(suite={suite!r}), out_dir={str(results_dir)!r})`"


def _cell_rows(results_dir: Path) -> tuple[pd.DataFrame, str] | None:
    """The stored cells of a results directory (cells/*.json, the store's truth) as
    results.csv would hold them, and whether its results.csv is current; None when it has no
    cells; a ValueError when some are damaged."""
    if not cell_files(results_dir):
        return None
    rows, damaged = read_cells(results_dir)
    if damaged:
        key, reason = next(iter(damaged.items()))
        raise InvalidInputError(f"{len(damaged)} stored cells of {str(results_dir)!r} are damaged (e.g. {key}: {reason}); "
                         f"rerun {_evaluate_hint(results_dir)} to recompute them, then the report")
    text = results_table(list(rows.values())).to_csv(index=False)
    snapshot = results_dir / "results.csv"
    source = f"{len(rows)} stored cells in cells/"
    # a folder need not hold the snapshot (results/ does not commit it); one that differs is named
    if snapshot.is_file() and snapshot.read_text(errors="replace") != text:
        source += " (its results.csv, a snapshot, was stale)"
    return pd.read_csv(io.StringIO(text), dtype=_DTYPES), source  # the same types as results.csv gives


def read_results(results_dir: Path) -> tuple[pd.DataFrame, str]:
    """The rows of one results directory and where they came from (its stored cells, else
    its results.csv); a ValueError says what to run when it has none."""
    path = results_dir / "results.csv"
    if not results_dir.is_dir():
        raise InvalidInputError(f"results directory {str(results_dir)!r} does not exist (or is not a directory): run {_evaluate_hint(results_dir)} first")
    cells = _cell_rows(results_dir)
    if cells is not None:
        rows, source = cells
    elif not path.is_file():
        raise InvalidInputError(f"{str(results_dir)!r} has no results.csv: run (or rerun, to resume) {_evaluate_hint(results_dir)}")
    else:
        try:
            rows = pd.read_csv(path, dtype=_DTYPES)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as error:
            raise InvalidInputError(f"{str(path)!r} is unreadable ({str(error).strip()}); rerun {_evaluate_hint(results_dir)} "
                             "to rebuild it") from None
        source = f"{len(rows)} rows of results.csv (no cells/ folder)"
    missing = [column for column in REQUIRED_COLUMNS if column not in rows.columns]
    if missing:
        raise InvalidInputError(f"{str(path)!r} lacks the columns {', '.join(missing)}: is it a results.csv that evaluate wrote?")
    for column in NUMERIC_COLUMNS:
        values = pd.to_numeric(rows[column], errors="coerce")
        wrong = rows.index[(values.isna() & rows[column].notna()) | values.isin([float("inf"), float("-inf")])]
        if len(wrong):
            raise InvalidInputError(
                f"{str(path)!r} is damaged: its {column} column holds {rows.at[wrong[0], column]!r} (row "
                f"{wrong[0] + 1}), not a finite number; rerun {_evaluate_hint(results_dir)} to rebuild it"
            )
        rows[column] = values
    if not (rows["status"] == "ok").any():
        counts = ", ".join(f"{n} {status}" for status, n in rows["status"].value_counts().sort_index().items()) or "no rows"
        suite = rows["suite"].iloc[0] if len(rows) else "SUITE"
        raise InvalidInputError(f"{str(path)!r} has no ok rows ({counts}): run {_evaluate_hint(results_dir, suite)} with "
                         "methods that can run here, and rerun it until cells succeed")
    return rows, source


def load_results(results_dirs: list[Path]) -> tuple[pd.DataFrame, int, list[str]]:
    """All rows of the directories, one per cell (an ok row wins over a skipped or failed one,
    then the earlier directory), sorted; the number of duplicate rows dropped; and per
    directory where its rows came from."""
    if not results_dirs:
        raise InvalidInputError(f"no results directory given: run {_evaluate_hint(Path('DIR'))}, then pass its folder in `results_dirs`")
    read = [read_results(Path(path)) for path in results_dirs]
    rows = pd.concat([frame.assign(source=index) for index, (frame, _) in enumerate(read)], ignore_index=True)
    rows["status_order"] = rows["status"].map(_STATUS_ORDER).fillna(len(_STATUS_ORDER))
    rows = rows.sort_values([*CELL_KEY, "status_order", "source"], kind="stable")
    unique = rows.drop_duplicates(CELL_KEY).drop(columns=["status_order", "source"])
    unique["time_s"] = unique["time_fit_s"] + unique["time_predict_s"]
    return unique.reset_index(drop=True), len(rows) - len(unique), [source for _, source in read]


def _file_stem(suite: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", suite)


def _table_item(description: str, display: pd.DataFrame, raw: pd.DataFrame, out_dir: Path, name: str) -> list[str]:
    markdown = write_table(display, raw, out_dir / "tables" / name)
    return [description, "", markdown, f"Files: [LaTeX](tables/{name}.tex), [CSV](tables/{name}.csv)", ""]


def _figure_item(description: str, paths: list[Path], out_dir: Path) -> list[str]:
    png, pdf = (path.relative_to(out_dir).as_posix() for path in paths)
    return [description, "", f"![{Path(png).stem}]({png})", "", f"PDF: [{pdf}]({pdf})", ""]


def _aggregate_item(aggregate: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    description = (
        f"Aggregate results on {suite}: median over tasks of the accuracy improvement over KNN, and mean ± s.e.m. "
        "over tasks of each task's mean over folds (%), mean fit + predict time per fold over all cells; "
        "sorted by median relative accuracy. The s.e.m. is the spread between tasks; the fold-to-fold s.d. (mean "
        "over tasks of the s.d. of accuracy over a task's folds) is the spread within a task. Each number rests on "
        "the tasks, folds per task and seeds in the last columns: one run (one seed) per (task, fold), so the "
        "seed-to-seed spread of the stochastic trainings is not in these numbers."
    )
    return ["### Aggregate table", "", *_table_item(description, tables.aggregate_display(aggregate), aggregate,
                                                      out_dir, f"{_file_stem(suite)}_aggregate")]


def _boxplot_item(cells: pd.DataFrame, aggregate: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    main = cells[cells["main"]]
    relative = tables.relative_to_knn(main, "accuracy")
    paths = figures.relative_accuracy_boxplot(relative, aggregate["time_s"], list(aggregate.index), suite,
                                       out_dir / "figures" / f"{_file_stem(suite)}_relative_accuracy")
    description = (f"Per-task accuracy improvement over KNN on {suite} (each task averaged over the folds both "
                   "methods have), methods ordered by median, boxes coloured by mean time per fold (log scale).")
    return ["### Accuracy relative to KNN", "", *_figure_item(description, paths, out_dir)]


def _critical_difference_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    main = cells[cells["main"]]
    auc = main.pivot(index=["task_id", "fold"], columns="entry", values="auc").dropna()  # every entry's AUC present
    header = ["### Critical-difference diagram (AUC)", ""]
    if auc.shape[1] < 2:
        sentence = f"No critical-difference diagram for {suite}: it needs at least 2 methods with AUCs, found {auc.shape[1]}."
        return [*header, sentence, ""]
    if len(auc) < tables.MIN_CD_ROWS:
        counts = main.groupby("entry")["auc"].count()
        fewest = counts.idxmin()  # the first of the entries (sorted) with the fewest
        return [*header, markdown_escape(
            f"No critical-difference diagram for {suite}: only {len(auc)} (task, fold) cells have an AUC for all "
            f"{auc.shape[1]} methods (fewest: {fewest}, {counts[fewest]}); autorank needs at least "
            f"{tables.MIN_CD_ROWS}."), ""]
    paths, sentence = figures.critical_difference_diagram(
        auc, suite, out_dir / "figures" / f"{_file_stem(suite)}_critical_difference_auc")
    sentence = markdown_escape(sentence)
    return [*header, *(_figure_item(sentence, paths, out_dir) if paths else [sentence, ""])]


def _runtime_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    header = ["### Runtime: EquiTabPFN vs TabPFN\\*", ""]
    runtime = tables.runtime_table(cells)
    if runtime.empty:
        sentence = (f"No runtime comparison for {suite}: it needs ok cells of both equitabpfn and tabpfn-star "
                    "with the same variant on the same (task, fold).")
        return [*header, sentence, ""]
    description = (f"Mean fit + predict time per fold on {suite} over the (task, fold) cells both ran, per ensemble "
                   "variant, and how much faster or slower EquiTabPFN is than TabPFN\\* (the ratio of their mean "
                   "times; TabPFN\\* uses ECOC beyond 10 classes).")
    return [*header, *_table_item(description, tables.runtime_display(runtime), runtime, out_dir,
                                  f"{_file_stem(suite)}_runtime")]


def _ensemble_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    ensembles = tables.ensemble_table(cells)
    name = f"{_file_stem(suite)}_ensembles"
    paths = figures.ensemble_bubble_plot(ensembles, suite, out_dir / "figures" / f"{name}_auc_vs_time")
    figure_line = (f"Mean time per fold vs mean AUC improvement over KNN on {suite} for every ensemble variant "
                   "(bubble area ∝ members) and every other method, with the Pareto front (lower time, higher AUC).")
    table_line = f"The points of the bubble plot of {suite}."
    lines = ["### Ensemble size: AUC vs runtime", "", *_figure_item(figure_line, paths, out_dir),
             *_table_item(table_line, tables.ensemble_display(ensembles), ensembles, out_dir, name)]
    bars = tables.ratio_speedup_table(cells)
    if bars.empty:
        return [*lines, (f"No AUC-ratio and speed-up bars for {suite}: they need ok cells of equitabpfn, knn and "
                         "an ensembled method other than equitabpfn (tabpfn-star, tabpfn-v1, ...)."), ""]
    paths = figures.ratio_speedup_bars(bars, suite, out_dir / "figures" / f"{name}_auc_ratio_speedup")
    figure_line = (f"The paper's bars on {suite}: for each ensemble variant of the other PFNs, its mean over tasks "
                   "of the AUC ratio to KNN (blue; dashed: EquiTabPFN's, smallest variant) and the speed-up of "
                   "EquiTabPFN's smallest variant over it (green: its mean time per fold over EquiTabPFN's, "
                   "on the (task, fold) cells both ran; grey: 1×, below which EquiTabPFN is the slower).")
    return [*lines, *_figure_item(figure_line, paths, out_dir),
            *_table_item(f"The bars of {suite}.", tables.ratio_speedup_display(bars), bars, out_dir,
                         f"{name}_auc_ratio_speedup")]


def _context_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    table = tables.context_table(cells)
    name = f"{_file_stem(suite)}_contexts"
    figure_line = (f"Mean accuracy over the tasks of {suite} against mean time per 1,000 test rows, for every "
                   "method and variant (the PFNs' context strategies as their variants: `n1` local contexts above "
                   "the cap, `n1-subsample` the stratified subsample): left, fit + predict time (a trained model "
                   "such as XGBoost spends its time in the fit, a PFN in its predict); right, predict time only.")
    table_line = (f"The points of the figure, with the PFNs' mean rows and classes per context and groups of test "
                  f"rows per cell on {suite}.")
    paths = figures.accuracy_vs_time(table, suite, out_dir / "figures" / f"{name}_accuracy_vs_time")
    return ["### Tables past the context: accuracy vs time", "", *_figure_item(figure_line, paths, out_dir),
            *_table_item(table_line, tables.context_display(table), table, out_dir, name)]


def _finetuning_item(table: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    name = f"{_file_stem(suite)}_finetuning"
    figure_line = (f"Fine-tuned against zero-shot accuracy per task on {suite} (each task's mean over the folds both "
                   "ran, same ensemble variant), one colour per architecture; above the diagonal, fine-tuning helped.")
    table_line = ("The points of the figure, with the validation gain the guard saw (the kept weights against the "
                  "base, on the held-out training rows), the folds whose fine-tuning kept a step, and its seconds.")
    paths = finetuning.finetuning_figure(table, suite, out_dir / "figures" / name)
    return ["### Fine-tuning on the table: zero-shot vs fine-tuned", "", *_figure_item(figure_line, paths, out_dir),
            *_table_item(table_line, finetuning.finetuning_display(table), table, out_dir, name)]


def suite_section(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    """The REPORT.md lines of one suite (``cells``: its ok rows), writing its tables and figures."""
    cells = tables.with_entries(cells)
    aggregate = tables.aggregate_table(cells)
    n_tasks, n_methods = cells["task_id"].nunique(), cells["method"].nunique()
    lines = [f"## Suite `{suite}`", "", f"{n_tasks} tasks, {n_methods} methods, {len(cells)} ok cells.", ""]
    lines += _aggregate_item(aggregate, suite, out_dir)
    knn = (cells["method"] == tables.KNN).any()
    if knn:
        lines += _boxplot_item(cells, aggregate, suite, out_dir)
    else:
        lines += [(f"{suite} has no KNN rows, so the improvements over KNN (median column, box plot, bubble plot) "
                   f"can't be computed: add knn to the run's `methods`."), ""]
    lines += _critical_difference_item(cells, suite, out_dir)
    lines += _runtime_item(cells, suite, out_dir)
    if knn and tables.has_ensembles(cells):
        lines += _ensemble_item(cells, suite, out_dir)
    if (tables.diagnostics(cells, ["context"])["context"] == "local").any():  # some cell had local contexts
        lines += _context_item(cells, suite, out_dir)
    tuned = finetuning.finetuning_table(cells)
    if not tuned.empty:
        lines += _finetuning_item(tuned, suite, out_dir)
    return lines


def _failures_section(rows: pd.DataFrame, out_dir: Path) -> list[str]:
    header = ["## Skipped and failed cells", ""]
    failures = tables.failures_table(rows)
    if failures.empty:
        return [*header, "Every cell is ok.", ""]
    description = "Skipped and failed rows per suite and method (left out of every statistic), with the most common reason."
    return [*header, *_table_item(description, tables.failures_display(failures),
                                  failures.set_index(["suite", "method"]), out_dir, "skipped_failed")]


def _machine(machine: object) -> str:
    if isinstance(machine, dict):
        return ", ".join(f"{key} {value}" for key, value in machine.items())
    return str(machine) if machine else "not recorded"


def _manifest_lines(results_dir: Path) -> list[str]:
    path = results_dir / "manifest.json"
    lines = [f"### `{results_dir}`", ""]
    if not path.is_file():
        return [*lines, "No manifest.json.", ""]
    try:
        invocations = json.loads(path.read_text()).get("invocations", [])
        if not isinstance(invocations, list) or not all(isinstance(run, dict) for run in invocations):
            raise InvalidInputError("`invocations` is not a list of records")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as error:
        return [*lines, f"manifest.json is unreadable ({markdown_escape(str(error))}).", ""]
    for number, run in enumerate(invocations, start=1):
        lines.append(
            f"- invocation {number}: `{run.get('command', 'command not recorded')}`; git {run.get('git_sha') or 'unknown'}; "
            f"started {run.get('started', 'not recorded')}, finished {run.get('finished') or 'not recorded (interrupted or running)'}; "
            f"machine: {markdown_escape(_machine(run.get('machine')))}"
        )
    if invocations:
        versions = invocations[0].get("versions") or {}
        lines.append("- package versions (first invocation): "
                     + (", ".join(f"{name} {version}" for name, version in versions.items()) or "not recorded"))
    return [*lines, ""]


def _summary_lines(rows: pd.DataFrame, results_dirs: list[Path], duplicates: int, origins: list[str]) -> list[str]:
    counts = ", ".join(f"{n} {status}" for status, n in rows["status"].value_counts().sort_index().items())
    sources = ", ".join(f"`{path}` ({origin})" for path, origin in zip(results_dirs, origins))
    lines = [(f"From {sources}: {len(rows)} cells ({counts}); only ok cells enter the statistics. The main tables, "
              "box plots and critical-difference diagrams use each PFN method's smallest ensemble variant.")]
    if duplicates:
        lines.append(f"{duplicates} duplicate cells (same suite, task, fold, method and variant in several "
                     "directories) were dropped, keeping an ok row, else the first directory's.")
    return [*lines, ""]


def _previous_outputs(out_dir: Path) -> set[str]:
    """The files (relative paths) an earlier report wrote in ``out_dir``: those its outputs file lists."""
    listed = out_dir / OUTPUTS_FILE
    if listed.is_file():
        try:
            names = set(json.loads(listed.read_text())["files"])
        except (ValueError, KeyError, TypeError) as error:
            raise InvalidInputError(f"{str(listed)!r} is damaged ({error}); move it aside, or choose another `out_dir`") from None
        return {name for name in names if isinstance(name, str) and _OUTPUT_NAME.fullmatch(name)}
    return set()


def _write_outputs(rows: pd.DataFrame, results_dirs: list[Path], duplicates: int, origins: list[str],
                   out_dir: Path) -> None:
    """REPORT.md, tables/ and figures/ of ``rows``, written under ``out_dir``."""
    lines = ["# equibench report", "", *_summary_lines(rows, results_dirs, duplicates, origins)]
    ok = rows[rows["status"] == "ok"]
    for suite, cells in ok.groupby("suite", sort=True):
        lines += suite_section(cells, suite, out_dir)
    lines += _failures_section(rows, out_dir)
    lines += ["## Run manifests", ""]
    for results_dir in results_dirs:
        lines += _manifest_lines(results_dir)
    (out_dir / "REPORT.md").write_text("\n".join(lines).rstrip("\n") + "\n")


def build_report(results_dirs: list[Path], out_dir: Path) -> Path:
    """Write the tables, figures and REPORT.md of ``results_dirs`` under ``out_dir``; return REPORT.md's path.

    The report is made in a temporary folder inside ``out_dir`` and moved into place only when
    complete, replacing the files of the previous report (and only those: a file of the same
    name that equibench did not write is refused, never overwritten). ``out_dir`` is locked
    while this runs."""
    results_dirs = [Path(path) for path in results_dirs]
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInputError(f"`out_dir` {str(out_dir)!r} is an existing file, not a folder; pass a folder path")
    rows, duplicates, origins = load_results(results_dirs)
    with locked_folder(out_dir):
        previous = _previous_outputs(out_dir)
        for stray in out_dir.glob(".report-*.tmp"):  # left by a killed report
            shutil.rmtree(stray, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=".report-", suffix=".tmp", dir=out_dir))
        try:
            _write_outputs(rows, results_dirs, duplicates, origins, staging)
            new = sorted(path.relative_to(staging).as_posix() for path in staging.rglob("*") if path.is_file())
            clashes = [name for name in new if name not in previous and (out_dir / name).exists()]
            if clashes:
                raise InvalidInputError(
                    f"{str(out_dir / clashes[0])!r} (and {len(clashes) - 1} more) exists and was not written by "
                    "a report; move it away or choose another `out_dir`"
                )
            _swap_in(staging, out_dir, new, previous)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir / "REPORT.md"


def _swap_in(staging: Path, out_dir: Path, new: list[str], previous: set[str]) -> None:
    """Move the new report into ``out_dir``: the old REPORT.md goes first and the new one comes
    last, so a REPORT.md never sits beside the figures and tables of another report."""
    listed = out_dir / OUTPUTS_FILE
    atomic_write_text(listed, json.dumps({"files": sorted(previous | set(new))}, indent=1) + "\n")
    (out_dir / "REPORT.md").unlink(missing_ok=True)
    for name in sorted(previous - set(new)):
        (out_dir / name).unlink(missing_ok=True)
    for name in sorted(new, key=lambda name: name == "REPORT.md"):
        (out_dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, out_dir / name)
    atomic_write_text(listed, json.dumps({"files": new}, indent=1) + "\n")
