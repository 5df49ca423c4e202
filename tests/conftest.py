from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist runs one worker per core: one thread each, or the workers' thread pools
    # oversubscribe the cores (a test that needs more threads sets them itself)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    import torch

    torch.set_num_threads(1)

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def tiny_equi_path() -> Path:
    return DATA / "tiny-equitabpfn.pt"


@pytest.fixture(scope="session")
def tiny_star_path() -> Path:
    return DATA / "tiny-tabpfn-star.pt"
