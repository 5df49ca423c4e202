"""Tests of the shared --record helper (benchmarks/recording.py)."""

from __future__ import annotations

import argparse
import datetime

import torch


def test_command_is_the_invocation_without_record(benchmark_module, monkeypatch):
    recording = benchmark_module("recording")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    argv = ["/somewhere/benchmarks/prior.py", "--seconds", "2", "--record", "--note", "two words"]
    assert recording.command(argv) == "python benchmarks/prior.py --seconds 2 --note 'two words'"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert recording.command(argv[:3]) == "OMP_NUM_THREADS=1 python benchmarks/prior.py --seconds 2"


def test_section_names_script_date_machine_and_command(benchmark_module, monkeypatch):
    recording = benchmark_module("recording")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    text = recording.section("Synthetic prior", "| a |\n|---|\n| 1 |\n", argv=["benchmarks/prior.py", "--record"],
                             date=datetime.date(2026, 11, 24))
    lines = text.splitlines()
    assert lines[:2] == ["", "## Synthetic prior (`benchmarks/prior.py`), 2026-11-24"]
    machine = lines[3]
    assert machine.startswith("Machine: ") and machine.endswith("Command: `python benchmarks/prior.py`.")
    assert f"torch {torch.__version__}" in machine and " cores, " in machine
    assert text.endswith("\n\n| a |\n|---|\n| 1 |\n")


def test_publish_prints_and_appends_only_when_recording(benchmark_module, tmp_path, capsys):
    recording = benchmark_module("recording")
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n")
    recording.publish("\n## first\n", record=False, path=path)
    assert path.read_text() == "# Benchmarks\n"
    recording.publish("\n## first\n", record=True, path=path)
    recording.publish("\n## second\n", record=True, path=path)
    assert path.read_text() == "# Benchmarks\n\n## first\n\n## second\n"
    assert capsys.readouterr().out.count("## first") == 2


def test_record_flag(benchmark_module):
    recording = benchmark_module("recording")
    parser = argparse.ArgumentParser()
    recording.add_record_flag(parser)
    assert parser.parse_args([]).record is False and parser.parse_args(["--record"]).record is True
