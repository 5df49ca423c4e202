"""The scorecard: its JSON (every field, read back whole) and its Markdown made from the same data."""

from __future__ import annotations

import json

import pandas as pd

from equibench.scoring.bar import COLUMNS, evaluate_criteria
from equibench.scoring.scorecard import Scorecard

from .test_bar import frame


def _card() -> Scorecard:
    scores = frame(bundled={"iris": (0.96, 0.96), "wine": (0.9, 0.98)}, small={"4": (0.9, 0.8), "11": (0.95, 0.7)},
                   large={"7": (0.8, 0.75)}, model="TabPFN*")
    return Scorecard(checkpoint="t.pt", arch="tabpfn-star", scores=scores, criteria=evaluate_criteria(scores, "TabPFN*"),
                     folds=(0,), openml_cache="cache", threads=1, settings={"n_estimators": 4, "feature_transforms": ("none",)},
                     sha256="ab" * 32, command="equibench score t.pt --openml-cache cache --folds 0",
                     date="2026-11-28T12:00:00+00:00", machine="AMD EPYC (2 cores)", seconds=12.5, equibench="0.1.0")


def test_the_json_holds_the_scorecard_and_reads_back():
    card = _card()
    data = json.loads(json.dumps(card.to_dict()))
    assert set(data) == {"format", "checkpoint", "sha256", "arch", "model", "met", "complete", "verdict", "criteria",
                         "settings", "threads", "openml_cache", "folds", "command", "date", "machine", "seconds",
                         "equibench", "scores"}
    assert data["model"] == "TabPFN*" and data["met"] is False and data["complete"] is False  # fold 0 only
    assert data["sha256"] == "ab" * 32 and data["command"].startswith("equibench score t.pt")
    assert data["date"] == "2026-11-28T12:00:00+00:00" and data["machine"] == "AMD EPYC (2 cores)"
    assert [c["name"] for c in data["criteria"]] == ["iris", "wine", "<=10-class median", "<=10-class mean",
                                                     ">10-class mean"]
    assert {c["name"]: c["met"] for c in data["criteria"]}["wine"] is False
    assert set(data["criteria"][0]) >= {"name", "reference", "measured", "comparison", "threshold", "met"}
    assert len(data["scores"]) == 10 and set(data["scores"][0]) == set(COLUMNS)
    assert data["scores"][0] == {"group": "bundled", "task": "iris", "dataset": "iris", "fold": 0, "method": "TabPFN*",
                                 "accuracy": 0.96}
    assert data["settings"] == {"n_estimators": 4, "feature_transforms": ["none"]} and data["folds"] == [0]
    again = Scorecard.from_dict(data)
    assert again.to_dict() == data and again.to_markdown() == card.to_markdown()


def test_the_markdown_says_how_it_was_made_then_the_tables_and_the_verdict():
    text = _card().to_markdown()
    assert text.startswith("# Quality bar of t.pt (TabPFN\\*)\n\nCommand: `equibench score t.pt --openml-cache cache")
    assert "Scored 2026-11-28T12:00:00+00:00 on AMD EPYC (2 cores) in 12 s (equibench 0.1.0); checkpoint sha256 abab" in text
    assert "| wine | 90.0 | 98.0 | -8.0 |" in text and "OpenML cache: cache (3 tasks)." in text
    assert "### <= 10-class tasks of the OpenML cache (mean accuracy over fold 0)" in text
    assert "| 11 | 11 | 95.0 | 70.0 |" in text and "| TabPFN\\* | 92.5 | 92.5 |" in text
    assert "- TabPFN\\* wine: -8.00 points vs LogisticRegression (bar >= -1.0): NOT met" in text
    assert "- TabPFN\\* <=10-class mean: +17.50 points vs KNN (bar > 0.0): met" in text
    assert "does NOT meet the bar: 4 of 5 measured criteria met (OpenML on fold 0 only" in text


def test_without_an_openml_cache_the_verdict_says_what_was_not_measured():
    scores = frame(bundled={"iris": (0.96, 0.96)})
    card = Scorecard(checkpoint="m.pt", arch="equitabpfn", scores=scores, criteria=evaluate_criteria(scores, "EquiTabPFN"))
    assert card.met and not card.complete
    assert "1 of 1 measured criteria met; 3 not measured" in card.verdict()
    text = card.to_markdown()
    assert "Command:" not in text and "criteria were not measured" in text
    assert "EquiTabPFN <=10-class median: not measured" in text
    assert Scorecard.from_dict(card.to_dict()).to_markdown() == text
    assert isinstance(Scorecard.from_dict(card.to_dict()).scores, pd.DataFrame)
