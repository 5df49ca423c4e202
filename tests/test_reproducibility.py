"""Same seed, same numbers, whatever the backend: the neural baselines, whose trainings
amplify the rounding of floating-point reductions, give identical rows serially (in a
process with more threads than its cells), with ``--jobs 2`` and with ``--scheduler local:2``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.backends import DaskBackend, LocalBackend

pytest.importorskip("distributed")
pytest.importorskip("pytorch_tabnet")
pytest.importorskip("rtdl_revisiting_models")

COLUMNS = ["task_id", "fold", "method", "variant", "status", "accuracy", "auc", "f1", "log_loss", "n_train", "threads"]


def _rows(directory: Path) -> pd.DataFrame:
    return pd.read_csv(directory / "results.csv")[[*COLUMNS, "proba_file"]].reset_index(drop=True)


@pytest.mark.slow
def test_tabnet_and_rtdl_resnet_give_identical_rows_on_every_backend(tmp_path):
    config = EvaluateConfig(suite="demo", methods=("tabnet", "rtdl-resnet"), folds=(0,))
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # a laptop's `--jobs 1` process: its cells still run on one thread
    try:
        with threadpool_limits(2):
            evaluate(config, tmp_path / "serial", progress=False)
    finally:
        torch.set_num_threads(before)
    with LocalBackend(2) as backend:
        evaluate(config, tmp_path / "jobs", backend=backend, progress=False)
    with DaskBackend.connect("local:2") as backend:
        evaluate(config, tmp_path / "dask", backend=backend, progress=False)
    serial = _rows(tmp_path / "serial")
    assert len(serial) == 12 and set(serial.status) == {"ok"} and set(serial.threads) == {1}
    for other in ("jobs", "dask"):
        rows = _rows(tmp_path / other)
        pd.testing.assert_frame_equal(rows[COLUMNS], serial[COLUMNS], check_exact=True)
        for mine, theirs in zip(serial.proba_file, rows.proba_file):
            np.testing.assert_array_equal(np.load(tmp_path / "serial" / mine)["proba"],
                                          np.load(tmp_path / other / theirs)["proba"])
