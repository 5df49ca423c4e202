"""Does ``torch.compile`` make a CPU training step faster? Eager against compiled, in one run.

The same model (by default the shipped recipe's: EquiTabPFN small, 6 pre-LN layers) trains
on pre-sampled 1024-row prior batches of mixed K. For each batch: the first compiled call
(compilation or recompilation included, when the batch's shapes need one), then the compiled
and the eager step alternately, ``--repeats`` times each (the median is reported). Both run
in this process, on whatever threads torch has (set ``OMP_NUM_THREADS``).

    OMP_NUM_THREADS=1 python benchmarks/compiled_step.py --max-classes 6
    OMP_NUM_THREADS=1 python benchmarks/compiled_step.py --max-classes 6 --record

``--max-classes`` keeps to batches of at most that many classes (a 6-layer EquiTabPFN step
at K = 10 and 1024 rows peaks near 13.5 GB; two such processes do not fit in 24 GB).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from recording import add_record_flag, publish, section

from equibench.model import build_model, size_config
from equibench.pretrain import batch_loss
from equibench.prior import PriorConfig, sample_batch


def prior_batches(rows: int, batch_size: int, count: int, max_classes: int, seed: int) -> list:
    """``count`` prior batches of at most ``max_classes`` classes, drawn in order from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    while len(batches) < count:
        batch = sample_batch(PriorConfig(rows=rows), batch_size, generator, torch.device("cpu"))
        if batch.n_classes <= max_classes:
            batches.append(batch)
    return batches


def timed_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch) -> float:
    """Seconds of one training step (forward, backward, AdamW) of ``model`` on ``batch``."""
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    batch_loss(model, batch).backward()
    optimizer.step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="equitabpfn", choices=["equitabpfn", "tabpfn-star"])
    parser.add_argument("--size", default="small")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--max-classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    add_record_flag(parser)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = build_model(args.arch, size_config(args.size, n_layers=args.layers, norm_first=True)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    compiled = torch.compile(model, dynamic=True)
    batches = prior_batches(args.rows, args.batch_size, args.batches, args.max_classes, args.seed)
    lines = [
        f"{args.arch} {args.size}, {args.layers} pre-LN layers, {args.rows} rows, batch {args.batch_size}, "
        f"float32; `torch.compile(model, dynamic=True)` (inductor); {len(batches)} prior batches of at most "
        f"{args.max_classes} classes; median of {args.repeats} steps each.",
        "",
        "| K | train rows | first compiled call (s) | compiled step (s) | eager step (s) | eager / compiled |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    first_calls, compiled_steps, eager_steps = [], [], []
    for batch in batches:
        first_calls.append(timed_step(compiled, optimizer, batch))
        runs = [(timed_step(compiled, optimizer, batch), timed_step(model, optimizer, batch))
                for _ in range(args.repeats)]
        compiled_steps.append(statistics.median(run[0] for run in runs))
        eager_steps.append(statistics.median(run[1] for run in runs))
        lines.append(f"| {batch.n_classes} | {batch.n_train} | {first_calls[-1]:.1f} | {compiled_steps[-1]:.2f} | "
                     f"{eager_steps[-1]:.2f} | {eager_steps[-1] / compiled_steps[-1]:.2f} |")
        print(lines[-1], flush=True)
    compile_seconds = sum(first - step for first, step in zip(first_calls, compiled_steps))
    lines.append(f"| all | | {sum(first_calls):.1f} | {sum(compiled_steps):.2f} | {sum(eager_steps):.2f} | "
                 f"**{sum(eager_steps) / sum(compiled_steps):.2f}** |")
    lines += ["", f"Compilation (first calls less a compiled step): {compile_seconds:.0f} s in all."]
    publish(section("Compiled training step", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
