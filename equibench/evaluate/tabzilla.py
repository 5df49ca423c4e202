"""TabZilla's preprocessing, fitted on a fold's train part only.

Numeric columns: mean imputation, then a quantile transform to a normal distribution.
Categorical columns: ordinal codes (missing and unseen levels share the code -1), then
standardised so that distance- and gradient-based methods see them on the numeric scale.
Above ``max_features`` columns, the ``max_features`` with the highest mutual information with
the label are kept. Columns that are empty in the train part are dropped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_selection import SelectKBest, mutual_info_classif
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder, QuantileTransformer, StandardScaler


class TabZillaPreprocessor:
    """``fit(X, y)`` on the train rows, then ``transform(X)`` -> (n, F_used) float32."""

    def __init__(self, categorical: np.ndarray, max_features: int = 100, seed: int = 0):
        self.categorical = np.asarray(categorical, dtype=bool)  # (F,)
        self.max_features = max_features
        self.seed = seed

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> TabZillaPreprocessor:
        columns = np.arange(X.shape[1])
        numeric, categorical = columns[~self.categorical], columns[self.categorical]
        self.encoder_ = ColumnTransformer(
            [
                ("numeric", Pipeline([
                    ("impute", SimpleImputer(strategy="mean")),
                    ("quantile", QuantileTransformer(
                        output_distribution="normal", n_quantiles=min(1000, len(X)), random_state=self.seed)),
                ]), numeric),
                ("categorical", Pipeline([
                    ("codes", OrdinalEncoder(
                        handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1)),
                    ("scale", StandardScaler()),
                ]), categorical),
            ],
            sparse_threshold=0.0,
        )
        encoded = self.encoder_.fit_transform(self._frame(X), y)
        self.selector_ = None
        if encoded.shape[1] > self.max_features:
            self.selector_ = SelectKBest(
                lambda X, y: mutual_info_classif(X, y, random_state=self.seed), k=self.max_features,
            ).fit(encoded, y)
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        encoded = self.encoder_.transform(self._frame(X))
        if self.selector_ is not None:
            encoded = self.selector_.transform(encoded)
        return np.ascontiguousarray(encoded, dtype=np.float32)  # (n, F_used)

    def _frame(self, X: pd.DataFrame) -> pd.DataFrame:
        """Numeric columns as floats and categorical ones as objects (NaN for missing)."""
        frame = X.set_axis(range(X.shape[1]), axis=1)  # a copy: X is left as it is
        for column in frame.columns:
            if self.categorical[column]:
                values = frame[column].astype(object)
                frame[column] = values.astype(str).where(values.notna(), np.nan)
            else:
                frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
        return frame
