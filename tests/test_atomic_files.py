"""Atomic writes: errors name the file asked for, never its temporary sibling."""

from __future__ import annotations

import errno
import tempfile

import pytest

from equibench.atomic_files import atomic_write_text


def test_a_folder_without_write_permission_is_named_not_the_temporary_file(tmp_path, monkeypatch):
    def refused(dir, prefix, suffix):  # what a read-only folder gives (root ignores permissions, so simulated)
        raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}k3j2h1g0{suffix}")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(PermissionError) as caught:
        atomic_write_text(tmp_path / "results.csv", "a,b\n")
    message = str(caught.value)
    assert f"cannot write {str(tmp_path / 'results.csv')!r}" in message and "is not writable" in message
    assert ".tmp" not in message and "k3j2h1g0" not in message
