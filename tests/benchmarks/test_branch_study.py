"""benchmarks/branch_study.py: the branch commands and the summary table."""

from __future__ import annotations

import json
from pathlib import Path


def _study(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports recipe_study
    return benchmark_module("branch_study")


def test_a_branch_differs_from_the_control_only_by_its_prior_options(benchmark_module, monkeypatch, tmp_path):
    study = _study(benchmark_module, monkeypatch)
    start = tmp_path / "start.pt"
    control = study._pretrain_command("control", "equitabpfn", start, tmp_path / "runs")
    branch = study._pretrain_command("log-features", "equitabpfn", start, tmp_path / "runs")
    assert control[:2] == ["equibench", "pretrain"] and ["--init-from", str(start)] == control[-4:-2]
    assert [a for a in branch if a not in control] == ["--feature-counts", "log-uniform", str(tmp_path / "runs" / "equitabpfn" / "log-features")]
    (tmp_path / "runs" / "equitabpfn" / "control").mkdir(parents=True)
    (tmp_path / "runs" / "equitabpfn" / "control" / "train_state.pt").write_bytes(b"")
    assert study._pretrain_command("control", "tabpfn-star", start, tmp_path / "runs")[2:4] == ["--arch", "tabpfn-star"]
    seed2 = study._pretrain_command("control", "equitabpfn", start, tmp_path / "runs", seed=2)
    assert seed2[seed2.index("--seed") + 1] == "2" and seed2[-1] == str(tmp_path / "runs" / "equitabpfn" / "control-seed2")
    assert control[control.index("--seed") + 1] == "1"
    assert study._pretrain_command("control", "equitabpfn", start, tmp_path / "runs")[-1] == "--resume"  # an unfinished branch resumes


def test_table_gives_percentages_and_the_openml_means_by_class_count(benchmark_module, monkeypatch, tmp_path):
    study = _study(benchmark_module, monkeypatch)
    recipe = benchmark_module("recipe_study")
    few, many = recipe.STUDY_TASKS[:2], recipe.STUDY_TASKS_MANY_CLASSES[:1]
    scores = {"prior_loss": 0.67241, "outlier_prior_loss": 0.69412,
              **{f"{n}_accuracy": 0.94 for n in study.BUNDLED}, **{f"default_{n}_accuracy": 0.96 for n in study.BUNDLED},
              f"task_{few[0]}": 0.5, f"task_{few[1]}": 0.7, f"task_{many[0]}": 0.9}
    for arch, name in (("tabpfn-star", "start"), ("equitabpfn", "control"), ("equitabpfn", "start")):
        (tmp_path / arch).mkdir(exist_ok=True)
        (tmp_path / arch / f"{name}.json").write_text(json.dumps({"name": name, **scores}))
    lines = study.table(tmp_path).splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]
    assert [(r["model"], r["branch"]) for r in rows] == [("EquiTabPFN", "start"), ("EquiTabPFN", "control"),
                                                         ("TabPFN\\*", "start")]  # Markdown-escaped
    row = rows[1]
    assert row["branch"] == "control" and row["prior loss"] == "0.6724" and row["iris (1 member)"] == "94.0"
    assert row["digits (defaults)"] == "96.0"
    assert row["OpenML <=10 mean"] == "60.0" and row["OpenML >10 mean"] == "90.0"
