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
from equibench.pretrain import prior_metrics
from equibench.prior import PriorBatch, PriorConfig, sample_batch

#: Seed of the evaluation datasets, independent of any training seed.
DATASET_SEED = 20_261_123
BATCH_SIZE = 16


def with_context(batch: PriorBatch, n_context: int) -> PriorBatch:
    """The batch with only its first ``n_context`` train rows; datasets whose test rows hold a
    class absent from them are masked out."""
    x_test, y_test = batch.x[:, batch.n_train :], batch.y[:, batch.n_train :]  # (B, M, F), (B, M)
    y_context = batch.y[:, :n_context]  # (B, n)
    seen = torch.nn.functional.one_hot(y_context, batch.n_classes).amax(dim=1).bool()  # (B, K)
    covered = torch.gather(seen, 1, y_test).all(dim=1)  # (B,)
    return batch._replace(
        x=torch.cat([batch.x[:, :n_context], x_test], dim=1), y=torch.cat([y_context, y_test], dim=1),
        n_train=n_context, loss_mask=batch.loss_mask & covered,
    )


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
        results[label] = [prior_metrics(model, [with_context(b, n) for b in batches]) for n in contexts]

    print(f"### Test accuracy / loss vs train rows in the context ({args.batches * BATCH_SIZE} prior "
          f"datasets of {args.rows} rows, seed {DATASET_SEED})\n")
    print("| context rows | " + " | ".join(f"{label} acc. | {label} loss" for label in results) + " |")
    print("|---:|" + "---:|---:|" * len(results))
    for i, n in enumerate(contexts):
        cells = " | ".join(f"{100 * r['prior_accuracy']:.1f} | {r['prior_loss']:.4f}" for r in (results[m][i] for m in results))
        print(f"| {n} | {cells} |")
    for label, rows in results.items():
        accuracies = np.array([r["prior_accuracy"] for r in rows])
        print(f"\n{label}: accuracy {'rises' if np.all(np.diff(accuracies) >= 0) else 'does not rise'} "
              f"monotonically with the context ({100 * accuracies[0]:.1f} -> {100 * accuracies[-1]:.1f}).")


if __name__ == "__main__":
    main()
