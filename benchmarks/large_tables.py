"""Tables past the context cap: the subsample context against local contexts, with KNN and
XGBoost beside, on one fold of the ``large`` suite, one thread per method (as every cell of
``equibench evaluate`` runs).

1. Per task: accuracy of KNN, XGBoost and EquiTabPFN (one member) with each context strategy,
   the predict seconds per 1,000 test rows of both strategies, and how the local contexts
   served the test rows (groups, mean rows and classes per context, how often a row's true
   class was absent from its context). The summary gives the median accuracy relative to KNN
   and the total predict time of each strategy.
2. With ``--ablation``: the neighbours per training row, the context cap and the cluster size,
   each varied around the defaults on a few tasks (a seeded random sample of their test rows).
3. With ``--memory``: a synthetic 200,000-row table (20 features, 10 classes) fitted and
   predicted at 5,000, 10,000 and 20,000 test rows, each in a fresh process: fit and predict
   seconds and the process's peak resident memory.
4. With ``--trade [--before REV]``: local contexts as a trade of time against accuracy, per task
   in a fresh process (EquiTabPFN, one member, at most 2,000 test rows): accuracy, one fit and
   one predict in each fit mode, a repeated predict from the cache, and how far a row's
   probabilities move when it is predicted alone rather than in the batch. With ``--before``,
   the same measured on the code of git revision REV in the same run (its tree extracted
   to a temporary folder and imported in place of this checkout's), for before/after tables.
   The predict's model FLOPs per second on letter are set against a one-thread 512x512
   float32 matrix product's.

The fold's data is prepared as ``evaluate`` prepares it (TabZilla preprocessing fitted on
the train part) and every method is the registry's, in the cell environment of ``evaluate``.

    python benchmarks/large_tables.py [--openml-cache DIR] [--tasks 6,7592] [--ablation] [--memory]
        [--trade [--before REV]] [--skip-main] [--record]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from isolated import ROOT, cell, peak_rss_mb, run_isolated
from recording import add_record_flag, publish, section

from equibench import EquiTabPFNClassifier
from equibench.baselines.registry import method_spec
from equibench.evaluate.cells import _prepared_fold, reproducible_cell
from equibench.tables import markdown_table
from equibench.tasks import LARGE
from equibench.tasks.openml import load_cached_tasks

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "shared" / "data" / "openml-large"
STRATEGIES = ("subsample", "local")


def run_method(name: str, data: dict, **changes) -> dict:
    """Accuracy, predict seconds and (PFNs) the context summary of one registry method."""
    spec = method_spec(name)
    settings = spec.implementation().prepare(spec.settings())
    method = spec.implementation()(data["n_classes"], 0, settings, **changes)
    with reproducible_cell(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method.fit(data["X_train"], data["y_train"], data["X_val"], data["y_val"])
        started = time.perf_counter()
        proba = method.predict_proba(data["X_test"])
        seconds = time.perf_counter() - started
        summary = {}
        if hasattr(method, "model_") and hasattr(method.model_, "context_summary"):
            summary = method.model_.context_summary(data["X_test"], np.searchsorted(method.seen_classes_, data["y_test"]))
    return {"accuracy": float(np.mean(proba.argmax(axis=1) == data["y_test"])), "seconds": seconds, **summary}


def main_table(tasks: dict, fold: int) -> tuple[str, list[dict]]:
    rows = []
    for task_id, task in tasks.items():
        data = _prepared_fold(task, fold, 0)  # as `evaluate` prepares the fold (seed 0)
        n_test = len(data["y_test"])
        result = {"task": f"{task_id} {task.name}", "train rows": len(data["y_train"]), "classes": data["n_classes"],
                  "majority": np.bincount(data["y_test"]).max() / n_test}
        result["KNN"] = run_method("knn", data)["accuracy"]
        result["XGBoost"] = run_method("xgboost", data)["accuracy"]
        for strategy in STRATEGIES:
            outcome = run_method("equitabpfn", data, contexts=(strategy,))
            result[strategy] = outcome["accuracy"]
            result[f"{strategy} s/1k"] = 1000 * outcome["seconds"] / n_test
            if strategy == "local":
                result.update({"groups": outcome["groups"], "ctx rows": outcome["rows"],
                               "ctx classes": outcome["classes"], "true class absent": outcome["true_class_absent"]})
        rows.append(result)
        print(f"{result['task']}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in result.items() if k != "task"), flush=True)
    return _format_main(rows), rows


def _format_main(rows: list[dict]) -> str:
    table = [{"task": r["task"], "train rows": r["train rows"], "classes": r["classes"],
              "majority": f"{100 * r['majority']:.1f}", "KNN": f"{100 * r['KNN']:.1f}",
              "XGBoost": f"{100 * r['XGBoost']:.1f}", "subsample": f"{100 * r['subsample']:.1f}",
              "local": f"{100 * r['local']:.1f}", "subsample s/1k rows": f"{r['subsample s/1k']:.1f}",
              "local s/1k rows": f"{r['local s/1k']:.1f}", "groups": r["groups"], "rows/context": f"{r['ctx rows']:.0f}",
              "classes/context": f"{r['ctx classes']:.1f}", "true class absent": f"{100 * r['true class absent']:.2f}%"}
             for r in rows]

    def relative(column):
        return statistics.median(100 * (r[column] - r["KNN"]) / r["KNN"] for r in rows)

    subsample_total = sum(r["subsample s/1k"] for r in rows)
    local_total = sum(r["local s/1k"] for r in rows)
    summary = [{"": "median accuracy relative to KNN (%)", "XGBoost": f"{relative('XGBoost'):+.2f}",
                "EquiTabPFN subsample": f"{relative('subsample'):+.2f}", "EquiTabPFN local": f"{relative('local'):+.2f}"},
               {"": "tasks below KNN - 1 point", "XGBoost": sum(r["XGBoost"] < r["KNN"] - 0.01 for r in rows),
                "EquiTabPFN subsample": sum(r["subsample"] < r["KNN"] - 0.01 for r in rows),
                "EquiTabPFN local": sum(r["local"] < r["KNN"] - 0.01 for r in rows)},
               {"": "predict seconds per 1,000 test rows, summed over tasks", "XGBoost": "",
                "EquiTabPFN subsample": f"{subsample_total:.1f}", "EquiTabPFN local": f"{local_total:.1f}"}]
    return ("Accuracy (%) on the test fold; EquiTabPFN with one member, the packaged checkpoint.\n\n"
            + markdown_table(pd.DataFrame(table)) + "\n" + markdown_table(pd.DataFrame(summary)))


def ablation_table(tasks: dict, fold: int, task_ids: list[int], test_rows: int) -> str:
    """Each local setting varied around the defaults (EquiTabPFNClassifier, one member)."""
    defaults = {"local_neighbors": 20, "local_max_rows": 1000, "local_cluster_size": 125}
    variants = [{}] + [{"local_neighbors": k} for k in (10, 40)] + [{"local_max_rows": c} for c in (500,)] \
        + [{"local_cluster_size": g} for g in (60, 250)]
    rows = []
    for task_id in task_ids:
        task = tasks[task_id]
        data = _prepared_fold(task, fold, 0)  # as `evaluate` prepares the fold (seed 0)
        chosen = np.random.RandomState(0).permutation(len(data["y_test"]))[:test_rows]
        X_test, y_test = data["X_test"][chosen], data["y_test"][chosen]
        for change in variants:
            params = {**defaults, **change}
            with reproducible_cell(1):
                model = EquiTabPFNClassifier(n_estimators=1, device="cpu", context="local", **params)
                model.fit(data["X_train"], data["y_train"])
                started = time.perf_counter()
                predicted = model.predict(X_test)
                seconds = time.perf_counter() - started
                summary = model.context_summary(X_test, y_test)
            rows.append({"task": f"{task_id} {task.name}", "neighbours": params["local_neighbors"],
                         "cap": params["local_max_rows"], "cluster size": params["local_cluster_size"],
                         "accuracy": f"{100 * np.mean(predicted == y_test):.1f}",
                         "s/1k rows": f"{1000 * seconds / len(y_test):.1f}", "rows/context": f"{summary['rows']:.0f}",
                         "classes/context": f"{summary['classes']:.1f}",
                         "true class absent": f"{100 * summary['true_class_absent']:.2f}%"})
            print(rows[-1], flush=True)
    return (f"Ablation (EquiTabPFN, one member, {test_rows} random test rows per task; defaults: 20 neighbours, "
            "cap 1000, clusters of 125 training rows):\n\n" + markdown_table(pd.DataFrame(rows)))


MEMORY_TRAIN_ROWS = 200_000
MEMORY_TEST_ROWS = (5_000, 10_000, 20_000)


def memory_one(spec: dict) -> dict:
    """In a fresh process: fit on the synthetic table, predict ``spec["test_rows"]`` rows."""
    from sklearn.datasets import make_classification

    torch.set_num_threads(1)
    n_test = spec["test_rows"]
    X, y = make_classification(MEMORY_TRAIN_ROWS + n_test, n_features=20, n_informative=12, n_classes=10,
                               n_clusters_per_class=2, random_state=0)
    model = EquiTabPFNClassifier(n_estimators=1, device="cpu")
    started = time.perf_counter()
    model.fit(X[:MEMORY_TRAIN_ROWS], y[:MEMORY_TRAIN_ROWS])
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    accuracy = float(np.mean(model.predict(X[MEMORY_TRAIN_ROWS:]) == y[MEMORY_TRAIN_ROWS:]))
    predict_s = time.perf_counter() - started
    return {"fit_s": fit_s, "predict_s": predict_s, "peak_mb": peak_rss_mb(), "accuracy": accuracy,
            "context": model.context_}


def memory_table() -> str:
    rows = []
    for n_test in MEMORY_TEST_ROWS:
        result = run_isolated(__file__, {"test_rows": n_test})
        rows.append({"test rows": n_test, "context": result.get("context", ""), "fit s": cell(result, "fit_s", ".1f"),
                     "predict s": cell(result, "predict_s", ".1f"),
                     "predict s / 1,000 rows": cell({k: 1000 * v / n_test for k, v in result.items() if k == "predict_s"},
                                                    "predict_s", ".2f"),
                     "peak RSS (MB)": cell(result, "peak_mb", ".0f"), "accuracy": cell(result, "accuracy", ".3f")})
        print(rows[-1], flush=True)
    return (f"Memory and time: EquiTabPFN (one member) fitted on a synthetic table of {MEMORY_TRAIN_ROWS:,} rows "
            "(20 features, 10 classes; scikit-learn's make_classification), each predict in a fresh process "
            "(peak RSS: the process's high-water mark, Python and torch included):\n\n"
            + markdown_table(pd.DataFrame(rows)))


TRADE_TEST_ROWS = 2000
#: Rows predicted one at a time against the same rows predicted together.
TRADE_SINGLE_ROWS = 50


def trade_one(spec: dict) -> dict:
    """In a fresh process, with whichever equibench it imports: one task's local contexts in
    each fit mode (EquiTabPFN, one member, one thread; only the public API, so that an earlier
    revision runs it too)."""
    torch.set_num_threads(1)
    task = load_cached_tasks(Path(spec["cache"]))[spec["task"]]
    data = _prepared_fold(task, spec["fold"], 0)
    chosen = np.random.RandomState(0).permutation(len(data["y_test"]))[:TRADE_TEST_ROWS]
    X_test, y_test = data["X_test"][chosen], data["y_test"][chosen]
    result = {"test_rows": len(y_test)}
    for mode in ("low_memory", "fit_with_cache"):
        with reproducible_cell(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = EquiTabPFNClassifier(n_estimators=1, device="cpu", context="local", fit_mode=mode,
                                         cache_memory_limit_gb=None)
            started = time.perf_counter()
            model.fit(data["X_train"], data["y_train"])
            fitted = time.perf_counter()
            proba = model.predict_proba(X_test)
            predicted = time.perf_counter()
            outcome = {"fit_s": fitted - started, "predict_s": predicted - fitted,
                       "accuracy": float(np.mean(proba.argmax(axis=1) == y_test))}
            if mode == "fit_with_cache":
                started = time.perf_counter()
                again = model.predict_proba(X_test)
                outcome["repeat_s"] = time.perf_counter() - started
                outcome["repeat_equal"] = bool(np.array_equal(again, proba))
            alone = np.vstack([model.predict_proba(X_test[i : i + 1]) for i in range(TRADE_SINGLE_ROWS)])
            outcome["alone_max_diff"] = float(np.abs(alone - proba[:TRADE_SINGLE_ROWS]).max())
            outcome["alone_changed"] = float(np.mean(alone.argmax(axis=1) != proba[:TRADE_SINGLE_ROWS].argmax(axis=1)))
            if mode == "low_memory" and hasattr(model, "strategy_"):
                outcome["flops"] = local_predict_flops(model, X_test)
        result[mode] = outcome
    return result


def local_predict_flops(model, X_test) -> float:
    """The model FLOPs of a low_memory local predict of X_test: per context reached and member,
    the forward pass over its rows and each batch of the test rows routed to it."""
    strategy = model.strategy_
    total = 0.0
    for index, rows in strategy.route(model._encoded(X_test)):
        n_rows, n_local = len(strategy.contexts[index]), len(np.unique(strategy.labels[strategy.contexts[index]]))
        if n_local < 2:
            continue
        for start in range(0, len(rows), model.batch_size):
            m = len(rows[start : start + model.batch_size])
            total += strategy.n_members * model.model_.forward_flops(n_rows + m, n_rows, n_local)
    return total


def matmul_flops_per_s(size: int = 512, seconds: float = 2.0) -> float:
    """One thread's rate on ``size`` x ``size`` float32 matrix products (2 size^3 FLOPs each)."""
    torch.set_num_threads(1)
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(10):
        a @ b
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - started)


def revision_root(revision: str, folder: Path) -> Path:
    """Revision ``revision`` of this repository as an importable ``equibench`` in ``folder``
    (model/ and baselines/ placed as equibench.model and equibench.baselines, as installed)."""
    tree = folder / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    package = folder / "root" / "equibench"
    (tree / "equibench").rename(package.parent.mkdir() or package)
    (tree / "model").rename(package / "model")
    (tree / "baselines").rename(package / "baselines")
    return package.parent


def trade_table(task_ids: list[int], cache: Path, fold: int, before: str | None) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        trees = {"after": None}
        if before:
            trees = {"before": revision_root(before, Path(scratch)), **trees}
        results = {}
        for task_id in task_ids:
            for name, root in trees.items():
                env = None if root is None else {**os.environ, "PYTHONPATH": str(root)}
                spec = {"trade": True, "task": task_id, "cache": str(cache), "fold": fold}
                results[task_id, name] = run_isolated(__file__, spec, env=env)
                print(task_id, name, results[task_id, name], flush=True)
    rate = matmul_flops_per_s()
    return _format_trade(results, task_ids, list(trees), fold, before, rate)


def _format_trade(results: dict, task_ids: list[int], trees: list[str], fold: int, before: str | None,
                  rate: float) -> str:
    rows, totals = [], {}
    for task_id in task_ids:
        row = {"task": task_id}
        for name in trees:
            result = results[task_id, name]
            if "error" in result:
                row[f"{name}: error"] = result["error"]
                continue
            row["test rows"] = result["test_rows"]
            plain, cached = result["low_memory"], result["fit_with_cache"]
            one_shot, cached_shot = plain["fit_s"] + plain["predict_s"], cached["fit_s"] + cached["predict_s"]
            for key, value in (("one-shot", one_shot), ("cached one-shot", cached_shot), ("repeat", cached["repeat_s"])):
                totals[name, key] = totals.get((name, key), 0.0) + value
            totals.setdefault((name, "accuracy"), []).append(plain["accuracy"])
            row.update({f"{name} accuracy": f"{100 * plain['accuracy']:.1f}",
                        f"{name} fit+predict s": f"{one_shot:.1f}",
                        f"{name} cache fit+predict s": f"{cached_shot:.1f}",
                        f"{name} repeated predict s": f"{cached['repeat_s']:.2f}",
                        f"{name} row alone vs batch (max abs)": f"{max(plain['alone_max_diff'], cached['alone_max_diff']):.1e}",
                        f"{name} rows alone predicted otherwise": f"{100 * plain['alone_changed']:.0f}%"})
            if "flops" in plain and task_id == 6:  # letter
                totals["letter rate"] = plain["flops"] / plain["predict_s"]
        rows.append(row)
    summary = []
    for name in trees:
        if (name, "one-shot") not in totals:
            continue
        summary.append({"": name, "median accuracy (%)": f"{100 * statistics.median(totals[name, 'accuracy']):.2f}",
                        "fit+predict s, summed": f"{totals[name, 'one-shot']:.1f}",
                        "cache fit+predict s, summed": f"{totals[name, 'cached one-shot']:.1f}",
                        "repeated predict s, summed": f"{totals[name, 'repeat']:.1f}",
                        "cache one-shot / repeat": f"{totals[name, 'cached one-shot'] / totals[name, 'repeat']:.1f}x"})
    text = (f"EquiTabPFN, one member, local contexts, fold {fold}; at most {TRADE_TEST_ROWS} seeded "
            f"test rows per task; each task in a fresh process; {TRADE_SINGLE_ROWS} rows also predicted one at a time"
            + (f"; before = revision {before}" if before else "") + ".\n\n"
            + markdown_table(pd.DataFrame(rows))
            + "\n" + markdown_table(pd.DataFrame(summary)))
    if "letter rate" in totals:
        text += (f"\nLocal predict on letter: {totals['letter rate'] / 1e9:.2f} model GFLOP/s against "
                 f"{rate / 1e9:.2f} GFLOP/s of a one-thread 512x512 float32 matrix product: "
                 f"{totals['letter rate'] / rate:.2f} of it.\n")
    return text


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        spec = json.loads(sys.argv[2])
        print(json.dumps(trade_one(spec) if spec.get("trade") else memory_one(spec)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openml-cache", type=Path, default=DEFAULT_CACHE, help="OpenML cache holding the large tasks")
    parser.add_argument("--tasks", default=",".join(map(str, LARGE)), help="task ids (default: the large suite)")
    parser.add_argument("--fold", type=int, default=0)
    parser.add_argument("--ablation", action="store_true", help="also the ablation of the local settings")
    parser.add_argument("--ablation-tasks", default="6,32,3954,7592")
    parser.add_argument("--ablation-test-rows", type=int, default=1000)
    parser.add_argument("--memory", action="store_true", help="also the 200,000-row memory and time measurement")
    parser.add_argument("--trade", action="store_true", help="also local contexts' time against accuracy")
    parser.add_argument("--before", help="with --trade: a git revision to measure beside this checkout")
    parser.add_argument("--skip-main", action="store_true", help="leave out the per-task table")
    add_record_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as every cell (reproducible_cell(1)); the machine line reports it
    wanted = [int(t) for t in args.tasks.split(",")]
    tasks = {task_id: task for task_id, task in load_cached_tasks(args.openml_cache).items() if task_id in wanted}
    parts = []
    if not args.skip_main:
        parts.append(main_table(tasks, args.fold)[0])
    if args.ablation:
        ablation_ids = [int(t) for t in args.ablation_tasks.split(",")]
        every = load_cached_tasks(args.openml_cache) if set(ablation_ids) - set(tasks) else tasks
        parts.append(ablation_table(every, args.fold, ablation_ids, args.ablation_test_rows))
    if args.memory:
        parts.append(memory_table())
    if args.trade:
        parts.append(trade_table(wanted, args.openml_cache, args.fold, args.before))
    title = f"Large tables: subsample and local contexts, fold {args.fold} of `large`"
    if args.trade and args.skip_main and not (args.ablation or args.memory):
        title = f"Local contexts defined by the training rows: time against accuracy, fold {args.fold} of `large`"
    publish(section(title, "\n\n".join(parts)), args.record)


if __name__ == "__main__":
    main()
