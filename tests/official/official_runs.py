"""Official run folders made from the official-network fixture (written by
make_official_fixture.py from the authors' code), as the authors' training writes them."""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import numpy as np
import torch
import yaml

FIXTURE = Path(__file__).parents[1] / "data" / "official-equitabpfn-fixture.npz"
NETWORK_CASES = ("three_in_ten", "twelve", "nans")


def load_fixture() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as arrays:
        return {name: arrays[name] for name in arrays.files}


def official_state(official: dict) -> dict[str, torch.Tensor]:
    """The official weights by official name, float32 as the authors' training saves them."""
    return collections.OrderedDict((name.removeprefix("param/"), torch.from_numpy(value).float())
                                   for name, value in official.items() if name.startswith("param/"))


def write_run(folder: Path, official: dict, state: dict | None = None, config: dict | None = None,
              payload=None) -> Path:
    """An official run folder: metadata/config.yaml and artifacts/ckpt/last.pickle, pickled as the
    authors' trainer does (``{"model", "optimizer", "scheduler", "epoch"}``)."""
    state = official_state(official) if state is None else state
    config = yaml.safe_load(str(official["config_yaml"])) if config is None else config
    (folder / "metadata").mkdir(parents=True)
    (folder / "artifacts" / "ckpt").mkdir(parents=True)
    (folder / "metadata" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    optimizer = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.zeros(2)}},
                 "param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999), "params": [0]}]}
    scheduler = {"_milestones": [10], "last_epoch": 3, "_schedulers": [{"base_lrs": [1e-4]}]}
    payload = {"model": state, "optimizer": optimizer, "scheduler": scheduler, "epoch": 3} if payload is None else payload
    with open(folder / "artifacts" / "ckpt" / "last.pickle", "wb") as stream:
        pickle.dump(payload, stream)
    return folder


def case_inputs(official: dict, case: str, dtype=torch.float64):
    """A network case in equibench's batch-first layout: x_train, y_train, x_test, K and the
    official logits of the K real classes (B, M, K)."""
    x = torch.from_numpy(official[f"{case}/x"]).to(dtype)  # (N+M, B, F), sequence first
    y = torch.from_numpy(official[f"{case}/y"]).long()  # (N+M, B)
    n_train, n_classes = int(official[f"{case}/n_train"]), int(official[f"{case}/n_classes"])
    logits = torch.from_numpy(official[f"{case}/logits"])[:, :, :n_classes].transpose(0, 1)  # (B, M, K)
    return x[:n_train].transpose(0, 1), y[:n_train].T, x[n_train:].transpose(0, 1), n_classes, logits
