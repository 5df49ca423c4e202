"""The cost of running `equibench evaluate` on a Dask cluster instead of local worker processes.

Measured in one run, on one machine:

1. Wall time of a suite slice with ``--jobs N`` (a local process pool) and with
   ``--scheduler local:N`` (a Dask LocalCluster of N workers, started beforehand and timed
   separately): the overhead ratio (target <= 1.1x).
2. Scheduler overhead per cell: the round trip of a cell that does nothing, through each backend.
3. Data shipping: per task, the client's load from the OpenML cache and the scatter of the
   task to the cluster (what each cell saves by not reading the cache on a worker).

    python benchmarks/dask_overhead.py [--workers 2] [--folds 0-1] [--methods ...] [--openml-cache DIR] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
from recording import add_record_flag, publish, section

from equibench.baselines.settings import KNNSettings
from equibench.evaluate import DaskBackend, EvaluateConfig, LocalBackend, evaluate
from equibench.evaluate.cells import Cell
from equibench.tables import markdown_table
from equibench.tasks.openml import TaskUnavailableError
from equibench.tasks.suites import GT10, load_task

METHODS = "knn,linear-model,decision-tree,random-forest,xgboost,equitabpfn,tabpfn-star"


def _folds(text: str) -> tuple[int, ...]:
    low, _, high = text.partition("-")
    return tuple(range(int(low), int(high or low) + 1))


def _nothing(cell, context, task=None):
    return None


def timed_slice(config: EvaluateConfig, backend, out: Path) -> tuple[float, int]:
    started = time.perf_counter()
    summary = evaluate(config, out, backend=backend, progress=False)
    return time.perf_counter() - started, len(summary.cells)


def round_trip_s(backend, n: int = 200) -> float:
    """Median seconds from submit to result of a cell that does nothing."""
    cell = Cell("bench", "demo-iris", 0, "knn", KNNSettings())
    times = []
    for _ in range(n):
        started = time.perf_counter()
        backend.executor.submit(_nothing, cell, None).result()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def data_shipping(backend: DaskBackend, task_ids: list[str], cache: str | None) -> pd.DataFrame:
    rows = []
    for task_id in task_ids:
        started = time.perf_counter()
        try:
            task = load_task(task_id, cache)
        except TaskUnavailableError:  # not in the offline cache
            continue
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        future = backend.client.scatter(task)
        future.result()
        rows.append({"task": task_id, "rows": len(task.y), "features": task.X.shape[1],
                     "cache_load_s": round(loaded, 3), "scatter_s": round(time.perf_counter() - started, 3)})
        del future
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--folds", default="0-1", help="folds of the demo suite slice")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--openml-cache", help="also measure loading and scattering the gt10 tasks this cache holds")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each backend, alternating")
    add_record_flag(parser)
    args = parser.parse_args()
    config = EvaluateConfig("demo", methods=tuple(args.methods.split(",")), folds=_folds(args.folds))
    runs, same = [], True
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for repeat in range(args.repeats):  # alternate the backends: the machine's load drifts
            with LocalBackend(args.workers) as local:
                local_wall, n_cells = timed_slice(config, local, work / f"local{repeat}")
                local_trip = round_trip_s(local)
            started = time.perf_counter()
            with DaskBackend.connect(f"local:{args.workers}") as dask:
                startup = time.perf_counter() - started
                dask_wall, _ = timed_slice(config, dask, work / f"dask{repeat}")
                dask_trip = round_trip_s(dask)
                if repeat == 0:
                    shipping = data_shipping(dask, [f"demo-{name}" for name in ("digits", "synthetic-30")], None)
                    if args.openml_cache:
                        from equibench.tasks.openml import working_cache

                        cache = str(working_cache(args.openml_cache, work / "openml-cache"))
                        shipping = pd.concat([shipping, data_shipping(dask, [str(t) for t in GT10], cache)])
            runs.append({"repeat": repeat, "local_wall_s": local_wall, "dask_wall_s": dask_wall,
                         "ratio": dask_wall / local_wall, "dask_startup_s": startup,
                         "local_round_trip_ms": local_trip * 1e3, "dask_round_trip_ms": dask_trip * 1e3})
            tables = [pd.read_csv(work / f"{kind}{repeat}" / "results.csv").drop(columns=["time_fit_s", "time_predict_s"])
                      for kind in ("local", "dask")]
            same = same and tables[0].equals(tables[1])
    timing = pd.DataFrame(runs)
    ratio = timing.ratio.median()
    per_cell_ms = (timing.dask_wall_s - timing.local_wall_s).median() / n_cells * 1e3
    body = (
        f"Slice: demo suite, folds {args.folds}, {n_cells} cells ({args.methods}), run with `--jobs {args.workers}` "
        f"and `--scheduler local:{args.workers}` alternately. Wall times exclude the cluster start-up "
        "(dask_startup_s); round trip = submit-to-result of a cell that does nothing (median of 200).\n\n"
        + markdown_table(timing.round(3).astype(str))
        + f"\n\nOverhead ratio Dask / local pool (median): **{ratio:.2f}x** (target <= 1.1x); "
        f"{per_cell_ms:+.0f} ms per cell. Same rows and metrics on both backends: {'yes' if same else 'NO'}.\n\n"
        "Data shipping, per task: the client's load from the cache, then one scatter to the cluster:\n\n"
        + markdown_table(shipping.astype(str))
    )
    publish(section("Distributed evaluation", body), args.record)


if __name__ == "__main__":
    main()
