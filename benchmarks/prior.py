"""Throughput of the synthetic prior: datasets generated per second at ``--rows`` rows and
``f_max`` (100) features, on CPU and, when available, on CUDA.

    python benchmarks/prior.py                          # CPU (+ CUDA if available), 1024 rows
    python benchmarks/prior.py --device cpu --batch-size 32 --seconds 30
    python benchmarks/prior.py --record                 # and append the table to docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import time

import torch
from recording import add_record_flag, publish, section

from equibench.prior import PriorConfig, sample_batch


def measure(config: PriorConfig, batch_size: int, seconds: float, device: str) -> dict:
    """Sample batches for about ``seconds`` (after one warm-up batch) and time them."""
    generator = torch.Generator().manual_seed(0)
    sample_batch(config, batch_size, generator, device=device)
    n_batches, elapsed = 0, 0.0
    started = time.perf_counter()
    while n_batches < 2 or elapsed < seconds:
        sample_batch(config, batch_size, generator, device=device)
        if device == "cuda":
            torch.cuda.synchronize()
        n_batches += 1
        elapsed = time.perf_counter() - started
    return {"device": device, "batches": n_batches, "seconds": elapsed,
            "datasets_per_s": n_batches * batch_size / elapsed, "ms_per_batch": 1000 * elapsed / n_batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("all", "cpu", "cuda"), default="all",
                        help="'all': CPU, plus CUDA when available (default)")
    parser.add_argument("--rows", type=int, default=1024, help="rows per dataset (default 1024)")
    parser.add_argument("--batch-size", type=int, default=64, help="datasets per batch (default 64)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time per device (default 20)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    add_record_flag(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    config = PriorConfig(rows=args.rows)

    results = [measure(config, args.batch_size, args.seconds, device) for device in devices]
    lines = [
        f"{args.rows} rows x {config.f_max} features (padded), batch size {args.batch_size}, default PriorConfig, "
        f"~{args.seconds:g} s per device after one warm-up batch.",
        "",
        "| device | batches | datasets/s | ms/batch |",
        "|---|---:|---:|---:|",
        *(f"| {r['device']} | {r['batches']} | {r['datasets_per_s']:.1f} | {r['ms_per_batch']:.0f} |" for r in results),
    ]
    publish(section("Synthetic prior", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
