"""The scikit-learn classifiers: estimator contract, equivariance, golden values, bad inputs."""

from __future__ import annotations

import json
import typing

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from make_fixtures import CHECKPOINTS, GOLDEN, golden_predictions
from sklearn.linear_model import LogisticRegression
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.classifier.ecoc import ECOCClassifier
from equibench.classifier.estimator import PFNClassifier
from equibench.errors import InvalidInputError
from equibench.model import CheckpointError, TooManyClassesError
from equibench.preprocessing import ensemble_members, expand_one_hot, one_hot_columns

from .common import blobs

EQUI = str(CHECKPOINTS["equitabpfn"])
STAR = str(CHECKPOINTS["tabpfn-star"])

_UNTRAINED_STAR = (
    "the tiny TabPFN* checkpoint is untrained, so its MLP decoder cannot fit the training "
    "set; the untrained EquiTabPFN passes thanks to its non-parametric decoder"
)


def _expected_failures(estimator):
    if isinstance(estimator, TabPFNStarClassifier) and estimator.context != "local":  # local: nearly pure contexts
        return {"check_classifiers_train": _UNTRAINED_STAR}
    return {}


@parametrize_with_checks(
    [
        EquiTabPFNClassifier(checkpoint=EQUI, n_estimators=2, device="cpu", random_state=0),
        EquiTabPFNClassifier(checkpoint=EQUI, n_estimators=2, device="cpu", inference_precision="float64", random_state=0),
        TabPFNStarClassifier(checkpoint=STAR, n_estimators=2, device="cpu", random_state=0),
        # local contexts forced (small clusters, so that the checks' tables get several), both fit modes
        *[make(checkpoint=checkpoint, n_estimators=2, device="cpu", random_state=0, context="local", fit_mode=mode,
               local_cluster_size=10, local_neighbors=5, local_max_rows=40)
          for make, checkpoint, mode in ((EquiTabPFNClassifier, EQUI, "low_memory"),
                                         (EquiTabPFNClassifier, EQUI, "fit_with_cache"),
                                         (TabPFNStarClassifier, STAR, "fit_with_cache"))],
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_estimator_contract(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", [EquiTabPFNClassifier(checkpoint=EQUI, device="cpu"),
                                       TabPFNStarClassifier(checkpoint=STAR, device="cpu"),
                                       ECOCClassifier(LogisticRegression())], ids=lambda e: type(e).__name__)
def test_parameter_constraints_cover_every_parameter_and_refuse_bad_values(estimator):
    """scikit-learn's own check: a constraint per parameter, and fit refuses a bad type or value with
    scikit-learn's InvalidParameterError (ours is also an InvalidInputError)."""
    check_param_validation(type(estimator).__name__, estimator)


def test_literal_parameters_and_their_constraints_name_the_same_choices():
    hints = typing.get_type_hints(PFNClassifier.__init__)
    literal = {name: next(typing.get_args(arg) for arg in (hint, *typing.get_args(hint))
                          if typing.get_origin(arg) is typing.Literal)
               for name, hint in hints.items() if typing.Literal in (typing.get_origin(h) for h in (hint, *typing.get_args(hint)))}
    assert {"fit_mode", "context", "preprocessing", "cache_precision", "inference_precision"} <= set(literal)
    for name, values in literal.items():
        options = [c for c in PFNClassifier._parameter_constraints[name] if hasattr(c, "options")]
        assert [tuple(c.options) for c in options] == [values], name


def _equi(**params):
    return EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", random_state=0, **params)


def _star(**params):
    return TabPFNStarClassifier(checkpoint=STAR, device="cpu", random_state=0, **params)


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
def test_golden_predictions_of_the_tiny_checkpoints(arch):
    """Regenerate with `python tests/make_fixtures.py` after an intended change."""
    expected = np.asarray(json.loads(GOLDEN.read_text())[arch])
    actual = np.asarray(golden_predictions(arch, CHECKPOINTS[arch]))
    np.testing.assert_allclose(actual, expected, atol=1e-5)


def test_string_labels_in_another_order_give_the_same_probabilities():
    X, y = blobs(n_classes=4)
    names = np.array(["ant", "bee", "cat", "dog"])
    renamed = np.array(["zebra", "yak", "bee", "ant"])  # a different alphabetical order
    first = _equi(n_estimators=3).fit(X, names[y])
    second = _equi(n_estimators=3).fit(X, renamed[y])
    p_first = pd.DataFrame(first.predict_proba(X), columns=first.classes_)
    p_second = pd.DataFrame(second.predict_proba(X), columns=second.classes_)
    p_second = p_second.rename(columns=dict(zip(renamed, names)))[list(first.classes_)]
    assert list(first.classes_) != list(pd.Series(renamed[np.argsort(names)]))
    np.testing.assert_allclose(p_first.to_numpy(), p_second.to_numpy(), atol=1e-6)
    assert set(first.predict(X)) <= set(names)


def test_tabpfn_star_class_order_matters():
    X, y = blobs(n_classes=4)
    first = _star(n_estimators=1).fit(X, y).predict_proba(X)
    second = _star(n_estimators=1).fit(X, (y + 1) % 4).predict_proba(X)
    assert np.abs(np.roll(second, -1, axis=1) - first).max() > 1e-3


@pytest.mark.parametrize("make", [_equi, _star])
def test_same_seed_same_numbers_and_members_differ(make):
    X, y = blobs()
    a = make(n_estimators=4).fit(X, y).predict_proba(X)
    b = make(n_estimators=4).fit(X, y).predict_proba(X)
    single = make(n_estimators=1).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - single).max() > 1e-6  # the ensemble really averages different members
    np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize("make", [_equi, pytest.param(_star, marks=pytest.mark.slow)])
def test_batch_size_does_not_change_predictions(make):
    X, y = blobs()
    full = make(batch_size=1024).fit(X, y).predict_proba(X)
    one_at_a_time = make(batch_size=1).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(one_at_a_time, full, atol=1e-6)


def test_softmax_temperature_sharpens():
    X, y = blobs()
    cold = _equi(softmax_temperature=0.2, n_estimators=1).fit(X, y).predict_proba(X)
    warm = _equi(softmax_temperature=5.0, n_estimators=1).fit(X, y).predict_proba(X)
    assert cold.max(axis=1).mean() > warm.max(axis=1).mean()


def test_max_train_rows_takes_a_stratified_subsample():
    X, y = blobs(n=300, n_classes=3)
    y = np.where(np.arange(300) < 240, 0, y)  # class 0 dominates: 260 of 300 rows
    with pytest.warns(UserWarning, match="max_train_rows=60"):
        model = _equi(max_train_rows=60, context="subsample").fit(X, y)
    counts = np.bincount(model.strategy_.labels, minlength=3)
    # a floor of 10 each, then the other 30 rows in proportion to the 250, 10 and 10 rows left
    assert counts.tolist() == [38, 11, 11]
    assert model.predict_proba(X).shape == (300, 3)


def test_missing_and_infinite_values():
    X, y = blobs()
    X[::7, 0] = np.nan
    X[3, 1], X[5, 2] = np.inf, -np.inf
    X_test = X[:10].copy()
    X_test[0, :] = np.nan
    for make in (_equi, _star):
        probabilities = make(n_estimators=2).fit(X, y).predict_proba(X_test)
        assert np.isfinite(probabilities).all()


def test_constant_columns_are_dropped():
    X, y = blobs()
    X = np.column_stack([X, np.full(len(X), 7.0)])
    model = _equi().fit(X, y)
    assert model.encoder_.columns_.tolist() == [0, 1, 2, 3]
    everything_constant = _equi().fit(np.ones((20, 3)), np.arange(20) % 2)
    assert everything_constant.predict_proba(np.ones((4, 3))).shape == (4, 2)


@pytest.mark.parametrize("make", [_equi, _star])
def test_a_single_class_is_predicted_with_certainty(make):
    X, _ = blobs()
    model = make().fit(X, np.full(len(X), "only"))
    np.testing.assert_allclose(model.predict_proba(X), 1.0)
    assert (model.predict(X) == "only").all()


def test_a_single_training_row():
    model = _equi().fit([[1.0, 2.0]], ["a"])
    assert model.predict([[0.0, 0.0], [5.0, 5.0]]).tolist() == ["a", "a"]


def test_zero_rows_is_an_error():
    with pytest.raises(ValueError, match="0 sample"):
        _equi().fit(np.zeros((0, 3)), np.zeros(0))
    with pytest.raises(ValueError, match="0 sample"):
        _equi().fit(pd.DataFrame({"a": []}), np.zeros(0))
    X, y = blobs()
    with pytest.raises(ValueError, match="0 sample"):
        _equi().fit(X, y).predict(np.zeros((0, 4)))


def test_mismatched_column_count_at_predict():
    X, y = blobs()
    model = _equi().fit(X, y)
    with pytest.raises(ValueError, match="expecting 4 features"):
        model.predict(X[:, :3])


def test_500_features_are_reduced_by_mutual_information():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(120, 500))
    y = (X[:, 321] > 0).astype(int)
    with pytest.warns(UserWarning, match="500 non-constant features exceed the 100"):
        model = _equi().fit(X, y)
    assert len(model.encoder_.columns_) == 100 and 321 in model.encoder_.columns_
    assert model.predict_proba(X[:5]).shape == (5, 2)
    again = _equi(ignore_pretraining_limits=True).fit(X, y)  # same selection, without the warning
    np.testing.assert_array_equal(again.encoder_.columns_, model.encoder_.columns_)


@pytest.mark.filterwarnings("ignore:The number of unique classes")
def test_a_thousand_classes_natively():
    rng = np.random.RandomState(0)
    y = np.arange(1000)
    X = rng.normal(size=(1000, 3))
    model = _equi(n_estimators=1).fit(X, y)
    probabilities = model.predict_proba(X[:4])
    assert probabilities.shape == (4, 1000)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-9)


def test_tabpfn_star_refuses_eleven_classes_with_a_pointer_to_ecoc():
    X, y = blobs(n=110, n_classes=11)
    with pytest.raises(TooManyClassesError, match="ECOC"):
        _star().fit(X, y)


def test_pandas_categorical_object_and_boolean_columns():
    rng = np.random.RandomState(0)
    n = 60
    frame = pd.DataFrame(
        {
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
            "city": rng.choice(["paris", "rome", None], n).astype(object),
            "flag": rng.rand(n) > 0.5,
            "size": rng.normal(size=n),
            "numbers_as_text": rng.randint(0, 5, n).astype(str).astype(object),
        }
    )
    y = (frame["colour"] == "red").to_numpy()
    model = _equi().fit(frame, y)
    assert list(model.feature_names_in_) == list(frame.columns)
    new = frame.head(5).copy()
    new["city"] = ["tokyo", None, "rome", "paris", "oslo"]  # unseen categories
    assert np.isfinite(model.predict_proba(new)).all()
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame[list(reversed(frame.columns))])


def test_object_array_with_strings():
    X = np.array([["a", 1.0], ["b", 2.0], ["a", 3.0], ["c", 4.0]] * 5, dtype=object)
    y = np.array([0, 1, 0, 1] * 5)
    assert _equi().fit(X, y).predict(X).shape == (20,)


def test_sparse_input_is_refused():
    X, y = blobs()
    with pytest.raises(TypeError, match="dense data is required"):
        _equi().fit(scipy.sparse.csr_matrix(X), y)


def test_ensemble_members_cycle_through_the_feature_transforms():
    rng = np.random.RandomState(0)
    members = ensemble_members(5, 7, 3, rng, class_shifts=True, transforms=("quantile", "none"))
    assert [m.variant for m in members] == ["quantile", "none", "quantile", "none", "quantile"]
    assert (members[0].feature_shift, members[0].class_shift) == (0, 0)
    assert all(0 <= m.feature_shift < 7 and 0 <= m.class_shift < 3 for m in members)


def test_ensemble_members_pair_each_transform_with_each_encoding():
    members = ensemble_members(
        5, 7, 3, np.random.RandomState(0), class_shifts=False, transforms=("none", "quantile"),
        encodings=("ordinal", "onehot"),
    )
    assert [(m.variant, m.categorical_encoding) for m in members] == [
        ("none", "ordinal"), ("quantile", "ordinal"), ("none", "onehot"), ("quantile", "onehot"), ("none", "ordinal"),
    ]


def test_one_hot_expands_columns_of_three_or_more_categories_within_the_feature_budget():
    counts = [0, 5, 2, 3, 60]  # numeric, 5 categories, binary, 3 categories, 60 categories
    assert list(one_hot_columns(counts, f_max=70)) == [1, 3, 4]  # 5 + 2 + 4 + 59 = 70 columns
    assert one_hot_columns(counts, f_max=69) == {1: 5, 3: 3}  # the 60-category column would not fit
    assert one_hot_columns([0, 0], f_max=100) == {}
    values = np.array([[0.5, 2.0, 1.0], [1.5, np.nan, 0.0]])  # column 1: codes of 3 categories, NaN missing
    expanded = expand_one_hot(values, {1: 3})
    np.testing.assert_array_equal(expanded, [[0.5, 0, 0, 1, 1.0], [1.5, 0, 0, 0, 0.0]])


def test_default_members_see_categories_as_codes_and_as_one_hot_columns():
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"x": rng.normal(size=120), "site": pd.Categorical(rng.choice(list("abcdefgh"), 120)),
                          "flag": rng.choice(["yes", "no"], 120)})
    y = frame["site"].isin(["b", "e", "g"]).to_numpy().astype(int)  # no order in the site names
    fitted = _equi().fit(frame, y)
    assert [spec.categorical_encoding for spec in fitted.strategy_.specs] == ["ordinal", "ordinal", "onehot", "onehot"]
    assert [tuple(run.x_train.shape) for run in fitted.strategy_.prepared[0]] == [(120, 3)] * 2 + [(120, 10)] * 2  # site: 8 columns
    unseen = frame.iloc[:2].assign(site=pd.Categorical(["z", "a"]))
    codes = fitted.encoder_.transform(unseen)
    assert np.isnan(codes[0, 1]) and not np.isnan(codes[1, 1])
    one_hot = fitted.strategy_.prepared[0][2].transform.one_hot_
    block = expand_one_hot(codes, one_hot)[:, 1:9]  # the site's one-hot columns, before normalisation
    np.testing.assert_array_equal(block, [[0] * 8, [1] + [0] * 7])
    ordinal_only = _equi(categorical_encodings="ordinal").fit(frame, y)
    assert {spec.categorical_encoding for spec in ordinal_only.strategy_.specs} == {"ordinal"}
    assert not np.allclose(ordinal_only.predict_proba(frame), fitted.predict_proba(frame))


def test_numeric_tables_are_unaffected_by_the_categorical_encodings():
    X, y = blobs()
    np.testing.assert_array_equal(
        _equi(categorical_encodings="ordinal").fit(X, y).predict_proba(X), _equi().fit(X, y).predict_proba(X)
    )


def test_feature_transforms_choose_each_members_preprocessing():
    X, y = blobs()
    X = np.exp(X)  # skewed features, so that the quantile map changes the inputs
    plain = _equi(n_estimators=1).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(_equi(n_estimators=1, feature_transforms="none").fit(X, y).predict_proba(X), plain)
    quantile = _equi(n_estimators=1, feature_transforms=["quantile"]).fit(X, y)
    assert [spec.variant for spec in quantile.strategy_.specs] == ["quantile"]
    assert not np.allclose(quantile.predict_proba(X), plain)
    only_plain = _equi(n_estimators=3, feature_transforms=("none",)).fit(X, y)
    assert [spec.variant for spec in only_plain.strategy_.specs] == ["none"] * 3


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_estimators": 0}, r"^The 'n_estimators' parameter of EquiTabPFNClassifier must be an int in the range "
                              r"\[1, inf\). Got 0 instead.$"),
        ({"batch_size": 2.5}, r"'batch_size' parameter .* must be an int in the range \[1, inf\). Got 2.5 instead."),
        ({"max_train_rows": -1}, r"'max_train_rows' parameter .* must be an int in the range \[1, inf\). Got -1"),
        ({"softmax_temperature": 0}, r"'softmax_temperature' parameter .* must be a float in the range \(0.0, inf\)"),
        ({"softmax_temperature": float("nan")}, "'softmax_temperature' parameter .* Got nan instead."),
        ({"ignore_pretraining_limits": "yes"}, "'ignore_pretraining_limits' parameter .* must be an instance of 'bool'"),
        ({"feature_transforms": ("none", "box-cox")}, "feature_transforms must be a non-empty sequence"),
        ({"feature_transforms": ()}, "feature_transforms must be a non-empty sequence"),
        ({"feature_transforms": 3}, "feature_transforms must be a non-empty sequence"),
        ({"categorical_encodings": ("ordinal", "binary")}, "categorical_encodings must be a non-empty sequence"),
        ({"categorical_encodings": []}, "categorical_encodings must be a non-empty sequence"),
        ({"device": "tpu"}, "`device` must be"),
        ({"checkpoint": 42}, "'checkpoint' parameter of EquiTabPFNClassifier must be an instance of 'str', an instance of "
                             "'os.PathLike' or an instance of 'torch.nn.modules.module.Module'. Got 42 instead."),
        ({"checkpoint": "/no/such/file.pt"}, "does not exist"),
        ({"checkpoint": STAR}, "holds a tabpfn-star model, not equitabpfn"),
    ],
)
def test_bad_parameters(params, message):
    X, y = blobs()
    with pytest.raises(InvalidInputError, match=message):
        EquiTabPFNClassifier(**{"checkpoint": EQUI, "device": "cpu", **params}).fit(X, y)


def test_default_checkpoint_is_a_clear_error_until_one_ships(monkeypatch, tmp_path):
    monkeypatch.setattr("equibench.model.checkpoint.packaged_checkpoint_dir", lambda: tmp_path)
    X, y = blobs()
    with pytest.raises(CheckpointError, match="no pretrained equitabpfn checkpoint ships"):
        EquiTabPFNClassifier().fit(X, y)


def test_a_model_object_is_accepted():
    from equibench.model import load_checkpoint

    model, _ = load_checkpoint(EQUI)
    X, y = blobs()
    from_object = EquiTabPFNClassifier(checkpoint=model, device="cpu", random_state=0).fit(X, y)
    np.testing.assert_array_equal(from_object.predict_proba(X), _equi().fit(X, y).predict_proba(X))


@pytest.mark.parametrize("classifier_class", [EquiTabPFNClassifier, TabPFNStarClassifier])
def test_packaged_checkpoints_load_by_default_and_fit_training_data(classifier_class):
    """The shipped pretrained checkpoints pass sklearn's training-accuracy check offline."""
    from sklearn.utils.estimator_checks import check_classifiers_train

    classifier = classifier_class(device="cpu", random_state=0)
    check_classifiers_train(classifier_class.__name__, classifier)
    X, y = blobs()
    assert classifier.fit(X, y).model_.arch == classifier_class._arch
