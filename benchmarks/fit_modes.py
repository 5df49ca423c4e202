"""Fit once / predict many, and large K in bounded memory (the classifiers' ``fit_mode``).

Three ways to predict with the same fitted EquiTabPFN (packaged checkpoint, float32, CPU):

- ``forward``: the network's own forward per test batch (what the classifier did before
  ``fit_mode``): full-size intermediates, (1+K) x heads x R x N attention scores at once;
- ``low_memory``: the classifier's default, the chunked in-place forward per test batch;
- ``fit_with_cache``: the train side once at fit, then only the test rows per predict.

Each configuration runs in a fresh subprocess, so its peak memory is the process's own
high-water mark (reported as the extra resident memory over the fitted state before the
first predict, which includes the cache for ``fit_with_cache``).

On a machine shared with other jobs, run it single-threaded (OMP_NUM_THREADS=1): with more
torch threads than free cores, small operations spend most of their time waiting for
threads, and the fit_with_cache path (small operations) is penalised most.

    python benchmarks/fit_modes.py                 # print the tables
    python benchmarks/fit_modes.py --record        # and append them to docs/BENCHMARKS.md
    python benchmarks/fit_modes.py --skip-forward-k1000   # the 7+ GB reference run left out
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from isolated import cell, current_rss_mb, peak_rss_mb, run_isolated
from recording import add_record_flag, publish, section


def _forward_predict(classifier, X_test):
    """The pre-fit_mode prediction: the network's own forward per member and test batch."""
    import numpy as np
    import torch

    values = classifier.encoder_.transform(X_test)
    model, n_classes = classifier.model_, len(classifier.classes_)
    total = np.zeros((len(X_test), n_classes))
    with torch.inference_mode():
        for transform, train_features in zip(classifier.transforms_, classifier.train_features_):
            x_train = train_features.unsqueeze(0)
            y_train = ((classifier.train_labels_ + transform.spec.class_shift) % n_classes).unsqueeze(0)
            x_test = transform.transform(values).unsqueeze(0)
            logits = model(x_train, y_train, x_test, n_classes)[0]
            proba = torch.softmax(logits.double() / classifier.softmax_temperature, dim=-1)
            total += torch.roll(proba, -transform.spec.class_shift, dims=-1).numpy()
    return total / len(classifier.transforms_)


def measure_one(mode: str, n_classes: int, n_train: int, n_test: int, calls: int, members: int,
                n_features: int = 10) -> dict:
    """Fit, then ``calls`` predicts of ``n_test`` rows, in this process."""
    import numpy as np
    import torch

    from equibench import EquiTabPFNClassifier

    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    centres = rng.normal(scale=2, size=(n_classes, n_features))
    y = np.arange(n_train) % n_classes
    X = centres[y] + rng.normal(size=(n_train, n_features))
    X_test = centres[np.arange(n_test) % n_classes] + rng.normal(size=(n_test, n_features))
    classifier = EquiTabPFNClassifier(
        device="cpu", n_estimators=members, random_state=0, batch_size=max(n_test, 1),
        fit_mode="fit_with_cache" if mode == "fit_with_cache" else "low_memory", ignore_pretraining_limits=True,
    )
    before_fit = current_rss_mb()
    started = time.perf_counter()
    classifier.fit(X, y)
    fit_s = time.perf_counter() - started
    predict = (lambda: _forward_predict(classifier, X_test)) if mode == "forward" else (
        lambda: classifier.predict_proba(X_test))
    times, cpu_started = [], time.process_time()
    for _ in range(calls):
        started = time.perf_counter()
        proba = predict()
        times.append(time.perf_counter() - started)
    cpu_s = time.process_time() - cpu_started
    cache_mb = sum(c.nbytes() for c in getattr(classifier, "contexts_", [])) / 2**20
    return {"fit_s": fit_s, "predict_s": sum(times), "predict_cpu_s": cpu_s, "first_predict_s": times[0],
            "peak_mb": max(peak_rss_mb() - before_fit, 0.0), "cache_mb": cache_mb,
            "proba_checksum": float(np.asarray(proba).sum())}


def permutation_importance_wine(mode: str, repeats: int) -> dict:
    """sklearn's permutation_importance on wine (178 rows, 13 features), default ensemble."""
    from sklearn.datasets import load_wine
    from sklearn.inspection import permutation_importance

    from equibench import EquiTabPFNClassifier

    X, y = load_wine(return_X_y=True)
    before = current_rss_mb()
    started = time.perf_counter()
    classifier = EquiTabPFNClassifier(device="cpu", random_state=0, fit_mode=mode).fit(X, y)
    result = permutation_importance(classifier, X, y, n_repeats=repeats, random_state=0)
    return {"seconds": time.perf_counter() - started, "peak_mb": max(peak_rss_mb() - before, 0.0),
            "top_feature": int(result.importances_mean.argmax())}


def measure(kind: str, **spec) -> dict:
    result = run_isolated(__file__, {"kind": kind, **spec})
    print(f"{kind} {spec} -> {result}", file=sys.stderr)
    return result


def speed_up(results: dict[str, dict], mode: str, reference: str, key: str) -> str:
    """How many times less ``key`` (seconds) ``mode`` took than ``reference``, where both ran."""
    if key in results[mode] and key in results[reference]:
        return f"{results[reference][key] / results[mode][key]:.1f}x"
    return ""


def repeated_predict_lines() -> list[str]:
    """1. Fit once, predict many: the three predict paths."""
    spec = dict(n_classes=3, n_train=1000, n_test=100, calls=10, members=4)
    results = {mode: measure("predict", mode=mode, **spec) for mode in ("forward", "low_memory", "fit_with_cache")}
    lines = [
        "10 predict calls of 100 rows on a fitted model, 1000 context rows, K=3, 10 features, 4 members:",
        "",
        "| predict path | fit (s) | 10 predicts (s) | peak (MB) | cache (MB) | speed-up vs forward |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, result in results.items():
        lines.append(f"| {mode} | {cell(result, 'fit_s', '.2f')} | {cell(result, 'predict_s', '.2f')} | "
                     f"{cell(result, 'peak_mb', '.0f')} | {cell(result, 'cache_mb', '.0f')} | "
                     f"{speed_up(results, mode, 'forward', 'predict_s')} |")
    return lines


def importance_lines(repeats: int) -> list[str]:
    """Permutation importance with and without the cache."""
    results = {mode: measure("importance", mode=mode, repeats=repeats) for mode in ("low_memory", "fit_with_cache")}
    lines = [
        f"`sklearn.inspection.permutation_importance` on wine (n_repeats={repeats}, default 4 members, "
        "fit included):",
        "",
        "| fit_mode | seconds | peak (MB) | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for mode, result in results.items():
        lines.append(f"| {mode} | {cell(result, 'seconds', '.2f')} | {cell(result, 'peak_mb', '.0f')} | "
                     f"{speed_up(results, mode, 'low_memory', 'seconds')} |")
    return lines


def large_k_lines(skip_forward_k1000: bool) -> list[str]:
    """2. Large K in bounded memory: fit, then one predict call (two with the cache: the
    second is what every later predict of a fitted model costs)."""
    large = [("K=200, 600 context rows, 100 test rows, 4 members",
              dict(n_classes=200, n_train=600, n_test=100, members=4), ("forward", "low_memory", "fit_with_cache")),
             ("K=1000, 1000 context rows, 100 test rows, 1 member",
              dict(n_classes=1000, n_train=1000, n_test=100, members=1), ("forward", "low_memory"))]
    lines = [
        "Large K (one test batch per predict call):",
        "",
        "| configuration | predict path | fit (s) | first predict (s) | later predict (s) | peak (MB) | cache (MB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, spec, modes in large:
        for mode in modes:
            if mode == "forward" and spec["n_classes"] == 1000 and skip_forward_k1000:
                continue
            calls = 2 if mode == "fit_with_cache" else 1
            result = measure("predict", mode=mode, calls=calls, **spec)
            later = result["predict_s"] - result["first_predict_s"] if calls > 1 and "predict_s" in result else None
            lines.append(f"| {label} | {mode} | {cell(result, 'fit_s', '.2f')} | {cell(result, 'first_predict_s', '.2f')} | "
                         f"{'' if later is None else f'{later:.2f}'} | {cell(result, 'peak_mb', '.0f')} | "
                         f"{cell(result, 'cache_mb', '.0f')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_record_flag(parser)
    parser.add_argument("--skip-forward-k1000", action="store_true", help="leave out the forward run at K=1000 (7+ GB)")
    parser.add_argument("--importance-repeats", type=int, default=5)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        spec = json.loads(args.one)
        kind = spec.pop("kind")
        print(json.dumps(measure_one(**spec) if kind == "predict" else permutation_importance_wine(**spec)))
        return
    lines = [
        "Packaged equitabpfn-small checkpoint, float32. Peak = extra resident memory from before fit to the end "
        "(includes the cache). Every row ran in its own process, all in one run of the script, on a machine "
        "shared with other jobs: ratios are from that one run, absolute times swing with the load.",
        "",
        *repeated_predict_lines(),
        "",
        *importance_lines(args.importance_repeats),
        "",
        *large_k_lines(args.skip_forward_k1000),
    ]
    publish(section("Fit modes: fit once / predict many, large K in bounded memory", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
