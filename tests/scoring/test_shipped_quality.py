"""The shipped quality: `equibench score` reproduces the committed quality table of the packaged
checkpoints (results/pretraining/quality/step-71316-deeper-6.csv) on a slice of it, each packaged
checkpoint carries its JSON scorecard (what `equibench info` reads), and the committed Markdown
copies are made from those scorecards."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from shared_cache import SHARED_CACHE, needs_shared_cache
from sklearn.datasets import load_iris, load_wine

from equibench.cli.reporting import info_data
from equibench.model import packaged_checkpoints
from equibench.scoring import Scorecard, score_checkpoint

ROOT = Path(__file__).resolve().parents[2]
QUALITY = ROOT / "results" / "pretraining" / "quality"
SHIPPED_TABLE = QUALITY / "step-71316-deeper-6.csv"
SHIPPED_REPORT = QUALITY / "step-71316-deeper-6.md"


def test_each_packaged_checkpoint_carries_its_scorecard():
    verdicts = {}
    for card in info_data()["checkpoints"]:
        quality = card["quality"]
        assert "error" not in quality and quality["source"] == str(Path(card["path"]).with_suffix(".json"))
        assert quality["checkpoint"] == f"model/{card['file']}" and len(quality["criteria"]) == 7
        verdicts[card["file"]] = quality["met"]
    assert verdicts == {"equitabpfn-small.pt": True, "tabpfn-star-small.pt": False}  # TabPFN*: 6 of 7


@pytest.mark.parametrize("checkpoint", packaged_checkpoints(), ids=lambda path: path.stem)
def test_the_committed_markdown_is_made_from_the_packaged_scorecard(checkpoint):
    data = json.loads(checkpoint.with_suffix(".json").read_text())
    assert data["complete"] and data["settings"]["n_estimators"] == 4 and data["threads"] == 1
    assert data["command"].startswith(f"equibench score model/{checkpoint.name} --openml-cache ")
    assert data["command"].endswith(f"--out results/pretraining/quality/{checkpoint.stem}.md --out model/{checkpoint.stem}.json")
    assert (QUALITY / f"{checkpoint.stem}.md").read_text() == Scorecard.from_dict(data).to_markdown()


def test_the_packaged_checkpoint_scores_the_committed_bundled_accuracies():
    card = score_checkpoint("equitabpfn-small", datasets={"iris": load_iris, "wine": load_wine})
    bundled = card.bundled_table()
    committed = {"iris": 96.0, "wine": 98.3}  # the EquiTabPFN column of the committed report's bundled table
    assert "| iris | 96.0 | 95.3 | 96.0 | +0.0 |" in SHIPPED_REPORT.read_text()
    for name, accuracy in committed.items():
        assert round(100 * bundled.loc[name, "EquiTabPFN"], 1) == accuracy


@needs_shared_cache("4", "59")
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
