"""Local contexts past the context cap: exact class restriction, a row's answer its own (alone,
in any batch, in any order, in either fit mode), parameters read at fit, the estimator
contract, lean persistence, bad settings, and a table past the cap end to end."""

from __future__ import annotations

import json
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
LOCAL = {"context": "local", "local_neighbors": 8, "local_cluster_size": 10, "local_max_rows": 40}


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
    strategy = model.strategy_
    routes = strategy.route(model._encoded(X_test))
    assert len(strategy.contexts) == 30 and sum(len(rows) for _, rows in routes) == 100
    restricted = 0
    for index, test_rows in routes:
        context_rows = strategy.contexts[index]
        present = np.unique(y_train[context_rows])
        absent = np.setdiff1d(np.arange(6), present)
        assert np.all(proba[np.ix_(test_rows, absent)] == 0)
        restricted += len(absent) > 0
        alone = make(checkpoint=checkpoint, device="cpu", n_estimators=1, inference_precision="float64",
                     context="subsample").fit(X_train[context_rows], y_train[context_rows])
        if len(present) == 1:
            assert np.all(proba[test_rows, present[0]] == 1)
            continue
        np.testing.assert_allclose(proba[np.ix_(test_rows, present)], alone.predict_proba(X_test[test_rows]),
                                   atol=1e-10)
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
    assert large.context_ == "local" and len(large.strategy_.labels) == 400 and not large.strategy_.prepared
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
    assert 5 <= summary["groups"] <= 30 and 8 <= summary["rows"] <= 40 and 1 <= summary["classes"] <= 6
    assert 0 <= summary["true_class_absent"] < 0.2
    whole = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu").fit(X[:300], y[:300]).context_summary(X[300:])
    assert whole == {"groups": 1, "rows": 300.0, "classes": 6.0}


def test_fit_with_cache_encodes_the_clusters_a_predict_reaches_and_keeps_them():
    X, y = _table()
    model = _local(fit_mode="fit_with_cache").fit(X[:300], y[:300])
    assert len(model.strategy_.contexts) == 30 and not model.strategy_.cached_contexts()  # nothing encoded at fit
    proba = model.predict_proba(X[300:])
    reached = len(model.strategy_.route(model._encoded(X[300:])))
    one_class = sum(len(np.unique(y[:300][model.strategy_.contexts[i]])) == 1
                    for i, _ in model.strategy_.route(model._encoded(X[300:])))
    assert len(model.strategy_.cached_contexts()) == reached - one_class  # one member per reached context
    np.testing.assert_array_equal(model.predict_proba(X[300:]), proba)  # from the cache: the same numbers
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    everything = _local(fit_mode="fit_with_cache").fit(X[:300], y[:300])
    everything.predict_proba(X)  # reaches more clusters
    assert model.estimate_cache_bytes() >= sum(context.nbytes() for context in everything.strategy_.cached_contexts())
    with pytest.raises(InvalidInputError, match=r"30 local contexts of \d+ rows on average.*cache_memory_limit_gb"):
        _local(fit_mode="fit_with_cache", cache_memory_limit_gb=1e-6).fit(X[:300], y[:300])


@pytest.mark.parametrize("make, checkpoint", [(EquiTabPFNClassifier, EQUI), (TabPFNStarClassifier, STAR)])
@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_a_row_predicts_the_same_alone_in_any_batch_and_in_any_order(make, checkpoint, fit_mode):
    """In float32, as users run it: the rows one at a time, all together, shuffled, and two
    different batches around them all give each row the same probabilities (within 1e-6)."""
    X, y = _table(n=500)
    model = _local(make, checkpoint, fit_mode=fit_mode, inference_precision="float32", n_estimators=2)
    model.fit(X[:400], y[:400])
    X_test = X[400:]
    together = model.predict_proba(X_test)
    alone = np.vstack([model.predict_proba(X_test[i : i + 1]) for i in range(len(X_test))])
    order = np.random.RandomState(0).permutation(len(X_test))
    shuffled = np.empty_like(together)
    shuffled[order] = model.predict_proba(X_test[order])
    mixed = model.predict_proba(np.vstack([X[:50], X_test[:20]]))[50:]  # beside training rows
    for other in (alone, shuffled):
        np.testing.assert_allclose(other, together, rtol=0, atol=1e-6)
    np.testing.assert_allclose(mixed, together[:20], rtol=0, atol=1e-6)


@pytest.mark.parametrize("make, checkpoint", [(EquiTabPFNClassifier, EQUI), (TabPFNStarClassifier, STAR)])
def test_the_fit_modes_give_the_same_predictions(make, checkpoint):
    """fit_with_cache only skips recomputing the contexts' side: float32 rounding apart (1e-6),
    the same numbers; in float64, to 1e-12."""
    X, y = _table(n=500)
    for precision, tolerance in (("float32", 1e-6), ("float64", 1e-12)):
        plain = _local(make, checkpoint, inference_precision=precision, n_estimators=2).fit(X[:400], y[:400])
        cached = _local(make, checkpoint, inference_precision=precision, n_estimators=2,
                        fit_mode="fit_with_cache").fit(X[:400], y[:400])
        np.testing.assert_allclose(cached.predict_proba(X[400:]), plain.predict_proba(X[400:]), rtol=0,
                                   atol=tolerance)
        np.testing.assert_allclose(cached.predict_proba(X[400:]), plain.predict_proba(X[400:]), rtol=0,
                                   atol=tolerance)  # the second predict, from the cache


def test_parameters_act_at_the_next_fit_only():
    """set_params after fit changes no prediction until the next fit (scikit-learn's contract);
    switching fit_mode then refitting works (it used to crash at predict)."""
    X, y = _table(n=500)
    model = _local(n_estimators=2).fit(X[:400], y[:400])
    before = model.predict_proba(X[400:])
    model.set_params(local_neighbors=3, local_cluster_size=50, local_max_rows=9, softmax_temperature=3.0,
                     context="subsample", fit_mode="fit_with_cache", n_estimators=1)
    np.testing.assert_array_equal(model.predict_proba(X[400:]), before)
    assert model.context_ == "local" and not model.strategy_.cached
    model.fit(X[:400], y[:400])
    assert model.context_ == "subsample" and model.strategy_.cached
    assert np.abs(model.predict_proba(X[400:]) - before).max() > 1e-3
    model.set_params(fit_mode="fit_with_cache", context="local", n_estimators=2, local_neighbors=8,
                     local_cluster_size=10, local_max_rows=40, softmax_temperature=0.8).fit(X[:400], y[:400])
    np.testing.assert_allclose(model.predict_proba(X[400:]), before, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_tables_with_nothing_to_learn_from_predict_the_training_prior(fit_mode):
    """One training row, or columns that never vary: no neighbour search to make, one context."""
    one = _local(fit_mode=fit_mode).fit(np.array([[1.0, 2.0]]), ["a"])
    np.testing.assert_array_equal(one.predict(np.array([[5.0, 6.0], [np.nan, 1.0]])), ["a", "a"])
    y = np.random.RandomState(0).choice(["a", "b"], size=300, p=[0.7, 0.3])
    constant = _local(fit_mode=fit_mode).fit(np.ones((300, 3)), y)
    proba = constant.predict_proba(np.random.RandomState(1).normal(size=(5, 3)))
    assert proba.shape == (5, 2) and np.allclose(proba, proba[0]) and proba[0, 0] > proba[0, 1]


def test_values_beyond_float32_are_far_not_fatal():
    X, y = _table()
    model = _local().fit(X[:300], y[:300])
    rows = X[300:305].copy()
    rows[0, 0], rows[1, 1] = 1e300, -1e300
    proba = model.predict_proba(rows)
    assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    np.testing.assert_allclose(proba[2:], model.predict_proba(X[302:305]), atol=1e-12)


@pytest.mark.parametrize("fit_mode", ["low_memory", "fit_with_cache"])
def test_pickles_and_fit_states_stay_lean_and_predict_the_same(fit_mode, tmp_path):
    X, y = _table()
    model = _local(fit_mode=fit_mode, n_estimators=2).fit(X[:300], y[:300])
    expected = model.predict_proba(X[300:])
    blob = pickle.dumps(model)
    network = len(pickle.dumps(model.model_))  # a checkpoint file's network is pickled (a packaged one by name)
    assert len(blob) - network < 2 * model.strategy_.values.nbytes + 30_000  # the rows, not the index or the cache
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
    ({"context": "nearest"}, r"'context' parameter of EquiTabPFNClassifier must be a str among \{'auto', 'subsample', "
                             r"'local'\}. Got 'nearest' instead."),
    ({"local_neighbors": 0}, r"'local_neighbors' parameter .* must be an int in the range \[1, inf\). Got 0 instead."),
    ({"local_cluster_size": 2.5}, r"'local_cluster_size' parameter .* must be an int in the range \[1, inf\). Got 2.5"),
    ({"local_max_rows": -1}, r"'local_max_rows' parameter .* must be an int in the range \[1, inf\). Got -1 instead."),
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
    local, subsample = (json.loads(rows.loc[variant, "diagnostics"]) for variant in ("n1", "n1-subsample"))
    assert local["context"] == "local" and subsample["context"] == "subsample"
    assert 5 <= local["context_groups"] <= 31 and local["context_rows"] <= 1000  # 3780 rows / 125
    assert subsample["context_rows"] == 3000 and subsample["context_groups"] == 1
    assert local["context_classes"] < 8


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


def test_a_long_predict_shows_its_progress_unless_quieted(monkeypatch, capsys):
    """Plain lines on a stderr that is not a terminal once a predict is projected to take long
    (the threshold lowered to 0 s here); none inside quiet_predictions (evaluate's cells)."""
    from equibench.classifier import predict_progress

    monkeypatch.setattr(predict_progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    X, y = _table()
    model = _local(batch_size=16).fit(X[:300], y[:300])
    model.predict_proba(X[300:])
    assert "predict test rows: 100/100 done" in capsys.readouterr().err
    with predict_progress.quiet_predictions():
        model.predict_proba(X[300:])
    assert capsys.readouterr().err == ""
