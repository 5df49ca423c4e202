"""Fine-tuning on the table against zero-shot, for both architectures, one thread per task.

For each task (fold 0 of the ``large`` suite and of the le10 and gt10 tasks in the shared OpenML
cache; the fold's data prepared as ``evaluate`` prepares it) and architecture, in a fresh process
on one thread: the zero-shot classifier (one member, the packaged checkpoint; TabPFN* past its
class limit as ``evaluate`` runs it, in ECOC) and the fine-tuned one with its default parameters,
fitted on the fold's training rows and scored on at most ``--test-rows`` test rows (a seeded
sample). Per task: test accuracy of both and the gain, the validation accuracy and log-loss gains
the guard saw, the steps run and kept, and the fine-tuning minutes. The summary gives the median
gains with their quartiles, the worst test change and the longest fine-tuning per suite and
architecture.

Each result is appended to ``--out`` (JSON lines) as it finishes, so a killed run resumes where
it stopped.

    python benchmarks/finetune.py [--suites large,le10,gt10] [--archs equitabpfn,tabpfn-star]
        [--jobs 2] [--test-rows 2000] [--out FILE] [--table-only] [--record]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd
from recording import add_record_flag, publish, section

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHES = {"large": SHARED / "openml-large", "le10": SHARED / "openml-cache", "gt10": SHARED / "openml-cache"}
CLASSES = {"equitabpfn": ("EquiTabPFNClassifier", "FinetunedEquiTabPFNClassifier"),
           "tabpfn-star": ("TabPFNStarClassifier", "FinetunedTabPFNStarClassifier")}


def one_task(suite: str, task_id: int, arch: str, cache: str, test_rows: int) -> dict:
    """Zero-shot and fine-tuned accuracy of ``arch`` on fold 0 of one task (one thread)."""
    from sklearn.base import clone

    import equibench
    from equibench.classifier import classifier_for
    from equibench.classifier.episodes import validation_split
    from equibench.classifier.estimator import PFNClassifier
    from equibench.classifier.predict_progress import quiet_predictions
    from equibench.evaluate.cells import _prepared_fold, reproducible_cell
    from equibench.tasks.openml import load_task, working_cache

    with tempfile.TemporaryDirectory(prefix="equibench-finetune-") as work_dir:
        task = load_task(task_id, working_cache(cache, work_dir))
    data = _prepared_fold(task, 0, seed=0)
    chosen = np.sort(np.random.RandomState(0).permutation(len(data["y_test"]))[:test_rows])
    X_test, y_test = data["X_test"][chosen], data["y_test"][chosen]
    X, y = data["X_train"], data["y_train"]
    result = {"suite": suite, "task": task_id, "name": data["name"], "arch": arch, "rows": len(y),
              "classes": len(np.unique(y))}
    with reproducible_cell(1), quiet_predictions(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zero_shot = classifier_for(arch, len(np.unique(y)), len(y), n_estimators=1).fit(X, y)
        result["zero_shot"] = float(np.mean(zero_shot.predict(X_test) == y_test))
        if type(zero_shot).__name__ == "ECOCClassifier":  # the fine-tuned TabPFN* decodes its codes in context
            same_path = getattr(equibench, CLASSES[arch][1])(n_estimators=1)
            PFNClassifier.fit(same_path, X, y)  # its zero-shot fit: the base weights, no fine-tuning
            result["zero_shot_codes_in_context"] = float(np.mean(same_path.predict(X_test) == y_test))
        started = time.perf_counter()
        tuned = getattr(equibench, CLASSES[arch][1])(n_estimators=1).fit(X, y)
        result["fit_minutes"] = (time.perf_counter() - started) / 60
        result["finetuned"] = float(np.mean(tuned.predict(X_test) == y_test))
        if tuned.finetuned_state_ is not None:  # the kept weights with the validation rows left out of the context
            train_part = validation_split(np.unique(y, return_inverse=True)[1], tuned.validation_split_ratio,
                                          tuned.max_validation_rows, np.random.RandomState(0))[0]
            apart = clone(tuned).set_params(checkpoint=tuned.model_)
            PFNClassifier.fit(apart, X[train_part], y[train_part])
            result["finetuned_without_validation_rows"] = float(np.mean(apart.predict(X_test) == y_test))
    record = tuned.fine_tuning_
    result.update(
        steps=record["steps"], kept_step=record["kept_step"], stopped=record["stopped"],
        finetune_minutes=record["seconds"] / 60, validation_rows=record["validation_rows"],
        validation_gain=record.get("validation_accuracy_after", 0) - record.get("validation_accuracy_before", 0),
        validation_log_loss_gain=record.get("validation_log_loss_before", 0) - record.get("validation_log_loss_after", 0),
    )
    return result


def planned(suites: list[str], archs: list[str]) -> list[tuple[str, int, str]]:
    from equibench.tasks import suites as known
    from equibench.tasks.openml import is_cached

    work = []
    for suite in suites:
        for task_id in getattr(known, suite.upper()):
            if is_cached(task_id, CACHES[suite]):
                work += [(suite, task_id, arch) for arch in archs]
    return work


def run(args) -> None:
    out = Path(args.out)
    done = {(r["suite"], r["task"], r["arch"]) for r in read(out)}
    todo = [item for item in planned(args.suites, args.archs) if item not in done]
    print(f"{len(done)} results in {out}, {len(todo)} to run on {args.jobs} processes", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(one_task, suite, task, arch, str(CACHES[suite]), args.test_rows): (suite, task, arch)
                   for suite, task, arch in todo}
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception as error:  # one task's failure is reported, the others go on
                print(f"{futures[future]}: {type(error).__name__}: {error}", flush=True)
                continue
            with out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
            print(json.dumps(result), flush=True)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def quartiles(values: list[float]) -> str:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{100 * median:+.2f} [{100 * q1:+.2f}, {100 * q3:+.2f}]"


def reference(result: dict) -> float:
    """The zero-shot accuracy fine-tuning is measured against: the same classifier with the base weights
    (past TabPFN*'s class limit in one context, its codes decoded in context, not the ECOC ensemble)."""
    return result.get("zero_shot_codes_in_context", result["zero_shot"])


def gain(result: dict) -> float:
    return result["finetuned"] - reference(result)


def _zero_shot_text(result: dict) -> str:
    text = f"{100 * reference(result):.2f}"
    return text + (f" (ECOC {100 * result['zero_shot']:.2f})" if "zero_shot_codes_in_context" in result else "")


def tables(results: list[dict]) -> str:
    from equibench.tables import markdown_table

    rows = [{"suite": r["suite"], "task": f"{r['name']} ({r['task']})", "arch": r["arch"], "rows": r["rows"],
             "classes": r["classes"], "zero-shot %": _zero_shot_text(r),
             "fine-tuned %": f"{100 * r['finetuned']:.2f}", "test gain": f"{100 * gain(r):+.2f}",
             "val gain": f"{100 * r['validation_gain']:+.2f}", "val log-loss gain": f"{r['validation_log_loss_gain']:+.4f}",
             "steps (kept)": f"{r['steps']} ({r['kept_step']})", "stopped": r["stopped"],
             "fine-tune min": f"{r['finetune_minutes']:.2f}"} for r in sorted(results, key=lambda r: (r["suite"], r["rows"], r["arch"]))]
    summary = []
    for suite in dict.fromkeys(r["suite"] for r in results):
        for arch in CLASSES:
            chosen = [r for r in results if r["suite"] == suite and r["arch"] == arch]
            if not chosen:
                continue
            gains = [gain(r) for r in chosen]
            summary.append({
                "suite": suite, "arch": arch, "tasks": len(chosen),
                "median test gain, points [quartiles]": quartiles(gains),
                "median val gain [quartiles]": quartiles([r["validation_gain"] for r in chosen]),
                "tasks kept tuned": sum(r["kept_step"] > 0 for r in chosen),
                "worst test change": f"{100 * min(gains):+.2f}",
                "max fine-tune min": f"{max(r['finetune_minutes'] for r in chosen):.2f}",
                "median fine-tune min": f"{statistics.median(r['finetune_minutes'] for r in chosen):.2f}",
            })
    apart = [r["finetuned_without_validation_rows"] - r["finetuned"] for r in results
             if "finetuned_without_validation_rows" in r]
    rejoin = (f"Where a step was kept ({len(apart)} task-architecture pairs), the kept weights with the validation "
              f"rows left out of the final context against rejoined: median {quartiles(apart)} points, better in "
              f"{sum(d > 0 for d in apart)}, worse in {sum(d < 0 for d in apart)}.\n\n" if apart else "")
    return (f"Fold 0, one member, the packaged checkpoints, one thread per task; fine-tuning with its defaults.\n\n"
            f"{markdown_table(pd.DataFrame(summary))}\n\n{rejoin}{markdown_table(pd.DataFrame(rows))}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", default="large,le10,gt10", type=lambda text: text.split(","))
    parser.add_argument("--archs", default="equitabpfn,tabpfn-star", type=lambda text: text.split(","))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--test-rows", type=int, default=2000)
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "equibench-finetune.jsonl"))
    parser.add_argument("--table-only", action="store_true", help="only print the table of the results in --out")
    add_record_flag(parser)
    args = parser.parse_args()
    if not args.table_only:
        run(args)
    publish(section("Fine-tuning against zero-shot", tables(read(Path(args.out)))), args.record)


if __name__ == "__main__":
    main()
