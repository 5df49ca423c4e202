"""Fit-state files are tamper-evident: a sha256 per array and of the header, checked at load.
Each way a file can be damaged is a FitStateError naming what is wrong."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from make_fixtures import CHECKPOINTS

from equibench import EquiTabPFNClassifier
from equibench.errors import FitStateError


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A fit-state file and its arrays as numpy reads them."""
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(30, 3)), np.arange(30) % 2
    path = tmp_path_factory.mktemp("state") / "state.npz"
    EquiTabPFNClassifier(checkpoint=CHECKPOINTS["equitabpfn"], device="cpu", n_estimators=2).fit(X, y).save_fit_state(path)
    with np.load(path, allow_pickle=False) as archive:
        return path, {name: archive[name] for name in archive.files}


def _rewrite(path, arrays: dict, header_edit=None):
    """Write ``arrays`` as a well-formed archive; ``header_edit`` changes the header and
    recomputes its sha256 (as someone editing it by hand with numpy would)."""
    arrays = dict(arrays)
    if header_edit is not None:
        header = json.loads(str(arrays["header"]))
        header_edit(header)
        text = json.dumps(header)
        arrays["header"], arrays["header_sha256"] = np.asarray(text), np.asarray(hashlib.sha256(text.encode()).hexdigest())
    with open(path, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return path


def _load(path):
    return EquiTabPFNClassifier.load_from_fit_state(path)


def test_the_saved_file_loads_and_records_a_digest_per_array(saved):
    path, arrays = saved
    header = json.loads(str(arrays["header"]))
    assert header["format_version"] == 3
    assert set(header["digests"]) == set(arrays) - {"header", "header_sha256"}
    assert _load(path).n_features_in_ == 3


def test_an_empty_file(tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(FitStateError, match="is empty \\(0 bytes\\)"):
        _load(tmp_path / "empty.npz")


def test_a_flipped_byte(saved, tmp_path):
    path, _ = saved
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01  # inside a compressed array
    (tmp_path / "flipped.npz").write_bytes(bytes(data))
    with pytest.raises(FitStateError, match="not a readable fit-state file"):
        _load(tmp_path / "flipped.npz")


def test_a_missing_array(saved, tmp_path):
    _, arrays = saved
    without = {name: array for name, array in arrays.items() if name != "strategy/values"}
    with pytest.raises(FitStateError, match=r"is damaged: arrays \['strategy/values'\] are missing"):
        _load(_rewrite(tmp_path / "missing.npz", without))


def test_an_added_array(saved, tmp_path):
    _, arrays = saved
    with pytest.raises(FitStateError, match=r"arrays \['extra'\] were added"):
        _load(_rewrite(tmp_path / "added.npz", {**arrays, "extra": np.zeros(2)}))


def test_a_changed_array(saved, tmp_path):
    _, arrays = saved
    changed = {**arrays, "strategy/labels": 1 - arrays["strategy/labels"]}  # well-formed, just not what was saved
    with pytest.raises(FitStateError, match=r"arrays \['strategy/labels'\] do not match their sha256"):
        _load(_rewrite(tmp_path / "changed.npz", changed))


def test_an_edited_header(saved, tmp_path):
    _, arrays = saved
    header = json.loads(str(arrays["header"]))
    header["params"]["softmax_temperature"] = 0.1
    edited = {**arrays, "header": np.asarray(json.dumps(header))}  # its sha256 left as written
    with pytest.raises(FitStateError, match="its header does not match its sha256"):
        _load(_rewrite(tmp_path / "edited.npz", edited))
    with pytest.raises(FitStateError, match=r"its header lacks \['members'\]"):
        _load(_rewrite(tmp_path / "no-members.npz", arrays, header_edit=lambda h: h.pop("members")))


def test_a_file_of_the_previous_format_is_refused_with_what_to_do(saved, tmp_path):
    _, arrays = saved
    older = _rewrite(tmp_path / "v2.npz", arrays, header_edit=lambda h: h.update(format_version=2))
    with pytest.raises(FitStateError, match="format version 2, this equibench reads version 3: fit the classifier again"):
        _load(older)


def test_a_file_holding_python_objects_is_refused_without_numpys_unsafe_advice(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, header=np.array({"format": "equibench-fit-state"}, dtype=object))
    with pytest.raises(FitStateError, match="holds pickled Python objects, which a fit state never does") as caught:
        EquiTabPFNClassifier.load_from_fit_state(path)
    assert "allow_pickle" not in str(caught.value)
