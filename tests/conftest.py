from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def tiny_equi_path() -> Path:
    return DATA / "tiny-equitabpfn.pt"


@pytest.fixture(scope="session")
def tiny_star_path() -> Path:
    return DATA / "tiny-tabpfn-star.pt"
