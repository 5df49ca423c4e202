"""The classifiers as TabPFN and scikit-learn users drive them: precision, persistence,
polars frames, limits said out loud, categorical columns, parameters and docstrings."""

from __future__ import annotations

import inspect
import pickle
import pickletools
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from make_fixtures import CHECKPOINTS
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_methods_subset_invariance

from equibench import EquiTabPFNClassifier, PretrainingLimitWarning, TabPFNStarClassifier
from equibench.devices import resolve_precision
from equibench.errors import FitStateError, InvalidInputError
from equibench.model import CheckpointError

from .common import blobs

EQUI = CHECKPOINTS["equitabpfn"]
STAR = CHECKPOINTS["tabpfn-star"]


def _equi(**params):
    return EquiTabPFNClassifier(**{"checkpoint": str(EQUI), "device": "cpu", "random_state": 0, **params})


def _mixed_frame(n=60, seed=0):
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
            "city": rng.choice(["paris", "rome", None], n).astype(object),
            "size": rng.normal(size=n),
            "code": rng.randint(0, 12, n),
        }
    )
    frame.loc[::9, "size"] = np.nan
    y = np.where(frame["colour"] == "red", "yes", "no")
    return frame, y


# -- 3. inference_precision ------------------------------------------------------------


@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_float32_passes_sklearns_subset_invariance_check(fit_mode):
    """Test batches are padded to a minimum row count, so a row's prediction does not
    depend on how many rows are predicted with it (few-row float32 products round apart)."""
    check_methods_subset_invariance("EquiTabPFNClassifier", _equi(n_estimators=2, fit_mode=fit_mode))
    check_methods_subset_invariance("TabPFNStarClassifier", TabPFNStarClassifier(
        checkpoint=str(STAR), device="cpu", random_state=0, n_estimators=2, fit_mode=fit_mode))


def test_one_row_predicts_exactly_as_within_a_batch():
    X, y = blobs()
    model = _equi(n_estimators=1, fit_mode="fit_with_cache").fit(X, y)
    together = model.predict_raw_logits(X[:40])
    alone = np.concatenate([model.predict_raw_logits(X[i : i + 1]) for i in range(40)], axis=1)
    np.testing.assert_allclose(alone, together, rtol=0, atol=1e-7)


def test_float64_passes_sklearns_subset_invariance_check():
    check_methods_subset_invariance("EquiTabPFNClassifier", _equi(n_estimators=2, inference_precision="float64"))
    check_methods_subset_invariance("TabPFNStarClassifier", TabPFNStarClassifier(
        checkpoint=str(STAR), device="cpu", random_state=0, n_estimators=2, inference_precision=torch.float64))


def test_precisions_agree_and_float64_runs_in_float64():
    X, y = blobs()
    single = _equi(inference_precision="float32").fit(X, y)
    double = _equi(inference_precision=torch.float64).fit(X, y)
    p_single, p_double = single.predict_proba(X), double.predict_proba(X)
    assert double.model_.covariate_encoder.weight.dtype == torch.float64
    assert single.model_.covariate_encoder.weight.dtype == torch.float32
    np.testing.assert_allclose(p_single, p_double, atol=1e-5)
    assert np.abs(p_single - p_double).max() > 0  # really another precision
    autocast = _equi(inference_precision="autocast").fit(X, y).predict_proba(X)
    np.testing.assert_allclose(autocast, p_double, atol=0.05)


def test_auto_precision_is_bf16_autocast_on_cuda_only():
    assert resolve_precision("auto", torch.device("cpu")) == (torch.float32, None)
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        assert resolve_precision("auto", torch.device("cuda")) == (torch.float32, torch.bfloat16)
    with pytest.raises(InvalidInputError, match="'inference_precision' parameter .* must be a str among .* or an "
                       "instance of 'torch.dtype'. Got 'float8' instead."):
        _equi(inference_precision="float8").fit(*blobs())
    with pytest.raises(InvalidInputError, match="'inference_precision' parameter .* Got 'int64' instead."):
        _equi(inference_precision=torch.int64).fit(*blobs())


# -- 4. persistence --------------------------------------------------------------------


def test_pickle_of_a_packaged_checkpoint_stores_a_reference():
    X, y = blobs()
    fitted = EquiTabPFNClassifier(device="cpu", random_state=0, n_estimators=2).fit(X, y)
    assert fitted.checkpoint_reference_["packaged"] == "equitabpfn-small.pt"
    network_bytes = sum(t.numel() * t.element_size() for t in fitted.model_.state_dict().values())
    blob = pickle.dumps(fitted)
    assert len(blob) < network_bytes / 10
    strings = [arg for op, arg, _ in pickletools.genops(blob) if op.name in ("SHORT_BINUNICODE", "BINUNICODE")]
    assert strings[strings.index("EquiTabPFNClassifier") - 1] == "equibench.classifier"  # as pickles always named it
    loaded = pickle.loads(blob)
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))
    assert loaded.model_ is not fitted.model_


def test_pickle_refuses_a_packaged_checkpoint_that_changed():
    X, y = blobs()
    fitted = EquiTabPFNClassifier(device="cpu", random_state=0, n_estimators=1).fit(X, y)
    fitted.checkpoint_reference_ = {**fitted.checkpoint_reference_, "sha256": "0" * 64}
    with pytest.raises(CheckpointError, match="has changed since the classifier was fitted"):
        pickle.loads(pickle.dumps(fitted))


def test_pickle_of_a_file_checkpoint_keeps_the_network(tmp_path):
    X, y = blobs()
    copy = tmp_path / "model.pt"
    copy.write_bytes(EQUI.read_bytes())
    fitted = _equi(checkpoint=copy).fit(X, y)
    blob = pickle.dumps(fitted)
    copy.unlink()  # the pickle does not depend on the file
    np.testing.assert_array_equal(pickle.loads(blob).predict_proba(X), fitted.predict_proba(X))


@pytest.mark.parametrize("classifier_class, checkpoint", [(EquiTabPFNClassifier, EQUI), (TabPFNStarClassifier, STAR)])
def test_fit_state_round_trip(tmp_path, classifier_class, checkpoint):
    frame, y = _mixed_frame()
    fitted = classifier_class(
        checkpoint=checkpoint, device="cpu", random_state=0, n_estimators=4, categorical_features=["code"]
    ).fit(frame, y)
    assert any(run.transform.one_hot_ for run in fitted.strategy_.prepared[0])  # the one-hot members are saved and restored too
    path = fitted.save_fit_state(tmp_path / "state.npz")
    with zipfile.ZipFile(path) as archive:  # plain .npy arrays only
        assert all(name.endswith(".npy") for name in archive.namelist())
    with np.load(path, allow_pickle=False) as archive:
        assert "header" in archive.files
    loaded = classifier_class.load_from_fit_state(path)
    np.testing.assert_array_equal(loaded.predict_proba(frame), fitted.predict_proba(frame))
    assert list(loaded.classes_) == list(fitted.classes_) and loaded.classes_.dtype == fitted.classes_.dtype
    assert list(loaded.feature_names_in_) == list(frame.columns)
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(frame[list(reversed(frame.columns))])
    assert Path(loaded.get_params()["checkpoint"]) == Path(checkpoint).resolve()


@pytest.mark.parametrize("transforms, encodings", [("quantile", "onehot"), (("none", "quantile"), ("ordinal",))])
def test_fit_state_keeps_the_preprocessing_parameters_as_given(tmp_path, transforms, encodings):
    X, y = blobs()
    fitted = _equi(n_estimators=2, feature_transforms=transforms, categorical_encodings=encodings).fit(X, y)
    loaded = EquiTabPFNClassifier.load_from_fit_state(fitted.save_fit_state(tmp_path / "state.npz"))
    assert loaded.feature_transforms == transforms and loaded.categorical_encodings == encodings
    np.testing.assert_array_equal(clone(loaded).fit(X, y).predict_proba(X), fitted.predict_proba(X))


def test_fit_state_checks_the_checkpoint_and_the_file(tmp_path):
    X, y = blobs()
    copy = tmp_path / "model.pt"
    copy.write_bytes(EQUI.read_bytes())
    path = _equi(checkpoint=copy).fit(X, y).save_fit_state(tmp_path / "state.npz")
    copy.write_bytes(STAR.read_bytes())
    with pytest.raises(CheckpointError, match="has changed since the classifier was fitted"):
        EquiTabPFNClassifier.load_from_fit_state(path)
    loaded = EquiTabPFNClassifier.load_from_fit_state(path, checkpoint=EQUI)  # explicit checkpoint
    np.testing.assert_array_equal(loaded.predict_proba(X), _equi().fit(X, y).predict_proba(X))
    with pytest.raises(FitStateError, match="load it with that class"):
        TabPFNStarClassifier.load_from_fit_state(path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(FitStateError, match="not a readable fit-state file"):
        EquiTabPFNClassifier.load_from_fit_state(tmp_path / "junk.npz")


def test_fitted_estimators_do_not_share_a_module():
    X, y = blobs()
    first, second = _equi().fit(X, y), _equi().fit(X, y)
    assert first.model_ is not second.model_
    before = second.predict_proba(X)
    first.model_.double()  # what .to(device/dtype) would do in place
    with torch.no_grad():
        first.model_.covariate_encoder.weight.mul_(3.0)
    np.testing.assert_array_equal(second.predict_proba(X), before)
    np.testing.assert_array_equal(_equi().fit(X, y).predict_proba(X), before)  # nor the load cache


# -- 5. polars and other frames ----------------------------------------------------------


def test_polars_feature_names_are_recorded_and_checked():
    pl = pytest.importorskip("polars")
    frame, y = _mixed_frame()
    frame = frame.assign(colour=frame["colour"].astype(str))
    polars_frame = pl.from_pandas(frame)
    fitted = _equi().fit(polars_frame, y)
    assert list(fitted.feature_names_in_) == list(frame.columns)
    np.testing.assert_array_equal(fitted.predict_proba(polars_frame), _equi().fit(frame, y).predict_proba(frame))
    with pytest.raises(ValueError, match="feature names"):
        fitted.predict(polars_frame.select(list(reversed(polars_frame.columns))))


def test_pyarrow_tables_are_frames_too():
    pa = pytest.importorskip("pyarrow")
    X, y = blobs()
    table = pa.table({f"f{j}": X[:, j] for j in range(X.shape[1])})
    fitted = _equi().fit(table, y)
    assert list(fitted.feature_names_in_) == ["f0", "f1", "f2", "f3"]
    np.testing.assert_array_equal(fitted.predict_proba(table), _equi().fit(X, y).predict_proba(X))


# -- 6. limits, categorical_features, Path checkpoints -----------------------------------


def test_subsampling_warns_naming_the_parameter_and_can_be_lifted():
    X, y = blobs(n=120)
    with pytest.warns(PretrainingLimitWarning, match="max_train_rows=50") as caught:
        fitted = _equi(max_train_rows=50, context="subsample").fit(X, y)
    assert len(caught) == 1 and len(fitted.strategy_.labels) == 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lifted = _equi(max_train_rows=50, ignore_pretraining_limits=True).fit(X, y)
        _equi().fit(X, y)  # below the cap: silent
    assert len(lifted.strategy_.labels) == 120


@pytest.mark.parametrize("ignore_pretraining_limits", [False, True])
def test_feature_selection_warns_even_when_the_row_limit_is_lifted(ignore_pretraining_limits):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 130))
    y = (X[:, 5] > 0).astype(int)
    with pytest.warns(PretrainingLimitWarning, match="130 non-constant features exceed the 100"):
        _equi(n_estimators=1, ignore_pretraining_limits=ignore_pretraining_limits).fit(X, y)


def test_categorical_features_mark_integer_codes():
    rng = np.random.RandomState(0)
    codes = rng.randint(0, 8, 90)
    X = np.column_stack([codes, rng.normal(size=90)])
    y = np.isin(codes, [1, 4, 6]).astype(int)  # not monotone in the code
    by_index = _equi(categorical_features=[0]).fit(X, y)
    by_mask = _equi(categorical_features=[True, False]).fit(X, y)
    assert by_index.encoder_.categorical_ == [0] and by_mask.encoder_.categorical_ == [0]
    np.testing.assert_array_equal(by_index.predict_proba(X), by_mask.predict_proba(X))
    unseen = X[:3].copy()
    unseen[:, 0] = 99  # an unseen category becomes missing, like a string category would
    assert np.isnan(by_index.encoder_.transform(unseen)[:, 0]).all()
    as_numbers = _equi().fit(X, y)
    assert not np.isnan(as_numbers.encoder_.transform(unseen)).any()
    assert not np.allclose(by_index.predict_proba(unseen), as_numbers.predict_proba(unseen))
    for bad, message in [([2], "outside 0..1"), ([True], "one entry per column"), (["age"], "that X does not have")]:
        with pytest.raises(ValueError, match=message):
            _equi(categorical_features=bad).fit(X, y)


def test_path_checkpoints_clone_and_serialise_as_openml_flows():
    estimator = _equi(checkpoint=Path(EQUI), inference_precision=torch.float64)
    assert estimator.get_params()["checkpoint"] == str(EQUI)
    assert estimator.get_params()["inference_precision"] == "float64"
    cloned = clone(estimator)
    X, y = blobs()
    np.testing.assert_array_equal(cloned.fit(X, y).predict_proba(X), estimator.fit(X, y).predict_proba(X))
    from openml.extensions.sklearn import SklearnExtension

    flow = SklearnExtension().model_to_flow(estimator)
    assert flow.parameters["checkpoint"] == f'"{EQUI}"'
    assert flow.name == "equibench.classifier.EquiTabPFNClassifier"  # the flow of every equibench version


# -- 7. signatures and docstrings --------------------------------------------------------


@pytest.mark.parametrize("classifier_class", [EquiTabPFNClassifier, TabPFNStarClassifier])
def test_keyword_only_parameters_and_documented_attributes(classifier_class):
    parameters = inspect.signature(classifier_class.__init__).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for name, p in parameters.items() if name != "self")
    with pytest.raises(TypeError):
        classifier_class(str(EQUI))
    doc = inspect.getdoc(EquiTabPFNClassifier)  # the fitted attributes are documented there once
    assert "Attributes\n----------" in doc
    assert "fitted attributes (documented there once" in inspect.getdoc(TabPFNStarClassifier)
    X, y = blobs()
    checkpoint = EQUI if classifier_class is EquiTabPFNClassifier else STAR
    fitted = classifier_class(checkpoint=checkpoint, device="cpu").fit(X, y)
    fitted_attributes = [name for name in vars(fitted) if name.endswith("_") and not name.startswith("_")]
    for name in fitted_attributes:
        assert name in doc, f"{name} is not documented"
    if classifier_class is EquiTabPFNClassifier:
        for name in parameters:
            assert name == "self" or f"{name} :" in doc, f"parameter {name} is not documented"


def test_a_lazy_frame_is_refused_with_what_to_do():
    pl = pytest.importorskip("polars")
    X, y = blobs()
    lazy = pl.DataFrame(X, schema=[f"f{j}" for j in range(X.shape[1])]).lazy()
    with pytest.raises(InvalidInputError, match=r"X is a lazy frame \(polars LazyFrame\).*collect it first"):
        _equi().fit(lazy, y)
    fitted = _equi().fit(lazy.collect(), y)
    with pytest.raises(InvalidInputError, match="collect it first"):
        fitted.predict(lazy)
