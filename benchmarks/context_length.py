"""Does a checkpoint use long contexts? Accuracy and loss on fixed synthetic prior datasets
as the number of train rows in the context grows, test rows held fixed.

Each prior dataset has ``--rows`` rows split near 87% / 13%; the context is the first n of
its train rows for each n in ``--contexts`` (the normalisation stays the one the prior
fitted on all train rows). A model that generalises beyond the row count it was trained
on keeps improving as n grows; one that does not gets worse past that count. Datasets
whose test rows hold a class absent from the context are left out at that n.

    python benchmarks/context_length.py [--equitabpfn PATH] [--tabpfn-star PATH] \
        [--batches 6] [--rows 1152] [--contexts 50 100 200 350 600 900]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from equibench.model import default_checkpoint, load_checkpoint
from equibench.prior import PriorConfig, sample_batch
from equibench.validation import masked_test_loss

#: Seed of the evaluation datasets, independent of any training seed.
DATASET_SEED = 20_261_123
BATCH_SIZE = 16


def context_metrics(model: torch.nn.Module, batches, n_context: int) -> tuple[float, float]:
    """Mean test accuracy and loss over the datasets whose test classes are in the context."""
    hits_sum, kept, losses = 0.0, 0.0, []
    with torch.inference_mode():
        for batch in batches:
            x_context, y_context = batch.x[:, :n_context], batch.y[:, :n_context]  # (B, n, F), (B, n)
            x_test, y_test = batch.x[:, batch.n_train :], batch.y[:, batch.n_train :]  # (B, M, F), (B, M)
            logits = model(x_context, y_context, x_test, batch.n_classes)  # (B, M, K)
            seen = torch.nn.functional.one_hot(y_context, batch.n_classes).amax(dim=1).bool()  # (B, K)
            keep = batch.loss_mask & torch.gather(seen, 1, y_test).all(dim=1)  # (B,)
            if keep.any():
                losses.append((masked_test_loss(logits, y_test, keep).item(), keep.sum().item()))
            hits = (logits.argmax(-1) == y_test).float().mean(dim=1)  # (B,)
            hits_sum += (hits * keep).sum().item()
            kept += keep.sum().item()
    loss = sum(value * weight for value, weight in losses) / max(kept, 1.0)
    return hits_sum / max(kept, 1.0), loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--equitabpfn", default="default", help="checkpoint path (default: packaged)")
    parser.add_argument("--tabpfn-star", default="default", help="checkpoint path (default: packaged)")
    parser.add_argument("--batches", type=int, default=6, help=f"batches of {BATCH_SIZE} prior datasets")
    parser.add_argument("--rows", type=int, default=1152, help="rows per prior dataset")
    parser.add_argument("--contexts", type=int, nargs="+", default=[50, 100, 200, 350, 600, 900])
    args = parser.parse_args()

    config = PriorConfig(rows=args.rows, min_train_fraction=0.86, max_train_fraction=0.87)
    generator = torch.Generator().manual_seed(DATASET_SEED)
    batches = [sample_batch(config, BATCH_SIZE, generator) for _ in range(args.batches)]
    n_train = min(batch.n_train for batch in batches)
    contexts = sorted(set(args.contexts))
    if contexts[0] < 1 or contexts[-1] > n_train:
        parser.error(f"--contexts must hold sizes between 1 and {n_train} (the train rows at --rows {args.rows})")

    checkpoints = {"EquiTabPFN": ("equitabpfn", args.equitabpfn), "TabPFN*": ("tabpfn-star", args.tabpfn_star)}
    results = {}
    for label, (arch, path) in checkpoints.items():
        model = load_checkpoint(default_checkpoint(arch) if path == "default" else path)[0].eval()
        results[label] = [context_metrics(model, batches, n) for n in contexts]

    print(f"### Test accuracy / loss vs train rows in the context ({args.batches * BATCH_SIZE} prior "
          f"datasets of {args.rows} rows, seed {DATASET_SEED})\n")
    print("| context rows | " + " | ".join(f"{label} acc. | {label} loss" for label in results) + " |")
    print("|---:|" + "---:|---:|" * len(results))
    for i, n in enumerate(contexts):
        cells = " | ".join(f"{100 * acc:.1f} | {loss:.3f}" for acc, loss in (results[m][i] for m in results))
        print(f"| {n} | {cells} |")
    for label, rows in results.items():
        accuracies = np.array([acc for acc, _ in rows])
        print(f"\n{label}: accuracy {'rises' if np.all(np.diff(accuracies) >= 0) else 'does not rise'} "
              f"monotonically with the context ({100 * accuracies[0]:.1f} -> {100 * accuracies[-1]:.1f}).")


if __name__ == "__main__":
    main()
