"""Training throughput per model: datasets/s and model FLOP utilisation (MFU), against the
prior's datasets/s, in one run.

Training: full steps (forward and backward in the run's precision, gradient clipping, the
run's optimizer) on 8 batches drawn from the prior beforehand, for ``--seconds``. The model
FLOPs of each dataset come from the model's shape and the dataset's rows, train rows and
classes (the network's ``training_flops``: three forward passes' matrix products); MFU is the
achieved model FLOP/s over the device's peak, ``--peak-tflops``, by default NVIDIA's dense
bf16 (with autocast) or fp32 figure for the GPUs in ``PEAK_TFLOPS``; elsewhere MFU needs
``--peak-tflops``. Prior: the stream the run draws (in its process, or by its prior workers),
for ``--seconds``; the ratio prior / training must stay >= 5 so that the prior is never
the bottleneck.

Without ``--recipe``: the named ``--sizes`` with 1024 rows, 8 datasets per step, cosine
AdamW, bf16 on CUDA. With ``--recipe``: the recipe's model, batch, prior (the rows of its
last step), optimizer, precision, device and prior workers; each flag given replaces the
recipe's value.

    python benchmarks/pretrain.py                          # print the table
    python benchmarks/pretrain.py --recipe medium-gpu      # the GPU recipe, on its GPU
    python benchmarks/pretrain.py --recipe medium-gpu --device cpu --no-amp --rows 64 --batch-size 2 \\
        --prior-workers 0 --seconds 1 --peak-tflops 0.5    # the same at a tiny scale on CPU
    python benchmarks/pretrain.py --record                 # and append it to docs/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from contextlib import closing

import torch
from recording import add_record_flag, publish, section

from equibench.devices import resolve_device
from equibench.model import build_model, count_parameters, size_config
from equibench.pretrain import Recipe, TrainConfig, batch_loss, build_optimizer, load_recipe, prior_at
from equibench.pretrain.loop import prior_batches
from equibench.prior import PriorConfig

#: Dense peak TFLOP/s (bf16, fp32) by a fragment of the CUDA device name, first match first
#: (NVIDIA's data sheets, SXM boards unless named; fp32 without TF32, PyTorch's default for matmuls).
PEAK_TFLOPS = {"H200": (989.0, 67.0), "H100 PCIe": (756.0, 51.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5)}
DEFAULTS = Recipe(train={"batch_size": 8}, prior={"rows": 1024})


def given(**values) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def runs(args: argparse.Namespace) -> list[tuple[TrainConfig, PriorConfig]]:
    """The (training settings, prior) of each measured model."""
    recipe = load_recipe(args.recipe) if args.recipe else DEFAULTS
    sizes = args.sizes.split(",") if args.sizes else [None] if args.recipe else ["tiny", "small", "medium"]
    train = given(batch_size=args.batch_size, device=args.device, amp=args.amp, prior_workers=args.prior_workers)
    measured = []
    for arch in args.archs.split(","):
        for size in sizes:
            config, prior = recipe.configs(arch, train, model=given(size=size))
            prior = prior_at(config.steps, prior, config.rows_curriculum)
            prior = prior if args.rows is None else dataclasses.replace(prior, rows=args.rows)
            measured.append((dataclasses.replace(config, rows_curriculum=()), prior))
    return measured


def draw(prior: PriorConfig, config: TrainConfig, device: torch.device, seconds: float) -> tuple[list, float]:
    """8 batches of the run's prior stream, and the stream's datasets/s over ``seconds`` after them."""
    generator = torch.Generator().manual_seed(config.seed)
    with closing(prior_batches(prior, config, generator, device, 1)) as stream:
        batches = [next(stream) for _ in range(8)]  # also starts the prior workers
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds or done == 0:
            done += next(stream).x.shape[0]
        if device.type == "cuda":
            torch.cuda.synchronize()
        return batches, done / (time.perf_counter() - started)


def training_rate(config: TrainConfig, batches: list, seconds: float, device: torch.device,
                  amp: bool) -> tuple[float, float]:
    """Datasets/s and model FLOP/s of training steps on ``batches``, in turn."""
    torch.manual_seed(config.seed)
    model = build_model(config.arch, size_config(config.size, **config.model_overrides)).to(device).train()
    optimizer, scheduler = build_optimizer(model, config, device)
    flops = [batch.x.shape[0] * model.training_flops(batch.x.shape[1], batch.n_train, batch.n_classes)
             for batch in batches]

    def step(batch) -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = batch_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()

    step(batches[0])  # warm-up
    done, done_flops, index, started = 0, 0.0, 1, time.perf_counter()
    while time.perf_counter() - started < seconds or done == 0:
        step(batches[index % len(batches)])
        done += batches[index % len(batches)].x.shape[0]
        done_flops += flops[index % len(batches)]
        index += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    return done / elapsed, done_flops / elapsed


def peak_tflops(device: torch.device, amp: bool) -> float | None:
    """The device's dense peak TFLOP/s in the run's precision, where ``PEAK_TFLOPS`` knows it."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peaks[0 if amp else 1] for fragment, peaks in PEAK_TFLOPS.items() if fragment in name), None)


def model_label(config: TrainConfig) -> str:
    overrides = ", ".join(f"{key}={value}" for key, value in config.model_overrides.items())
    return f"{config.arch} {config.size}" + (f" ({overrides})" if overrides else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", help="a shipped recipe's name or a recipe file (default: the named sizes)")
    parser.add_argument("--sizes", help="named sizes, comma-separated (default: tiny,small,medium; a recipe's own)")
    parser.add_argument("--archs", default="equitabpfn,tabpfn-star")
    parser.add_argument("--rows", type=int, help="rows per dataset (default: 1024; a recipe's at its last step)")
    parser.add_argument("--batch-size", type=int, help="datasets per step (default: 8; a recipe's)")
    parser.add_argument("--device", help="default: CUDA where present; a recipe's")
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, help="bf16 autocast (default: on CUDA only; a recipe's)")
    parser.add_argument("--prior-workers", type=int, help="default: 0; a recipe's")
    parser.add_argument("--seconds", type=float, default=30.0, help="measuring time per configuration")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak TFLOP/s for MFU (default: PEAK_TFLOPS)")
    add_record_flag(parser)
    args = parser.parse_args()

    measured = runs(args)
    first, prior = measured[0]
    device = resolve_device(first.device)
    amp = device.type == "cuda" if first.amp is None else first.amp
    peak = args.peak_tflops or peak_tflops(device, amp)
    lines = [
        f"{args.recipe or 'Named sizes'}: {prior.rows} rows per dataset, batch {first.batch_size}, "
        f"{'bf16 autocast' if amp else 'float32'} on {device.type}, {first.schedule} optimizer, prior drawn "
        f"{f'by {first.prior_workers} workers' if first.prior_workers else 'in process'}; training steps on 8 "
        f"pre-drawn batches (mixed K). MFU against "
        f"{f'{peak:g} TFLOP/s' if peak else 'no known peak: give --peak-tflops'}.",
        "",
        "| model | parameters | training datasets/s | model TFLOP/s | MFU | prior datasets/s | prior / training |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    prior_draws = {}
    for config, prior in measured:
        key = (prior, config.batch_size, config.prior_workers, config.seed)
        if key not in prior_draws:
            prior_draws[key] = draw(prior, config, device, args.seconds)
        batches, prior_per_s = prior_draws[key]
        rate, flop_rate = training_rate(config, batches, args.seconds, device, amp)
        n_parameters = count_parameters(build_model(config.arch, size_config(config.size, **config.model_overrides)))
        mfu = f"{100 * flop_rate / (peak * 1e12):.1f}%" if peak else "n/a"
        lines.append(f"| {model_label(config)} | {n_parameters:,} | {rate:.2f} | {flop_rate / 1e12:.3f} | {mfu} | "
                     f"{prior_per_s:.1f} | {prior_per_s / rate:.1f}x |")
        print(lines[-1], flush=True)
    publish(section("Pretraining throughput", "\n".join(lines)), args.record)


if __name__ == "__main__":
    main()
