"""Is the default `equibench evaluate` (one single-threaded cell per core) as fast as one
process whose cells use every core (the default before --threads-per-cell)?

Measured in one run, on one machine, alternating the two layouts (the load drifts):

- ``pool``: ``--jobs <cores> --threads-per-cell 1`` (today's default);
- ``process``: ``--jobs 1 --threads-per-cell <cores>`` (the former default's threads).

It also checks that the repeats of each layout give identical rows (same seed, same threads).

    python benchmarks/threads_per_cell.py [--folds 0] [--methods ...] [--repeats 2] [--record]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from recording import add_record_flag, publish, section

from equibench.evaluate import EvaluateConfig, LocalBackend, evaluate
from equibench.evaluate.backends import available_cores
from equibench.tables import markdown_table

METHODS = "knn,linear-model,random-forest,xgboost,equitabpfn,tabpfn-star,mlp,rtdl-resnet,rtdl-mlp,stg"
METRICS = ["task_id", "fold", "method", "variant", "status", "accuracy", "auc", "f1", "log_loss", "threads"]


def timed(config: EvaluateConfig, jobs: int, out: Path) -> float:
    started = time.perf_counter()
    with LocalBackend(jobs) as backend:
        evaluate(config, out, backend=backend, progress=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folds", default="0", help="folds of the demo suite slice, e.g. 0 or 0,1")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each layout, alternating")
    add_record_flag(parser)
    args = parser.parse_args()
    cores = available_cores()
    folds = tuple(int(fold) for fold in args.folds.split(","))
    layouts = {"pool": (cores, 1), "process": (1, cores)}  # name -> (jobs, threads per cell)
    runs, tables = [], {name: [] for name in layouts}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, (jobs, threads) in layouts.items():
                config = EvaluateConfig("demo", methods=tuple(args.methods.split(",")), folds=folds,
                                        threads_per_cell=threads)
                out = Path(tmp) / f"{name}{repeat}"
                runs.append({"repeat": repeat, "layout": name, "jobs": jobs, "threads_per_cell": threads,
                             "wall_s": round(timed(config, jobs, out), 1)})
                tables[name].append(pd.read_csv(out / "results.csv")[METRICS])
    timing = pd.DataFrame(runs)
    median = timing.groupby("layout")["wall_s"].median()
    identical = {name: all(table.equals(frames[0]) for table in frames[1:]) for name, frames in tables.items()}
    body = (
        f"Cores available: {cores}. Slice: demo suite, folds {args.folds}, methods {args.methods}.\n\n"
        + markdown_table(timing.astype(str))
        + f"\n\nMedian wall time: pool {median['pool']:.1f} s, process {median['process']:.1f} s; "
        f"process / pool = **{median['process'] / median['pool']:.2f}x**. Repeats give identical rows: pool "
        f"{'yes' if identical['pool'] else 'NO'}, process {'yes' if identical['process'] else 'NO'}."
    )
    publish(section("Threads per cell", body), args.record)


if __name__ == "__main__":
    main()
