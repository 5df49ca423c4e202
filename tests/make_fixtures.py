"""Regenerate the tiny untrained checkpoints and the golden predictions under tests/data/.

    python tests/make_fixtures.py

Run it only when the model or the preprocessing changes on purpose; commit the result.
The checkpoints are seeded and untrained: they exist for golden and contract tests only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.model import ModelCard, build_model, save_checkpoint, size_config

DATA = Path(__file__).parent / "data"
CHECKPOINTS = {"equitabpfn": DATA / "tiny-equitabpfn.pt", "tabpfn-star": DATA / "tiny-tabpfn-star.pt"}
GOLDEN = DATA / "golden.json"
CLASSIFIERS = {"equitabpfn": EquiTabPFNClassifier, "tabpfn-star": TabPFNStarClassifier}


def golden_problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A small fixed 4-class problem with a NaN, an infinity and a constant column."""
    rng = np.random.RandomState(1234)
    X = rng.normal(size=(60, 6))
    X[:, 5] = 3.0
    X[3, 1] = np.nan
    X[7, 2] = np.inf
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 3] > 0.5)
    X_test = rng.normal(size=(8, 6))
    X_test[0, 4] = np.nan
    return X, y, X_test


def golden_predictions(arch: str, checkpoint: Path) -> list[list[float]]:
    X, y, X_test = golden_problem()
    classifier = CLASSIFIERS[arch](checkpoint=checkpoint, n_estimators=3, device="cpu", random_state=0)
    return classifier.fit(X, y).predict_proba(X_test).tolist()


def main() -> None:
    DATA.mkdir(exist_ok=True)
    golden = {}
    for seed, (arch, path) in enumerate(CHECKPOINTS.items()):
        torch.manual_seed(seed)
        model = build_model(arch, size_config("tiny"))
        card = ModelCard(arch=arch, size="tiny", seed=seed, command="python tests/make_fixtures.py",
                         notes="untrained, seeded; for tests only")
        save_checkpoint(model, path, card)
        golden[arch] = golden_predictions(arch, path)
    GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {', '.join(str(p) for p in CHECKPOINTS.values())} and {GOLDEN}")


if __name__ == "__main__":
    main()
