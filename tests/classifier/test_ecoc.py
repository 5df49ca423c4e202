"""ECOC: codebook construction, class recovery with a logistic base, alignment."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from equibench.classifier.ecoc import ECOCClassifier, draw_codebook, min_hamming_distance
from equibench.errors import InvalidInputError


class _AtMostTen(LogisticRegression):
    """A logistic regression that refuses more than 10 classes, like TabPFN*."""

    def fit(self, X, y, sample_weight=None):
        if len(np.unique(y)) > 10:
            raise ValueError("more than 10 classes")
        return super().fit(X, y, sample_weight)


def test_codebook_rows_name_at_most_nine_classes_and_cover_all():
    rng = np.random.RandomState(0)
    codebook = draw_codebook(30, 10, 2.0, rng)
    assert codebook.shape == (7, 30)  # ceil(2 * 30 / 9)
    for row in codebook:
        named = row[row != 9]
        assert len(named) == 9 and len(set(named)) == 9
    coverage = (codebook != 9).sum(axis=0)
    assert coverage.min() >= 2 and coverage.max() - coverage.min() <= 1  # least covered first
    assert min_hamming_distance(codebook) >= 1


def test_choosing_among_draws_does_not_lower_the_distance():
    X, y = _problem(n_samples=300)
    one = ECOCClassifier(_AtMostTen(max_iter=500), n_draws=1, random_state=0).fit(X, y)
    best = ECOCClassifier(_AtMostTen(max_iter=500), n_draws=30, random_state=0).fit(X, y)
    first_draw = draw_codebook(30, 10, 2.0, np.random.RandomState(0))
    np.testing.assert_array_equal(one.codebook_, first_draw)  # the first draw of the same stream
    assert min_hamming_distance(best.codebook_) >= min_hamming_distance(one.codebook_)


def _problem(n_classes=30, seed=0, n_samples=1500):
    return make_classification(
        n_samples=n_samples, n_features=20, n_informative=15, n_classes=n_classes, n_clusters_per_class=1,
        class_sep=2.0, random_state=seed,
    )


def test_thirty_classes_with_a_logistic_base_recover_the_classes():
    X, y = _problem()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    plain = LogisticRegression(max_iter=2000).fit(X_train, y_train).score(X_test, y_test)
    ecoc = ECOCClassifier(_AtMostTen(max_iter=2000), redundancy=3, random_state=0).fit(X_train, y_train)
    probabilities = ecoc.predict_proba(X_test)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    np.testing.assert_array_equal(ecoc.predict(X_test), ecoc.classes_[probabilities.argmax(axis=1)])
    accuracy = (ecoc.predict(X_test) == y_test).mean()
    assert accuracy > 0.9 * plain and accuracy > 0.5


def test_few_classes_pass_through():
    X, y = _problem(n_classes=4)
    ecoc = ECOCClassifier(_AtMostTen(max_iter=2000), random_state=0).fit(X, y)
    assert ecoc.codebook_.shape == (1, 4)
    plain = LogisticRegression(max_iter=2000).fit(X, y)
    np.testing.assert_allclose(ecoc.predict_proba(X), plain.predict_proba(X), atol=1e-9)


def test_string_labels_and_a_symbol_missing_from_a_row():
    X, y = _problem(n_classes=12)
    labels = np.array([f"c{k:02d}" for k in range(12)])[y]
    ecoc = ECOCClassifier(_AtMostTen(max_iter=2000), random_state=1).fit(X, labels)
    assert set(ecoc.predict(X)) <= set(labels)
    keep = labels != "c03"  # a class absent from the training part
    partial = ECOCClassifier(_AtMostTen(max_iter=2000), random_state=1).fit(X[keep], labels[keep])
    assert partial.predict_proba(X).shape == (len(X), 11)


@pytest.mark.parametrize(
    "params, message",
    [({"max_classes": 1}, r"^The 'max_classes' parameter of ECOCClassifier must be an int in the range \[2, inf\). "
                          r"Got 1 instead.$"),
     ({"redundancy": 0.5}, r"'redundancy' parameter .* must be a float in the range \[1.0, inf\). Got 0.5 instead."),
     ({"n_draws": 0}, r"'n_draws' parameter .* must be an int in the range \[1, inf\). Got 0 instead."),
     ({"estimator": "logistic"}, "'estimator' parameter .* must be an object implementing 'fit' and 'predict_proba'")],
)
def test_bad_parameters(params, message):
    with pytest.raises(InvalidInputError, match=message):
        ECOCClassifier(**{"estimator": LogisticRegression(), **params}).fit(*_problem(n_classes=3))


def test_tabpfn_star_beyond_ten_classes_through_ecoc():
    from make_fixtures import CHECKPOINTS

    from equibench import TabPFNStarClassifier

    X, y = _problem(n_classes=12, n_samples=240)
    star = TabPFNStarClassifier(checkpoint=CHECKPOINTS["tabpfn-star"], n_estimators=1, device="cpu", random_state=0)
    probabilities = ECOCClassifier(star, random_state=0).fit(X, y).predict_proba(X[:5])
    assert probabilities.shape == (5, 12) and np.isfinite(probabilities).all()
