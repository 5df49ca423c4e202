"""Inference cost of EquiTabPFN (and TabPFN* at K <= 10) through the sklearn classifier.

Each configuration runs in a fresh subprocess so that its peak memory can be read from
the process's own high-water mark (minus the memory held right before predict_proba).
The model's achieved GFLOP/s (FLOPs counted by torch's FlopCounterMode) is compared with
torch's own float32 matmul GFLOP/s measured in the same run.

    python benchmarks/inference.py                 # print the tables
    python benchmarks/inference.py --record        # and append them to docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from isolated import cell, current_rss_mb, peak_rss_mb, run_isolated
from recording import add_record_flag, publish, section


def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of torch's CPU flash attention, which FlopCounterMode does not count itself."""
    batch = 1
    for dim in query_shape[:-2]:
        batch *= dim
    queries, keys = query_shape[-2], key_shape[-2]
    return 2 * batch * queries * keys * (query_shape[-1] + value_shape[-1])


def measure_one(arch: str, size: str, n_classes: int, n_train: int, n_test: int, n_features: int, repeats: int) -> dict:
    """Time predict_proba of one configuration (this process only)."""
    import numpy as np
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from equibench import classifier_for
    from equibench.model import build_model, size_config

    torch.manual_seed(0)
    model = build_model(arch, size_config(size)).eval()
    rng = np.random.RandomState(0)
    X = rng.normal(size=(n_train + n_test, n_features)).astype(np.float32)
    y = np.arange(n_train) % n_classes
    classifier = classifier_for(model, n_estimators=1, device="cpu", batch_size=n_test, random_state=0)
    classifier.fit(X[:n_train], y)
    classifier.predict_proba(X[n_train:])  # warm-up (kernel selection for these shapes)
    baseline = current_rss_mb()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        classifier.predict_proba(X[n_train:])
        times.append(time.perf_counter() - started)
    peak = peak_rss_mb()
    attention = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    with FlopCounterMode(display=False, custom_mapping={attention: _cpu_attention_flops}) as counter:
        classifier.predict_proba(X[n_train:])
    seconds = min(times)
    flops = counter.get_total_flops()
    return {
        "seconds": seconds, "peak_mb": max(peak - baseline, 0.0), "gflops": flops / 1e9,
        "gflop_per_s": flops / 1e9 / seconds,
        "matmul_gflop_per_s": matmul_gflop_per_s(),  # the reference, measured in the same process
    }


def matmul_gflop_per_s(n: int = 2048, repeats: int = 5) -> float:
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def sweep(args: argparse.Namespace) -> list[tuple]:
    """Every configuration of the run, each in its own process: (arch, size, K, train rows, result)."""
    rows = []

    def add(arch, size, n_classes, n_train, previous=None):
        tokens = (n_train + args.test_rows) * (1 + n_classes if arch == "equitabpfn" else 1)  # the token slots
        if previous and "seconds" in previous[0]:
            predicted = previous[0]["seconds"] * tokens / previous[1]
            if predicted > args.max_seconds:
                rows.append((arch, size, n_classes, n_train, {"error": f"skipped: predicted {predicted:.0f} s"}))
                return previous
        result = run_isolated(__file__, dict(arch=arch, size=size, n_classes=n_classes, n_train=n_train,
                                             n_test=args.test_rows, n_features=args.features, repeats=args.repeats))
        rows.append((arch, size, n_classes, n_train, result))
        print(f"{arch:12s} {size:6s} K={n_classes:<5d} N={n_train:<5d} {result}", file=sys.stderr)
        return (result, tokens)

    for size in args.sizes.split(","):
        previous = None
        for n_classes in map(int, args.classes.split(",")):
            previous = add("equitabpfn", size, n_classes, args.k_sweep_train_rows, previous)
        for n_train in map(int, args.train_rows.split(",")):
            if n_train != args.k_sweep_train_rows:
                add("equitabpfn", size, 10, n_train)
        for n_classes in (2, 10):
            add("tabpfn-star", size, n_classes, args.k_sweep_train_rows)
    return rows


def report(rows: list[tuple], args: argparse.Namespace) -> str:
    lines = [
        f"predict_proba of {args.test_rows} test rows, {args.features} features, n_estimators=1, float32, "
        f"best of {args.repeats}; peak = extra resident memory during predict_proba; "
        "% of matmul = the model's GFLOP/s over torch's float32 2048^3 matmul GFLOP/s measured "
        "in the same process right after (best of 5).",
        "",
        "| model | size | K | train rows | time (s) | peak (MB) | GFLOP | GFLOP/s | matmul GFLOP/s | % of matmul |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arch, size, n_classes, n_train, result in rows:
        share = f"{100 * result['gflop_per_s'] / result['matmul_gflop_per_s']:.0f}%" if "gflop_per_s" in result else ""
        lines.append(
            f"| {arch} | {size} | {n_classes} | {n_train} | {cell(result, 'seconds', '.3f')} | "
            f"{cell(result, 'peak_mb', '.0f')} | {cell(result, 'gflops', '.1f')} | "
            f"{cell(result, 'gflop_per_s', '.0f')} | {cell(result, 'matmul_gflop_per_s', '.0f')} | {share} |"
        )
    ratios = []
    for size in args.sizes.split(","):
        for n_classes in (2, 10):
            found = {
                arch: result for arch, s, k, n, result in rows
                if s == size and k == n_classes and n == args.k_sweep_train_rows and "seconds" in result
            }
            if len(found) == 2:
                ratios.append(f"{size} K={n_classes}: {found['equitabpfn']['seconds'] / found['tabpfn-star']['seconds']:.1f}x")
    lines += ["", "EquiTabPFN / TabPFN* time at K <= 10 (same size, same rows): " + ", ".join(ratios) + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="small,base")
    parser.add_argument("--classes", default="2,10,26,100,1000")
    parser.add_argument("--train-rows", default="100,1000,3000")
    parser.add_argument("--k-sweep-train-rows", type=int, default=1000, help="train rows of the K sweep")
    parser.add_argument("--test-rows", type=int, default=100)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="skip a configuration whose predicted time (linear in tokens) exceeds this")
    add_record_flag(parser)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(**json.loads(args.one))))
        return
    publish(section("Inference on CPU", report(sweep(args), args)), args.record)


if __name__ == "__main__":
    main()
