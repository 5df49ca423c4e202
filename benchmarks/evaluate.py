"""Evaluation cost and the >10-class trade-off, measured in one run.

1. Wall time of the demo suite per method (fold 0 of every demo task, one process).
2. On the >10-class tasks (the demo's synthetic-15 and synthetic-30, plus the cached gt10
   tasks with --openml-cache): EquiTabPFN at several ensemble sizes against TabPFN*+ECOC at
   several ECOC redundancies (the TabPFN* variant nR = redundancy R beyond 10 classes), run
   here or read from an existing evaluate directory (--results results/gt10):
   mean accuracy and fit+predict time per fold, as ratios to EquiTabPFN n1. Target:
   EquiTabPFN more accurate than TabPFN*+ECOC at every size tried, and no slower than the
   TabPFN*+ECOC configuration closest to it in accuracy.

    python benchmarks/evaluate.py [--openml-cache DIR] [--folds 0-2] [--sizes 1,2,4] [--record]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from recording import add_record_flag, publish, section

from equibench.baselines.registry import METHODS
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.tables import markdown_table
from equibench.tasks import GT10


def _folds(text: str) -> tuple[int, ...]:
    low, _, high = text.partition("-")
    return tuple(range(int(low), int(high or low) + 1))


def demo_wall_times(work: Path, methods: list[str]) -> pd.DataFrame:
    """Seconds to run each method on fold 0 of every demo task (preprocessing included)."""
    rows = []
    for name in methods:
        started = time.perf_counter()
        summary = evaluate(EvaluateConfig("demo", methods=(name,), folds=(0,)), work / name, progress=False)
        rows.append({"method": name, "cells": len(summary.cells), "ok": summary.counts["ok"],
                     "wall_s": time.perf_counter() - started})
    return pd.DataFrame(rows)


def run_many_class_tasks(work: Path, cache: str | None, folds: tuple[int, ...], sizes: tuple[int, ...]) -> Path:
    """Evaluate both PFNs at every size on the >10-class tasks; returns the results directory."""
    tasks = ["demo-synthetic-15", "demo-synthetic-30"] + ([str(t) for t in GT10] if cache else [])
    suite = work / "many-classes.toml"
    suite.write_text('name = "gt10-bench"\ntasks = [' + ", ".join(f'"{t}"' for t in tasks) + "]\n")
    config = EvaluateConfig(str(suite), methods=("equitabpfn", "tabpfn-star"), folds=folds, ensembles=sizes,
                            openml_cache=cache)
    evaluate(config, work / "many-classes", progress=False)
    return work / "many-classes"


def many_class_tradeoff(results: Path, sizes: tuple[int, ...]) -> pd.DataFrame:
    """Mean accuracy and time per fold of each PFN variant on the tasks with >10 classes."""
    table = pd.read_csv(results / "results.csv", dtype={"task_id": str})
    variants = [f"n{size}" for size in sizes]
    table = table[(table.status == "ok") & (table.n_classes > 10) & table.method.isin(["equitabpfn", "tabpfn-star"])
                  & table.variant.isin(variants)]
    table["time_s"] = table.time_fit_s + table.time_predict_s
    summary = table.groupby(["method", "variant"]).agg(
        tasks=("task_id", "nunique"), accuracy=("accuracy", "mean"), auc=("auc", "mean"), time_s=("time_s", "mean"),
    ).reset_index()
    reference = summary[(summary.method == "equitabpfn") & (summary.variant == f"n{min(sizes)}")].iloc[0]
    summary["accuracy_minus_equi"] = summary.accuracy - reference.accuracy
    summary["time_ratio_to_equi"] = summary.time_s / reference.time_s
    return summary.sort_values(["method", "time_s"])


def verdict(summary: pd.DataFrame) -> list[str]:
    equi = summary[summary.method == "equitabpfn"]
    star = summary[summary.method == "tabpfn-star"]
    lines = []
    for _, row in equi.iterrows():
        beaten = (star.accuracy < row.accuracy).all()
        closest = star.iloc[(star.accuracy - row.accuracy).abs().argmin()]
        lines.append(
            f"EquiTabPFN {row.variant}: more accurate than every TabPFN*+ECOC size: {'yes' if beaten else 'NO'}; "
            f"closest TabPFN*+ECOC in accuracy is {closest.variant} ({closest.accuracy:.3f} vs {row.accuracy:.3f}), "
            f"time ratio TabPFN*/Equi {closest.time_s / row.time_s:.2f} "
            f"({'Equi no slower' if row.time_s <= closest.time_s else 'Equi SLOWER'})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openml-cache", help="also run the cached gt10 tasks")
    parser.add_argument("--folds", default="0-2", help="folds of the >10-class comparison, e.g. 0-2")
    parser.add_argument("--sizes", default="1,2,4", help="ensemble sizes / ECOC redundancies")
    parser.add_argument("--methods", default=",".join(METHODS), help="methods timed on the demo suite")
    parser.add_argument("--results", type=Path,
                        help="summarise the >10-class trade-off from this evaluate directory instead of running it")
    add_record_flag(parser)
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        walls = demo_wall_times(work / "demo", args.methods.split(","))
        results = args.results or run_many_class_tasks(work, args.openml_cache, _folds(args.folds), sizes)
        tradeoff = many_class_tradeoff(results, sizes)
    lines = verdict(tradeoff)
    body = (
        (f"The trade-off is read from the evaluate run in `{args.results}`.\n\n" if args.results else "")
        + "Demo suite, fold 0 of the 6 tasks, one process (wall time includes preprocessing):\n\n"
        + markdown_table(walls.round(1).astype(str))
        + "\n\n>10-class tasks, mean over tasks and folds (time = fit + predict per fold; "
        "TabPFN* variant nR = ECOC redundancy R, EquiTabPFN nM = M ensemble members):\n\n"
        + markdown_table(tradeoff.round(3).astype(str))
        + "\n\n" + "\n".join(f"- {line}" for line in lines)
    )
    publish(section("Evaluation", body), args.record)


if __name__ == "__main__":
    main()
