"""Tests of the prior's preview figure (equibench.prior.preview)."""

from __future__ import annotations

from equibench.prior import PriorConfig, preview_prior


def test_preview_writes_png(tmp_path):
    path = preview_prior(tmp_path / "sub" / "prior.png", config=PriorConfig(rows=64), seed=1, n_batches=5)
    assert path == tmp_path / "sub" / "prior.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000


def test_bad_batches_are_refused(tmp_path):
    import pytest

    from equibench.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"`n_batches` must be >= 1, got 0"):
        preview_prior(tmp_path / "prior.png", config=PriorConfig(rows=64), seed=1, n_batches=0)
