"""``equibench report``: tables, figures and REPORT.md from one or more ``equibench evaluate``
results directories (stored results only; no model is run).

    OUT/REPORT.md                 every table inline and every figure embedded
    OUT/tables/<suite>_*.md|tex|csv
    OUT/figures/<suite>_*.png|pdf

The main tables, box plots and critical-difference diagrams use each method's smallest
ensemble variant (n1 when present); the runtime table and the bubble plot use every variant.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from . import report_figures as figures
from . import report_tables as tables

REQUIRED_COLUMNS = ["suite", "task_id", "fold", "method", "variant", "status", "reason", "accuracy", "auc", "f1",
                    "time_fit_s", "time_predict_s"]
CELL_KEY = ["suite", "task_id", "fold", "method", "variant"]
_STATUS_ORDER = {"ok": 0, "skipped": 1, "failed": 2}


def _evaluate_hint(results_dir: Path, suite: str = "SUITE") -> str:
    return f"`equibench evaluate --suite {suite} --out {results_dir}`"


def read_results(results_dir: Path) -> pd.DataFrame:
    """The rows of one results directory; a ValueError says what to run when it has none."""
    path = results_dir / "results.csv"
    if not results_dir.is_dir():
        raise ValueError(f"results directory {str(results_dir)!r} does not exist (or is not a directory): run {_evaluate_hint(results_dir)} first")
    if not path.is_file():
        raise ValueError(f"{str(results_dir)!r} has no results.csv: run (or rerun, to resume) {_evaluate_hint(results_dir)}")
    rows = pd.read_csv(path, dtype={"task_id": str, "suite": str, "method": str, "variant": str, "reason": str})
    missing = [column for column in REQUIRED_COLUMNS if column not in rows.columns]
    if missing:
        raise ValueError(f"{str(path)!r} lacks the columns {', '.join(missing)}: is it a results.csv of `equibench evaluate`?")
    if not (rows["status"] == "ok").any():
        counts = ", ".join(f"{n} {status}" for status, n in rows["status"].value_counts().sort_index().items()) or "no rows"
        suite = rows["suite"].iloc[0] if len(rows) else "SUITE"
        raise ValueError(f"{str(path)!r} has no ok rows ({counts}): run {_evaluate_hint(results_dir, suite)} with "
                         "methods that can run here (see `equibench methods`) and rerun it until cells succeed")
    return rows


def load_results(results_dirs: list[Path]) -> tuple[pd.DataFrame, int]:
    """All rows of the directories, one per cell (an ok row wins over a skipped or failed one,
    then the earlier directory), sorted; and the number of duplicate rows dropped."""
    if not results_dirs:
        raise ValueError(f"no results directory given: run {_evaluate_hint(Path('DIR'))}, then pass --results DIR")
    frames = [read_results(Path(path)).assign(source=index) for index, path in enumerate(results_dirs)]
    rows = pd.concat(frames, ignore_index=True)
    rows["status_order"] = rows["status"].map(_STATUS_ORDER).fillna(len(_STATUS_ORDER))
    rows = rows.sort_values([*CELL_KEY, "status_order", "source"], kind="stable")
    unique = rows.drop_duplicates(CELL_KEY).drop(columns=["status_order", "source"])
    unique["time_s"] = unique["time_fit_s"] + unique["time_predict_s"]
    return unique.reset_index(drop=True), len(rows) - len(unique)


def _file_stem(suite: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", suite)


def _link(path: Path, out_dir: Path) -> str:
    return path.relative_to(out_dir).as_posix()


def _table_item(description: str, display: pd.DataFrame, raw: pd.DataFrame, out_dir: Path, name: str) -> list[str]:
    stem = out_dir / "tables" / name
    markdown = tables.write_table(display, raw, stem)
    return [description, "", markdown, f"Files: [LaTeX](tables/{name}.tex), [CSV](tables/{name}.csv)", ""]


def _figure_item(description: str, paths: list[Path], out_dir: Path) -> list[str]:
    png, pdf = (_link(path, out_dir) for path in paths)
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
    auc = tables.paired_auc(cells)
    header = ["### Critical-difference diagram (AUC)", ""]
    if auc.shape[1] < 2:
        sentence = f"No critical-difference diagram for {suite}: it needs at least 2 methods with AUCs, found {auc.shape[1]}."
        return [*header, sentence, ""]
    if len(auc) < tables.MIN_CD_ROWS:
        counts = cells[cells["main"]].groupby("entry")["auc"].count()
        fewest = min(counts.index, key=lambda entry: (counts[entry], entry))
        return [*header, tables.markdown_escape(
            f"No critical-difference diagram for {suite}: only {len(auc)} (task, fold) cells have an AUC for all "
            f"{auc.shape[1]} methods (fewest: {fewest}, {counts[fewest]}); autorank needs at least "
            f"{tables.MIN_CD_ROWS}."), ""]
    paths, sentence = figures.critical_difference_diagram(
        auc, suite, out_dir / "figures" / f"{_file_stem(suite)}_critical_difference_auc")
    sentence = tables.markdown_escape(sentence)
    return [*header, *(_figure_item(sentence, paths, out_dir) if paths else [sentence, ""])]


def _runtime_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    header = ["### Runtime: EquiTabPFN vs TabPFN\\*", ""]
    runtime = tables.runtime_table(cells)
    if runtime.empty:
        sentence = (f"No runtime comparison for {suite}: it needs ok cells of both equitabpfn and tabpfn-star "
                    "with the same variant on the same (task, fold).")
        return [*header, sentence, ""]
    description = (f"Mean fit + predict time per fold on {suite} over the (task, fold) cells both ran, per ensemble "
                   "variant, and the speed-up TabPFN\\* / EquiTabPFN (TabPFN\\* uses ECOC beyond 10 classes).")
    return [*header, *_table_item(description, tables.runtime_display(runtime), runtime, out_dir,
                                  f"{_file_stem(suite)}_runtime")]


def _ensemble_item(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    ensembles = tables.ensemble_table(cells)
    name = f"{_file_stem(suite)}_ensembles"
    paths = figures.ensemble_bubble_plot(ensembles, suite, out_dir / "figures" / f"{name}_auc_vs_time")
    figure_line = (f"Mean time per fold vs mean AUC improvement over KNN on {suite} for every ensemble variant "
                   "(bubble area ∝ members) and every other method, with the Pareto front (lower time, higher AUC).")
    table_line = f"The points of the bubble plot of {suite}."
    return ["### Ensemble size: AUC vs runtime", "", *_figure_item(figure_line, paths, out_dir),
            *_table_item(table_line, tables.ensemble_display(ensembles), ensembles, out_dir, name)]


def suite_section(cells: pd.DataFrame, suite: str, out_dir: Path) -> list[str]:
    """The REPORT.md lines of one suite (``cells``: its ok rows), writing its tables and figures."""
    cells = tables.with_entries(cells)
    aggregate = tables.aggregate_table(cells)
    n_tasks, n_methods = cells["task_id"].nunique(), cells["method"].nunique()
    lines = [f"## Suite `{suite}`", "", f"{n_tasks} tasks, {n_methods} methods, {len(cells)} ok cells.", ""]
    lines += _aggregate_item(aggregate, suite, out_dir)
    knn = tables.has_knn(cells)
    if knn:
        lines += _boxplot_item(cells, aggregate, suite, out_dir)
    else:
        lines += [(f"{suite} has no KNN rows, so the improvements over KNN (median column, box plot, bubble plot) "
                   f"can't be computed: add knn to the methods of {_evaluate_hint(Path('DIR'), suite)}."), ""]
    lines += _critical_difference_item(cells, suite, out_dir)
    lines += _runtime_item(cells, suite, out_dir)
    if knn and tables.has_ensembles(cells):
        lines += _ensemble_item(cells, suite, out_dir)
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
    invocations = json.loads(path.read_text()).get("invocations", [])
    for number, run in enumerate(invocations, start=1):
        lines.append(
            f"- invocation {number}: `{run.get('command', 'command not recorded')}`; git {run.get('git_sha') or 'unknown'}; "
            f"started {run.get('started', 'not recorded')}, finished {run.get('finished') or 'not recorded (interrupted or running)'}; "
            f"machine: {tables.markdown_escape(_machine(run.get('machine')))}"
        )
    if invocations:
        versions = invocations[0].get("versions") or {}
        lines.append("- package versions (first invocation): "
                     + (", ".join(f"{name} {version}" for name, version in versions.items()) or "not recorded"))
    return [*lines, ""]


def _manifest_section(results_dirs: list[Path]) -> list[str]:
    lines = ["## Run manifests", ""]
    for results_dir in results_dirs:
        lines += _manifest_lines(results_dir)
    return lines


def _summary_lines(rows: pd.DataFrame, results_dirs: list[Path], duplicates: int) -> list[str]:
    counts = ", ".join(f"{n} {status}" for status, n in rows["status"].value_counts().sort_index().items())
    sources = ", ".join(f"`{path}`" for path in results_dirs)
    lines = [(f"From {sources}: {len(rows)} cells ({counts}); only ok cells enter the statistics. The main tables, "
              "box plots and critical-difference diagrams use each PFN method's smallest ensemble variant.")]
    if duplicates:
        lines.append(f"{duplicates} duplicate cells (same suite, task, fold, method and variant in several "
                     "directories) were dropped, keeping an ok row, else the first directory's.")
    return [*lines, ""]


def _clear_outputs(out_dir: Path) -> None:
    """Remove the files of an earlier report so none outlives its input."""
    for pattern in ("figures/*.png", "figures/*.pdf", "tables/*.md", "tables/*.tex", "tables/*.csv"):
        for path in out_dir.glob(pattern):
            path.unlink()


def build_report(results_dirs: list[Path], out_dir: Path) -> Path:
    """Write the tables, figures and REPORT.md of ``results_dirs`` under ``out_dir``; return REPORT.md's path."""
    results_dirs = [Path(path) for path in results_dirs]
    out_dir = Path(out_dir)
    rows, duplicates = load_results(results_dirs)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_outputs(out_dir)
    lines = ["# equibench report", "", *_summary_lines(rows, results_dirs, duplicates)]
    ok = rows[rows["status"] == "ok"]
    for suite, cells in ok.groupby("suite", sort=True):
        lines += suite_section(cells, suite, out_dir)
    lines += _failures_section(rows, out_dir)
    lines += _manifest_section(results_dirs)
    report = out_dir / "REPORT.md"
    report.write_text("\n".join(lines).rstrip("\n") + "\n")
    return report
