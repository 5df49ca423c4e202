"""`equibench score` reproduces the shipped checkpoint's committed quality table
(results/pretraining/quality/step-71316-deeper-6.csv) on a slice of it: the packaged
EquiTabPFN's accuracy, fold by fold, on two bundled datasets and two OpenML tasks."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from sklearn.datasets import load_iris, load_wine

from equibench.pretrain import score_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TABLE = ROOT / "results" / "pretraining" / "quality" / "step-71316-deeper-6.csv"
SHIPPED_REPORT = ROOT / "results" / "pretraining" / "quality" / "step-71316-deeper-6.md"
SHARED_CACHE = Path(
    os.environ.get("EQUIBENCH_TEST_OPENML_CACHE", ROOT.parent / "shared" / "data" / "openml-cache")
)


def test_the_packaged_checkpoint_scores_the_committed_bundled_accuracies():
    card = score_checkpoint("equitabpfn-small", datasets={"iris": load_iris, "wine": load_wine})
    bundled = card.bundled_table()
    committed = {"iris": 96.0, "wine": 98.3}  # the EquiTabPFN column of the committed report's bundled table
    assert "| iris | 96.0 | 95.3 | 96.0 | +0.0 |" in SHIPPED_REPORT.read_text()
    for name, accuracy in committed.items():
        assert round(100 * bundled.loc[name, "EquiTabPFN"], 1) == accuracy


@pytest.mark.skipif(not (SHARED_CACHE / "org").is_dir(), reason="the shared OpenML cache is not present")
def test_the_packaged_checkpoint_scores_the_committed_openml_folds():
    tasks, folds = ["4", "59"], (0, 1)  # labor and iris, against KNN
    card = score_checkpoint("equitabpfn-small", SHARED_CACHE, folds=folds, datasets={}, task_ids=tasks)
    measured = card.scores[card.scores.group == "<=10"].astype({"task": str})
    committed = pd.read_csv(SHIPPED_TABLE, dtype={"task": str})
    committed = committed[committed.task.isin(tasks) & committed.fold.isin(folds)
                          & committed.method.isin(["EquiTabPFN", "KNN"])]
    merged = measured.merge(committed, on=["task", "fold", "method"], suffixes=("", "_committed"))
    assert len(merged) == len(tasks) * len(folds) * 2
    assert (merged.accuracy == merged.accuracy_committed).all(), merged
