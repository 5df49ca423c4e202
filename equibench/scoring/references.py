"""The bar's reference models, unfitted scikit-learn pipelines: KNN (k = 9) and
LogisticRegression on mean-imputed, standardised inputs, categorical columns one-hot encoded.

They are not the registry's ``knn`` and ``linear-model`` methods: those see TabZilla's
preprocessing (a quantile transform, standardised ordinal codes; :mod:`equibench.evaluate.tabzilla`)
and fit with other settings, so they would move the bar the shipped checkpoints were measured
against.
"""

from __future__ import annotations

import numpy as np
from sklearn.compose import make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from ..errors import InvalidInputError
from .bar import BUNDLED_REFERENCE, LARGE_REFERENCE, SMALL_REFERENCE

#: Neighbours of the KNN reference.
KNN_NEIGHBORS = 9
#: Iterations of the LogisticRegression references.
LOGISTIC_MAX_ITER = 2000


def standardised(estimator, categorical: np.ndarray | None = None):
    """Impute, one-hot encode the ``categorical`` columns (a boolean mask), standardise the
    others, then ``estimator``."""
    if categorical is None or not np.asarray(categorical).any():
        return make_pipeline(SimpleImputer(), StandardScaler(), estimator)
    categorical = np.asarray(categorical, dtype=bool)
    columns = make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")), categorical),
        (make_pipeline(SimpleImputer(), StandardScaler()), ~categorical),
        sparse_threshold=0.0,
    )
    return make_pipeline(columns, estimator)


def reference_model(name: str, categorical: np.ndarray | None = None):
    """The reference model ``name`` (:data:`~.bar.BUNDLED_REFERENCE`, :data:`~.bar.SMALL_REFERENCE`
    or :data:`~.bar.LARGE_REFERENCE`), unfitted, with its preprocessing."""
    if name == SMALL_REFERENCE:
        return standardised(KNeighborsClassifier(n_neighbors=KNN_NEIGHBORS), categorical)
    if name in (BUNDLED_REFERENCE, LARGE_REFERENCE):
        return standardised(LogisticRegression(max_iter=LOGISTIC_MAX_ITER), categorical)
    raise InvalidInputError(f"unknown reference model {name!r}; choose one of "
                            f"{[BUNDLED_REFERENCE, SMALL_REFERENCE, LARGE_REFERENCE]}")
