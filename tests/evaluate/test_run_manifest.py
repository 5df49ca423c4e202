"""manifest.json of a results folder: the resume checks and the invocation records."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from equibench.errors import InvalidInputError
from equibench.evaluate.run_manifest import (
    finish_invocation,
    methods_to_rerun,
    read_manifest,
    recorded_settings,
    start_invocation,
)

SAVED = {"seed": 0, "tables": {"file-a": "1"}, "suite": {"name": "s", "tasks": ["1", "2"]},
         "methods": {"knn": {"threads_per_cell": 1},
                     "equitabpfn": {"checkpoint_sha256": "aa", "max_train_rows": 3000, "threads_per_cell": 1}}}
BOTH = ("knn", "equitabpfn")


def _current(threads: int = 1, checkpoint: str = "aa", **changes) -> dict:
    methods = {"knn": {"threads_per_cell": threads},
               "equitabpfn": {"checkpoint_sha256": checkpoint, "max_train_rows": 3000, "threads_per_cell": threads}}
    return {**json.loads(json.dumps(SAVED)), "methods": methods, **changes}


def test_the_same_settings_resume_with_nothing_to_rerun():
    assert methods_to_rerun(Path("out"), SAVED, _current(), set(BOTH), BOTH, rerun_changed=False) == []


def test_changed_method_settings_are_refused_or_rerun():
    current = _current(checkpoint="bb")
    with pytest.raises(InvalidInputError, match="results of equitabpfn made with different settings.*rerun_changed"):
        methods_to_rerun(Path("out"), SAVED, current, set(BOTH), BOTH, rerun_changed=False)
    assert methods_to_rerun(Path("out"), SAVED, current, set(BOTH), BOTH, rerun_changed=True) == ["equitabpfn"]
    assert methods_to_rerun(Path("out"), SAVED, current, {"knn"}, BOTH, rerun_changed=False) == []  # no cells to replace


def test_methods_outside_the_run_are_never_replaced():
    current = _current(threads=2, checkpoint="bb")
    assert methods_to_rerun(Path("out"), SAVED, current, set(BOTH), ("knn",), rerun_changed=True) == ["knn"]
    recorded = recorded_settings(SAVED, current, kept={"equitabpfn"})
    assert recorded["methods"] == {"knn": {"threads_per_cell": 2}, "equitabpfn": SAVED["methods"]["equitabpfn"]}


@pytest.mark.parametrize("changes, message", [
    ({"seed": 1}, "made with seed 0; rerun with it"),
    ({"tables": {"file-a": "2"}}, "results of file-a made from table files whose content has changed"),
    ({"threads": 2}, "made with `threads_per_cell` 1 .*rerun them all with `threads_per_cell` 2"),
])
def test_what_no_rerun_can_fix_or_only_a_full_one(changes, message):
    with pytest.raises(InvalidInputError, match=message):
        methods_to_rerun(Path("out"), SAVED, _current(**changes), {"knn"}, BOTH, rerun_changed=False)


def test_another_thread_count_reruns_every_stored_method_of_the_run():
    assert methods_to_rerun(Path("out"), SAVED, _current(threads=2), set(BOTH), BOTH,
                            rerun_changed=True) == ["equitabpfn", "knn"]


@dataclass(frozen=True)
class _Config:
    suite: str = "demo"


def test_invocations_are_recorded_and_finished(tmp_path):
    first = start_invocation(tmp_path, _Config(), SAVED, n_cells=6, n_pending=6)
    finish_invocation(tmp_path, first, Counter(ok=6))
    second = start_invocation(tmp_path, _Config(), SAVED, n_cells=6, n_pending=0)
    finish_invocation(tmp_path, second, Counter(), interrupted=True)
    manifest = read_manifest(tmp_path / "manifest.json")
    assert manifest["settings"] == SAVED and [run["config"] for run in manifest["invocations"]] == [{"suite": "demo"}] * 2
    assert manifest["invocations"][0]["written"] == {"ok": 6} and "finished" in manifest["invocations"][0]
    assert "interrupted" in manifest["invocations"][1] and manifest["invocations"][1]["versions"]["numpy"]


def test_several_recorded_thread_counts_are_named():
    saved = {**SAVED, "methods": {"knn": {"threads_per_cell": 1},
                                  "equitabpfn": {**SAVED["methods"]["equitabpfn"], "threads_per_cell": 2}}}
    with pytest.raises(InvalidInputError, match="made with `threads_per_cell` 1, 2 .*rerun each method with its own"):
        methods_to_rerun(Path("out"), saved, _current(threads=3), set(BOTH), BOTH, rerun_changed=False)


def test_the_missing_tasks_of_an_invocation_are_recorded(tmp_path):
    index = start_invocation(tmp_path, _Config(), SAVED, n_cells=6, n_pending=6)
    finish_invocation(tmp_path, index, Counter(ok=3), missing=["3", "9"])
    run = read_manifest(tmp_path / "manifest.json")["invocations"][index]
    assert run["written"] == {"ok": 3} and run["missing_tasks"] == ["3", "9"]
