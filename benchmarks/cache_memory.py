"""The fit_with_cache cache: its size (estimated at fit and built), the time to build it
and to predict with it, and what a lower-precision cache (bfloat16, float16) changes, in
memory and in predictions, against the float32 cache and the uncached ``low_memory`` path.

Packaged EquiTabPFN checkpoint, CPU, one process; times are ratios within one run (the
machine may be shared). The last table gives the estimate alone (no cache built) for the
sizes where the cache gets large.

    python benchmarks/cache_memory.py            # print the tables
    python benchmarks/cache_memory.py --record   # and append them to docs/BENCHMARKS.md
    python benchmarks/cache_memory.py --peak     # only the fit's peak memory against the estimate

``--peak`` fits a 300-class table with one member in a fresh process per precision and reports
the growth of the process's peak resident memory during fit against the cache estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from isolated import current_rss_mb, peak_rss_mb, run_isolated
from recording import add_record_flag, publish, section
from sklearn.datasets import load_digits, load_wine
from sklearn.model_selection import train_test_split

from equibench import EquiTabPFNClassifier

PRECISIONS = ("float32", "bfloat16", "float16")


def _blobs(n_classes: int, n_rows: int, n_features: int = 10, seed: int = 0):
    rng = np.random.RandomState(seed)
    centres = rng.normal(scale=1.5, size=(n_classes, n_features))
    y = np.arange(n_rows) % n_classes
    return centres[y] + rng.normal(size=(n_rows, n_features)), y


def problems() -> dict[str, tuple]:
    """name -> (X_train, X_test, y_train, y_test)."""
    split = dict(test_size=0.3, random_state=0)
    X, y = load_wine(return_X_y=True)
    wine = train_test_split(X, y, stratify=y, **split)
    X, y = load_digits(return_X_y=True)
    digits = train_test_split(X[:1400], y[:1400], stratify=y[:1400], **split)
    X, y = _blobs(100, 900)
    blobs = train_test_split(X, y, stratify=y, **split)
    return {"wine (K=3, 124 rows)": wine, "digits (K=10, 980 rows)": digits, "blobs (K=100, 630 rows)": blobs}


def _timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def measure(data: tuple, members: int) -> list[dict]:
    """low_memory, then fit_with_cache in each precision: fit and predict times, sizes, accuracy."""
    X_train, X_test, y_train, y_test = data
    params = dict(device="cpu", n_estimators=members, random_state=0, cache_memory_limit_gb=None)
    plain, fit_s = _timed(lambda: EquiTabPFNClassifier(**params).fit(X_train, y_train))
    reference, predict_s = _timed(lambda: plain.predict_proba(X_test))
    rows = [{"path": "low_memory", "fit_s": fit_s, "predict_s": predict_s, "proba": reference}]
    for precision in PRECISIONS:
        cached, fit_s = _timed(lambda: EquiTabPFNClassifier(fit_mode="fit_with_cache", cache_precision=precision,
                                                           **params).fit(X_train, y_train))
        proba, predict_s = _timed(lambda: cached.predict_proba(X_test))
        rows.append({"path": f"fit_with_cache, {precision}", "fit_s": fit_s, "predict_s": predict_s, "proba": proba,
                     "estimate_mb": cached.estimate_cache_bytes() / 1e6,
                     "built_mb": sum(context.nbytes() for context in cached.contexts_) / 1e6})
    for row in rows:
        print(f"{row['path']}: fit {row['fit_s']:.2f} s, predict {row['predict_s']:.2f} s", file=sys.stderr)
        row["accuracy"] = float((plain.classes_[row["proba"].argmax(axis=1)] == y_test).mean())
        row["max_abs_dproba"] = float(np.abs(row["proba"] - rows[1]["proba"]).max())
    return rows


def measured_lines(members: int) -> list[str]:
    lines = [
        f"{members} members; test rows = 30% of each table. Δ = against the float32 cache: the largest change of a "
        "probability, and the change of accuracy.",
        "",
        "| data | path | cache estimate (MB) | cache built (MB) | fit (s) | predict (s) | fit / low_memory fit | "
        "predict / low_memory predict | accuracy | max abs Δ proba | Δ accuracy |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, data in problems().items():
        rows = measure(data, members)
        base = rows[0]
        for row in rows:
            sizes = (f"{row['estimate_mb']:.1f} | {row['built_mb']:.1f}" if "built_mb" in row else " | ")
            lines.append(
                f"| {name} | {row['path']} | {sizes} | {row['fit_s']:.2f} | {row['predict_s']:.2f} | "
                f"{row['fit_s'] / base['fit_s']:.2f} | {row['predict_s'] / base['predict_s']:.2f} | "
                f"{row['accuracy']:.4f} | {row['max_abs_dproba']:.1e} | {row['accuracy'] - rows[1]['accuracy']:+.4f} |"
            )
    return lines


def estimate_lines(members: int) -> list[str]:
    """The estimate alone, from a low_memory fit, where the cache gets large."""
    lines = [
        f"The estimate alone (`estimate_cache_bytes()` of a `low_memory` fit, {members} members, no cache built), "
        "against the default `cache_memory_limit_gb=4.0`:",
        "",
        "| K | context rows | float32 (GB) | bfloat16 / float16 (GB) | float32 under the default limit |",
        "|---:|---:|---:|---:|---|",
    ]
    for n_classes, n_rows in ((10, 3000), (100, 700), (100, 3000), (1000, 1000), (1000, 3000)):
        X, y = _blobs(n_classes, n_rows)
        sizes = [EquiTabPFNClassifier(device="cpu", n_estimators=members, cache_precision=precision)
                 .fit(X, y).estimate_cache_bytes() / 1e9 for precision in ("float32", "bfloat16")]
        lines.append(f"| {n_classes} | {n_rows} | {sizes[0]:.2f} | {sizes[1]:.2f} | "
                     f"{'yes' if sizes[0] <= 4.0 else 'refused at fit'} |")
    return lines


PEAK_CLASSES, PEAK_ROWS = 300, 600


def peak_one(precision: str) -> dict:
    """In a fresh process: the growth of the peak RSS during a one-member fit_with_cache fit."""
    import torch

    torch.set_num_threads(1)
    X, y = _blobs(PEAK_CLASSES, PEAK_ROWS)
    params = dict(device="cpu", n_estimators=1, cache_precision=precision, cache_memory_limit_gb=None)
    EquiTabPFNClassifier(**params).fit(X[:20], y[:20])  # the network loaded, torch warmed up
    before = max(current_rss_mb(), peak_rss_mb())
    model = EquiTabPFNClassifier(fit_mode="fit_with_cache", **params).fit(X, y)
    return {"estimate_mb": model.estimate_cache_bytes() / 1e6, "growth_mb": peak_rss_mb() - before,
            "model_mb": sum(p.numel() * p.element_size() for p in model.model_.parameters()) / 1e6}


def peak_lines() -> list[str]:
    lines = [f"Peak memory of a `fit_with_cache` fit: {PEAK_CLASSES} classes, {PEAK_ROWS} context rows, one member, "
             "one thread, each precision in a fresh process; growth = the process's peak RSS after the fit minus its "
             "RSS before (the network already loaded).", "",
             "| cache precision | cache estimate (MB) | peak growth during fit (MB) | growth - estimate (MB) | "
             "network weights (MB) |", "|---|---:|---:|---:|---:|"]
    for precision in PRECISIONS:
        result = run_isolated(__file__, {"precision": precision})
        if "error" in result:
            lines.append(f"| {precision} | {result['error']} | | | |")
            continue
        lines.append(f"| {precision} | {result['estimate_mb']:.0f} | {result['growth_mb']:.0f} | "
                     f"{result['growth_mb'] - result['estimate_mb']:.0f} | {result['model_mb']:.1f} |")
    return lines


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(peak_one(json.loads(sys.argv[2])["precision"])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_flag(parser)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--peak", action="store_true", help="only the fit's peak memory against the estimate")
    args = parser.parse_args()
    if args.peak:
        publish(section("The fit_with_cache cache: peak memory at fit", "\n".join(peak_lines())), args.record)
        return
    lines = ["Packaged equitabpfn-small checkpoint, float32 inference, CPU.", "",
             *measured_lines(args.members), "", *estimate_lines(args.members), "", *peak_lines()]
    publish(section("The fit_with_cache cache: size, precision, time", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
