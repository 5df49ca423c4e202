"""Error-correcting output codes for classifiers limited to a few classes (TabPFN*: 10).

Each codebook row is one sub-problem with at most ``max_classes`` labels: the
``max_classes - 1`` least-covered classes so far get distinct symbols and every other class
shares the "rest" symbol. Several random codebooks are drawn and the one with the largest
minimum Hamming distance between class codes is kept. A class's score is the mean
log-probability of its symbol over the rows where it is not "rest"; probabilities are the
softmax of the scores.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.utils import check_random_state, column_or_1d
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data

from .inputs import validate_params

_EPS = 1e-12


def min_hamming_distance(codebook: np.ndarray) -> int:
    """Smallest number of rows in which two classes' codes differ; codebook (rows, K)."""
    n_classes = codebook.shape[1]
    if n_classes < 2:
        return codebook.shape[0]
    differ = (codebook[:, :, None] != codebook[:, None, :]).sum(axis=0)  # (K, K)
    return int(differ[~np.eye(n_classes, dtype=bool)].min())


def draw_codebook(n_classes: int, max_classes: int, redundancy: float, rng: np.random.RandomState) -> np.ndarray:
    """One random codebook (rows, K) of symbols in [0, max_classes - 1]; the symbol
    ``max_classes - 1`` is "rest". Every class is covered about ``redundancy`` times."""
    if n_classes <= max_classes:
        return np.arange(n_classes)[None, :]  # the wrapped estimator handles K directly
    named = max_classes - 1
    n_rows = max(int(np.ceil(redundancy * n_classes / named)), int(np.ceil(n_classes / named)))
    coverage = np.zeros(n_classes)
    codebook = np.full((n_rows, n_classes), named)
    for row in range(n_rows):
        # least covered first, ties broken at random
        chosen = np.lexsort((rng.rand(n_classes), coverage))[:named]
        codebook[row, chosen] = rng.permutation(named)
        coverage[chosen] += 1
    return codebook


def best_codebook(n_classes: int, max_classes: int, redundancy: float, n_draws: int,
                  rng: np.random.RandomState) -> np.ndarray:
    """Of ``n_draws`` random codebooks (:func:`draw_codebook`), the one with the largest minimum
    Hamming distance between class codes (the first best on ties): (rows, K)."""
    draws = [draw_codebook(n_classes, max_classes, redundancy, rng) for _ in range(n_draws)]
    return max(draws, key=min_hamming_distance)


def decode(codebook: np.ndarray, symbol_probas, max_classes: int) -> np.ndarray:
    """Each class's score (m, K) from the codebook (rows, K) and, per codebook row, the symbols
    its sub-model saw and their probabilities ``(present (s,), proba (m, s))``: the mean
    log-probability of the class's symbol over the rows where it is not "rest" (the symbol
    ``max_classes - 1`` of a codebook with more classes than ``max_classes``). Their softmax is
    the class probabilities."""
    n_classes = codebook.shape[1]
    rest = max_classes - 1 if n_classes > max_classes else None
    scores, covered = np.zeros((len(symbol_probas[0][1]), n_classes)), np.zeros(n_classes)
    for row, (present, proba) in zip(codebook, symbol_probas):
        symbol_proba = np.full((proba.shape[0], max_classes), _EPS)
        symbol_proba[:, present] = np.maximum(proba, _EPS)
        own = row != rest
        scores[:, own] += np.log(symbol_proba[:, row[own]])
        covered[own] += 1
    return scores / np.maximum(covered, 1)


class ECOCClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Wrap ``estimator`` (which handles at most ``max_classes`` classes) for any K.

    Parameters
    ----------
    estimator : classifier with predict_proba
    max_classes : int, default=10
    redundancy : float, default=2.0
        Average number of codebook rows in which a class has its own symbol.
    n_draws : int, default=20
        Random codebooks drawn; the one with the largest minimum Hamming distance is used.
    random_state : int, RandomState or None
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict_proba"])], "max_classes": [Interval(Integral, 2, None, closed="left")],
        "redundancy": [Interval(Real, 1, None, closed="left")], "n_draws": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, estimator, max_classes: int = 10, redundancy: float = 2.0, n_draws: int = 20,
                 random_state=None):
        self.estimator = estimator
        self.max_classes = max_classes
        self.redundancy = redundancy
        self.n_draws = n_draws
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def fit(self, X, y):
        validate_params(self)
        # X goes to the wrapped estimator unchanged (DataFrames keep their dtypes)
        validate_data(self, X, skip_check_array=True)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        check_classification_targets(y)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        rng = check_random_state(self.random_state)
        self.codebook_ = best_codebook(len(self.classes_), self.max_classes, self.redundancy, self.n_draws, rng)
        self.estimators_ = [clone(self.estimator).fit(X, row[y_encoded]) for row in self.codebook_]
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: the softmax of :meth:`predict_logits`."""
        return np.exp(self.predict_log_proba(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """The log-softmax of :meth:`predict_logits`."""
        scores = self.predict_logits(X)
        scores -= scores.max(axis=1, keepdims=True)
        return scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))

    @available_if(lambda self: hasattr(self.estimator, "get_embeddings"))
    def get_embeddings(self, X) -> np.ndarray:
        """The wrapped classifiers' embeddings stacked, one block per codebook row, along the
        first axis: (sum of their first dimensions, n_samples, ...)."""
        check_is_fitted(self)
        validate_data(self, X, skip_check_array=True, reset=False)
        return np.concatenate([estimator.get_embeddings(X) for estimator in self.estimators_])

    def predict_logits(self, X) -> np.ndarray:
        """Each class's score (n_samples, n_classes): the mean log-probability of its symbol over
        the codebook rows where it has its own symbol; their softmax is :meth:`predict_proba`."""
        check_is_fitted(self)
        validate_data(self, X, skip_check_array=True, reset=False)
        symbol_probas = [(estimator.classes_, estimator.predict_proba(X)) for estimator in self.estimators_]
        return decode(self.codebook_, symbol_probas, self.max_classes)

    def predict(self, X) -> np.ndarray:
        probabilities = self.predict_proba(X)
        return self.classes_[np.argmax(probabilities, axis=1)]


def ecoc_beyond(member: Callable[[int], BaseEstimator], n_classes: int, max_classes: int, n_estimators: int,
                random_state=None) -> BaseEstimator:
    """``member(n_estimators)`` for at most ``max_classes`` classes; beyond, an
    :class:`ECOCClassifier` of single-member sub-models, the ensemble size becoming the ECOC
    redundancy (1 = the fewest codebook rows that cover every class)."""
    if n_classes <= max_classes:
        return member(n_estimators)
    return ECOCClassifier(member(1), max_classes=max_classes, redundancy=float(n_estimators), random_state=random_state)
