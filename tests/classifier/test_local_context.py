"""Local contexts past the context cap: exact class restriction, the same numbers for the same
seed, fit_with_cache, lean persistence, bad settings, and a table past the cap end to end."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from make_fixtures import CHECKPOINTS

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier, evaluate_frame
from equibench.classifier import classifier_for
from equibench.errors import InvalidInputError

EQUI = str(CHECKPOINTS["equitabpfn"])
STAR = str(CHECKPOINTS["tabpfn-star"])
LOCAL = {"context": "local", "local_neighbors": 8, "local_group_size": 10, "local_max_rows": 40}


def _table(n=400, n_classes=6, n_features=3, seed=0, spread=2.5):
    """Rows of ``n_classes`` overlapping blobs, so that local contexts hold some classes only."""
    rng = np.random.RandomState(seed)
    centres = rng.normal(scale=spread, size=(n_classes, n_features))
    y = rng.randint(n_classes, size=n)
    return centres[y] + rng.normal(size=(n, n_features)), y


def _local(make=EquiTabPFNClassifier, checkpoint=EQUI, **params):
    settings = {"checkpoint": checkpoint, "device": "cpu", "random_state": 0, "n_estimators": 1,
                "inference_precision": "float64", **LOCAL, **params}
    return make(**settings)


@pytest.mark.parametrize("make, checkpoint", [(EquiTabPFNClassifier, EQUI), (TabPFNStarClassifier, STAR)])
def test_a_local_context_predicts_as_a_classifier_fitted_on_its_rows(make, checkpoint):
    """A group's probabilities are those of a one-member classifier fitted on its context rows
    alone (its classes numbered 0..k-1), and 0 for every class the context lacks."""
    X, y = _table()
    X_train, y_train, X_test = X[:300], y[:300], X[300:]
    model = _local(make, checkpoint).fit(X_train, y_train)
    proba = model.predict_proba(X_test)
    groups = list(model._groups(model._encoded(X_test)))
    assert len(groups) == 10 and sum(len(g.test_rows) for g in groups) == 100
    restricted = 0
    for group in groups:
        present = np.unique(y_train[group.context_rows])
        absent = np.setdiff1d(np.arange(6), present)
        assert np.all(proba[np.ix_(group.test_rows, absent)] == 0)
        restricted += len(absent) > 0
        alone = make(checkpoint=checkpoint, device="cpu", n_estimators=1, inference_precision="float64",
                     context="subsample").fit(X_train[group.context_rows], y_train[group.context_rows])
        if len(present) == 1:
            assert np.all(proba[group.test_rows, present[0]] == 1)
            continue
        np.testing.assert_allclose(proba[np.ix_(group.test_rows, present)],
                                   alone.predict_proba(X_test[group.test_rows]), atol=1e-10)
    assert restricted >= 3  # the test means something: several contexts lack classes
    np.testing.assert_allclose(proba.sum(axis=1), 1)


def test_local_contexts_are_exactly_equivariant_to_the_class_order():
    X, y = _table()
    permutation = np.random.RandomState(1).permutation(6)
    original = _local().fit(X[:300], y[:300]).predict_proba(X[300:])
    relabelled = _local().fit(X[:300], permutation[y[:300]]).predict_proba(X[300:])
    np.testing.assert_allclose(relabelled[:, permutation], original, atol=1e-12)


def test_the_same_seed_gives_the_same_predictions():
    X, y = _table()
    first = _local(inference_precision="float32", n_estimators=2).fit(X[:300], y[:300]).predict_proba(X[300:])
    second = _local(inference_precision="float32", n_estimators=2).fit(X[:300], y[:300]).predict_proba(X[300:])
    np.testing.assert_array_equal(first, second)


def test_auto_is_local_above_the_cap_and_unchanged_below_it():
    X, y = _table()
    small = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", n_estimators=2).fit(X, y)
    subsample = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", n_estimators=2, context="subsample").fit(X, y)
    assert small.context_ == "subsample"
    np.testing.assert_array_equal(small.predict_proba(X), subsample.predict_proba(X))  # bit-identical
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # local contexts use every row: nothing reduced, nothing to warn
        large = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", max_train_rows=200).fit(X, y)
    assert large.context_ == "local" and len(large.train_labels_) == 400 and large.train_features_ is None
    lifted = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", max_train_rows=200, ignore_pretraining_limits=True)
    assert lifted.fit(X, y).context_ == "subsample"


def test_tabpfn_star_takes_more_classes_than_its_limit_with_local_contexts():
    X, y = _table(n=600, n_classes=14, spread=0.3)
    model = _local(TabPFNStarClassifier, STAR, local_max_rows=120, local_neighbors=30).fit(X[:500], y[:500])
    proba = model.predict_proba(X[500:])
    assert proba.shape == (100, 14) and np.allclose(proba.sum(axis=1), 1) and np.isfinite(proba).all()
    assert model.context_summary(X[500:])["classes"] > 10  # some contexts went through output codes
    assert isinstance(classifier_for(STAR, 14, n_rows=5000), TabPFNStarClassifier)
    assert not isinstance(classifier_for(STAR, 14, n_rows=500), TabPFNStarClassifier)  # ECOC below the cap


def test_context_summary_counts_groups_rows_classes_and_absent_true_classes():
    X, y = _table()
    model = _local().fit(X[:300], y[:300])
    summary = model.context_summary(X[300:], y[300:])
    assert summary["groups"] == 10 and 8 <= summary["rows"] <= 40 and 1 <= summary["classes"] <= 6
    assert 0 <= summary["true_class_absent"] < 0.2
    whole = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu").fit(X[:300], y[:300]).context_summary(X[300:])
    assert whole == {"groups": 1, "rows": 300.0, "classes": 6.0}


def test_fit_with_cache_serves_each_row_from_its_training_cluster():
    X, y = _table()
    model = _local(fit_mode="fit_with_cache").fit(X[:300], y[:300])
    assert len(model.cluster_contexts_) == 30 and len(model.contexts_) == 30  # clusters of 40 // 4 rows
    proba = model.predict_proba(X[300:])
    np.testing.assert_allclose(model.predict_proba(X[300:310]), proba[:10], atol=1e-14)  # a row's prediction is its own
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    assert model.estimate_cache_bytes() == sum(
        context.nbytes() for runs in model.contexts_ for _, context in runs)
    with pytest.raises(InvalidInputError, match=r"30 local contexts of \d+ rows on average.*cache_memory_limit_gb"):
        _local(fit_mode="fit_with_cache", cache_memory_limit_gb=1e-6).fit(X[:300], y[:300])


@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_pickles_and_fit_states_stay_lean_and_predict_the_same(fit_mode, tmp_path):
    X, y = _table()
    model = _local(fit_mode=fit_mode, n_estimators=2).fit(X[:300], y[:300])
    expected = model.predict_proba(X[300:])
    blob = pickle.dumps(model)
    network = len(pickle.dumps(model.model_))  # a checkpoint file's network is pickled (a packaged one by name)
    assert len(blob) - network < 2 * model.train_values_.nbytes + 30_000  # the rows, not the index or the cache
    np.testing.assert_allclose(pickle.loads(blob).predict_proba(X[300:]), expected, atol=1e-12)
    model.save_fit_state(tmp_path / "state.npz")
    loaded = EquiTabPFNClassifier.load_from_fit_state(tmp_path / "state.npz")
    assert loaded.context_ == "local"
    np.testing.assert_allclose(loaded.predict_proba(X[300:]), expected, atol=1e-12)


def test_embeddings_are_refused_with_local_contexts():
    X, y = _table()
    with pytest.raises(InvalidInputError, match="get_embeddings needs one context.*context='subsample'"):
        _local().fit(X[:300], y[:300]).get_embeddings(X[300:])


@pytest.mark.parametrize("params, message", [
    ({"context": "nearest"}, "context must be one of 'auto', 'subsample', 'local', got 'nearest'"),
    ({"local_neighbors": 0}, "local_neighbors must be a positive integer, got 0"),
    ({"local_group_size": 2.5}, "local_group_size must be a positive integer, got 2.5"),
    ({"local_max_rows": -1}, "local_max_rows must be a positive integer, got -1"),
])
def test_bad_local_settings_get_one_clear_error(params, message):
    X, y = _table(n=40)
    with pytest.raises(InvalidInputError, match=message):
        EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", **params).fit(X, y)


def test_a_table_past_the_cap_runs_local_contexts_in_evaluate(tmp_path):
    """A table past the cap through `evaluate`: the default variant uses local contexts, the
    subsample variant the subsample, and each cell records how."""
    X, y = _table(n=4200, n_classes=8, n_features=4, seed=3)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"]).assign(label=y)
    summary = evaluate_frame(frame, "label", tmp_path / "out", methods="equitabpfn", folds=0,
                             contexts=("auto", "subsample"))
    rows = summary.table().set_index("variant")
    assert set(rows["status"]) == {"ok"}
    assert rows.loc["n1", "context"] == "local" and rows.loc["n1-subsample", "context"] == "subsample"
    assert rows.loc["n1", "context_groups"] == 17 and rows.loc["n1", "context_rows"] <= 1000  # 420 test rows / 25
    assert rows.loc["n1-subsample", "context_rows"] == 3000 and rows.loc["n1-subsample", "context_groups"] == 1
    assert rows.loc["n1", "context_classes"] < 8


@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_raw_logits_of_local_contexts_are_minus_infinity_for_absent_classes(fit_mode):
    X, y = _table()
    model = _local(n_estimators=2, fit_mode=fit_mode).fit(X[:300], y[:300])
    raw, proba = model.predict_raw_logits(X[300:]), model.predict_proba(X[300:])
    assert raw.shape == (2, 100, 6)
    np.testing.assert_array_equal(np.isneginf(raw[0]), proba == 0)
    members = np.exp(raw / model.softmax_temperature - np.logaddexp.reduce(raw / model.softmax_temperature, axis=-1,
                                                                           keepdims=True))
    np.testing.assert_allclose(members.mean(axis=0), proba, atol=1e-12)


def test_raw_logits_are_refused_where_tabpfn_star_used_output_codes():
    X, y = _table(n=600, n_classes=14, spread=0.3)
    model = _local(TabPFNStarClassifier, STAR, local_max_rows=120, local_neighbors=30).fit(X[:500], y[:500])
    with pytest.raises(InvalidInputError, match="went through output codes .* have no per-member logits"):
        model.predict_raw_logits(X[500:])
