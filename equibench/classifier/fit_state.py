"""A fitted classifier's state without the network's weights, in a safe file format.

The file is an ``.npz`` archive of plain arrays (numbers and fixed-width strings, never
Python objects) plus a JSON header, so ``numpy.load(allow_pickle=False)`` reads it and no
code runs on load. The network is named by reference: a packaged checkpoint by file name,
any other by path, each with its sha256 (see ``checkpoints.checkpoint_reference``).

It is tamper-evident: the header holds the sha256 of every array (its dtype, shape and
bytes) and the ``header_sha256`` array that of the header, all checked at load; an empty,
damaged or edited file, or one with an array missing or added, is a :class:`FitStateError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .._version import __version__
from ..atomic_files import atomic_write
from ..devices import resolve_device
from ..errors import FitStateError, InvalidInputError
from ..preprocessing import MemberSpec, TableEncoder
from .checkpoints import load_model, model_from_reference

FORMAT = "equibench-fit-state"
FORMAT_VERSION = 3  # 3: the context strategy's arrays

#: What load_fit_state reads from the header.
_HEADER_KEYS = ("estimator", "params", "checkpoint", "device", "classes_dtype", "n_features_in", "encoder", "members",
                "context", "digests")


def _digest(array: np.ndarray) -> str:
    """sha256 of an array's dtype, shape and bytes."""
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _jsonable(value):
    """A parameter as JSON; None where it has none (a RandomState object: its draws are already in the state)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return None


def save_fit_state(estimator, path: str | os.PathLike) -> Path:
    """Write ``estimator``'s fitted state to ``path`` (atomically)."""
    params = {name: _jsonable(value) for name, value in estimator.get_params(deep=False).items()
              if name != "checkpoint"}  # the checkpoint is recorded by reference
    classes, classes_dtype = estimator.classes_, estimator.classes_.dtype.str
    if classes.dtype == object:  # saved as fixed-width strings, restored as objects
        if not all(isinstance(c, str) for c in classes):
            raise TypeError("class labels of mixed Python types cannot be saved without pickle; use plain str or numbers")
        classes, classes_dtype = classes.astype(str), "object-str"
    arrays = {"classes": classes}
    if hasattr(estimator, "feature_names_in_"):
        arrays["feature_names_in"] = np.asarray(estimator.feature_names_in_, dtype=str)
    encoder_settings, encoder_arrays = estimator.encoder_.fitted_state()
    arrays.update({f"encoder/{name}": array for name, array in encoder_arrays.items()})
    strategy = estimator.strategy_
    members = [dataclasses.asdict(spec) for spec in strategy.specs]
    arrays.update({f"strategy/{name}": array for name, array in strategy.state_arrays().items()})
    arrays.update(estimator._fit_state_arrays())
    context = {"strategy": strategy.name, "seed": strategy.seed}
    header = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "equibench_version": __version__,
        "estimator": type(estimator).__name__, "params": params,
        "checkpoint": estimator.checkpoint_reference_, "device": str(estimator.device_),
        "classes_dtype": classes_dtype, "n_features_in": int(estimator.n_features_in_),
        "encoder": encoder_settings, "members": members, "context": context,
        "digests": {name: _digest(np.asarray(array)) for name, array in arrays.items()},
    }
    text = json.dumps(header)
    arrays["header"] = np.asarray(text)
    arrays["header_sha256"] = np.asarray(hashlib.sha256(text.encode()).hexdigest())

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)

    return atomic_write(path, write)


def _read(path: Path) -> tuple[dict, dict]:
    """The header and the arrays of a fit-state file, every digest checked."""
    if not path.is_file():
        raise FitStateError(f"fit-state file {str(path)!r} does not exist")
    if path.stat().st_size == 0:
        raise FitStateError(f"fit-state file {str(path)!r} is empty (0 bytes); write it again with save_fit_state")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        text = str(arrays.pop("header"))
        header = json.loads(text)
    except ValueError as error:
        if "allow_pickle" not in str(error):
            raise _unreadable(path, error) from error
        raise FitStateError(  # numpy's own advice (allow_pickle=True) would run code from the file: not given
            f"{str(path)!r} is not a readable fit-state file: it holds pickled Python objects, which a fit state never "
            "does (it is not one, or it was altered), and loading them could run code; write it with save_fit_state"
        ) from error
    except (OSError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise _unreadable(path, error) from error
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise FitStateError(f"{str(path)!r} is not an equibench fit state; write it with save_fit_state")
    if header.get("format_version") != FORMAT_VERSION:
        raise FitStateError(
            f"{str(path)!r} is a fit state of format version {header.get('format_version')!r}, this equibench reads "
            f"version {FORMAT_VERSION}: fit the classifier again and save it with save_fit_state"
        )
    _check_digests(path, text, header, arrays)
    return header, arrays


def _unreadable(path: Path, error: Exception) -> FitStateError:
    return FitStateError(
        f"{str(path)!r} is not a readable fit-state file ({type(error).__name__}: {error}); write it with save_fit_state"
    )


def _check_digests(path: Path, text: str, header: dict, arrays: dict) -> None:
    """Refuse a header or array that is not as save_fit_state wrote it."""
    written = arrays.pop("header_sha256", None)
    if written is None or str(written) != hashlib.sha256(text.encode()).hexdigest():
        raise FitStateError(f"{str(path)!r} is damaged: its header does not match its sha256; write it again")
    missing_keys = [key for key in _HEADER_KEYS if key not in header]
    if missing_keys or not isinstance(header["digests"], dict):
        raise FitStateError(f"{str(path)!r} is damaged: its header lacks {missing_keys or ['digests']}; write it again")
    digests = header["digests"]
    missing, extra = sorted(set(digests) - set(arrays)), sorted(set(arrays) - set(digests))
    if missing or extra:
        raise FitStateError(
            f"{str(path)!r} is damaged: "
            + "; ".join(([f"arrays {missing} are missing"] if missing else []) + ([f"arrays {extra} were added"] if extra else []))
            + "; write it again with save_fit_state"
        )
    changed = [name for name, array in arrays.items() if _digest(array) != digests[name]]
    if changed:
        raise FitStateError(f"{str(path)!r} is damaged: arrays {changed} do not match their sha256; write it again")


def load_fit_state(cls, path: str | os.PathLike, checkpoint=None, device: str | None = None):
    """A fitted ``cls`` from ``path``; see ``PFNClassifier.load_from_fit_state``."""
    path = Path(path)
    header, arrays = _read(path)
    if header["estimator"] != cls.__name__:
        raise FitStateError(f"{str(path)!r} holds a fitted {header['estimator']}; load it with that class")
    params = dict(header["params"])
    if device is not None:
        params["device"] = device
    for name in ("feature_transforms", "categorical_encodings"):
        if isinstance(params.get(name), list):  # a tuple stored as JSON; a single name stays a string
            params[name] = tuple(params[name])
    estimator = cls(**params)
    if checkpoint is None:
        if header["checkpoint"] is None:
            raise FitStateError(
                f"{str(path)!r} was fitted with a model object, not a checkpoint file; pass checkpoint=... to load it"
            )
        estimator.model_, source = model_from_reference(header["checkpoint"])
        estimator.checkpoint, estimator.checkpoint_reference_ = str(source), header["checkpoint"]
    else:
        estimator.checkpoint = checkpoint
        estimator.model_, estimator.checkpoint_reference_ = load_model(checkpoint, cls._arch)
    if device is None:
        try:  # the saved device where torch can use it here, else the CPU
            device = str(resolve_device(header["device"]))
        except InvalidInputError:
            device = "cpu"
    estimator.device_ = resolve_device(device)
    classes = arrays["classes"]
    estimator.classes_ = classes.astype(object) if header["classes_dtype"] == "object-str" else classes
    estimator.n_features_in_ = header["n_features_in"]
    if "feature_names_in" in arrays:
        estimator.feature_names_in_ = arrays["feature_names_in"].astype(object)
    estimator._restore_fit_state_arrays(arrays)
    saved = {name.removeprefix("encoder/"): array for name, array in arrays.items() if name.startswith("encoder/")}
    estimator.encoder_ = TableEncoder.from_fitted_state(header["encoder"], saved)
    estimator.inference_precision_, estimator.batch_size_ = estimator.inference_precision, estimator.batch_size
    context = header["context"]
    strategy = estimator._new_strategy(context["strategy"], len(estimator.classes_))
    saved = {name.removeprefix("strategy/"): array for name, array in arrays.items() if name.startswith("strategy/")}
    strategy.fit(saved["values"], saved["labels"], estimator.encoder_.category_counts(),
                 [MemberSpec(**spec) for spec in header["members"]], int(context["seed"]), saved)
    strategy.prepare(estimator._runner())
    estimator.strategy_, estimator.context_ = strategy, strategy.name
    return estimator
