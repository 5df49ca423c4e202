from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def benchmark_module():
    """``benchmark_module(name)``: benchmarks/<name>.py loaded from its file. The folder is
    not put on sys.path, where its scripts' names (prior, evaluate, ...) would shadow others."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
