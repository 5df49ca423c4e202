"""Fixtures of the official-checkpoint tests: the official-network fixture and its converted checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from official_runs import load_fixture, write_run


@pytest.fixture(scope="session")
def official() -> dict[str, np.ndarray]:
    return load_fixture()


@pytest.fixture(scope="session")
def converted(official, tmp_path_factory) -> Path:
    """The fixture's official run converted to an equibench checkpoint."""
    from equibench.official import convert_official

    folder = tmp_path_factory.mktemp("official")
    return convert_official([write_run(folder / "run", official)], folder / "converted.pt")
