"""Tests of the one-configuration-per-process runner (benchmarks/isolated.py)."""

from __future__ import annotations


def test_run_isolated_returns_the_last_json_line_or_the_error(benchmark_module, tmp_path):
    isolated = benchmark_module("isolated")
    script = tmp_path / "child.py"
    script.write_text(
        "import json, sys\n"
        "spec = json.loads(sys.argv[2])\n"
        "if spec['fail']:\n"
        "    sys.exit('ValueError: no such size')\n"
        "print('warming up')\n"
        "print(json.dumps({'seconds': spec['n'] * 0.5, 'flag': sys.argv[1]}))\n"
    )
    assert isolated.run_isolated(str(script), {"n": 3, "fail": False}) == {"seconds": 1.5, "flag": "--one"}
    assert isolated.run_isolated(str(script), {"n": 3, "fail": True}) == {"error": "ValueError: no such size"}


def test_cell_formats_or_shows_the_error(benchmark_module):
    isolated = benchmark_module("isolated")
    assert isolated.cell({"seconds": 1.23456}, "seconds", ".2f") == "1.23"
    assert isolated.cell({"error": "skipped"}, "seconds", ".2f") == "skipped"


def test_memory_readings_see_a_large_block(benchmark_module):
    isolated = benchmark_module("isolated")
    before = isolated.current_rss_mb()
    block = b"\x01" * (128 * 2**20)  # written, so resident
    held = isolated.current_rss_mb()
    assert held - before > 100
    assert isolated.peak_rss_mb() > held - 8  # the kernel updates the high-water mark lazily
    del block
