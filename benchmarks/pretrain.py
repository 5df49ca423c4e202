"""Training throughput per model size against the prior's throughput, in one run.

For each architecture and size: datasets/s of full training steps (prior sampling
excluded, forward + backward + AdamW) on pre-sampled batches; and the prior's own
datasets/s at the same rows. The ratio prior / training must stay >= 5 so that the prior
is never the bottleneck.

    python benchmarks/pretrain.py                  # print the table
    python benchmarks/pretrain.py --record         # and append it to docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import time

import torch
from recording import add_record_flag, publish, section

from equibench.model import build_model, count_parameters, size_config
from equibench.pretrain import batch_loss
from equibench.prior import PriorConfig, sample_batch


def prior_rate(prior: PriorConfig, batch_size: int, seconds: float, device: torch.device) -> float:
    generator = torch.Generator(device=device).manual_seed(0)
    sample_batch(prior, batch_size, generator, device)  # warm-up
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        sample_batch(prior, batch_size, generator, device)
        done += batch_size
    if device.type == "cuda":
        torch.cuda.synchronize()
    return done / (time.perf_counter() - started)


def training_rate(arch: str, size: str, batches: list, seconds: float, device: torch.device, amp: bool) -> float:
    torch.manual_seed(0)
    model = build_model(arch, size_config(size)).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")

    def step(batch) -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = batch_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    step(batches[0])  # warm-up
    done, index, started = 0, 1, time.perf_counter()
    while time.perf_counter() - started < seconds or done == 0:
        batch = batches[index % len(batches)]
        step(batch)
        done += batch.x.shape[0]
        index += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="tiny,small,medium")
    parser.add_argument("--archs", default="equitabpfn,tabpfn-star")
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0, help="measuring time per configuration")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_record_flag(parser)
    args = parser.parse_args()

    device = torch.device(args.device)
    amp = device.type == "cuda"
    prior = PriorConfig(rows=args.rows)
    generator = torch.Generator(device=device).manual_seed(1)
    batches = [sample_batch(prior, args.batch_size, generator, device) for _ in range(8)]
    prior_per_s = prior_rate(prior, args.batch_size, args.seconds, device)
    lines = [
        f"{args.rows} rows per dataset, batch {args.batch_size}, {'bf16 autocast' if amp else 'float32'} on "
        f"{device.type}; training steps on 8 pre-sampled batches (mixed K). Prior alone: **{prior_per_s:.1f} datasets/s**.",
        "",
        "| model | size | parameters | training datasets/s | prior / training |",
        "|---|---|---:|---:|---:|",
    ]
    for arch in args.archs.split(","):
        for size in args.sizes.split(","):
            rate = training_rate(arch, size, batches, args.seconds, device, amp)
            n_parameters = count_parameters(build_model(arch, size_config(size)))
            lines.append(f"| {arch} | {size} | {n_parameters:,} | {rate:.2f} | {prior_per_s / rate:.1f}x |")
            print(lines[-1], flush=True)
    publish(section("Pretraining throughput", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
