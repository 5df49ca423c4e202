"""Data frames other than pandas (polars, pyarrow tables, anything narwhals or the
``__dataframe__`` interchange protocol understands) as pandas frames, so that column names
and dtypes reach the classifiers exactly as a pandas frame's would."""

from __future__ import annotations

import pandas as pd

from .errors import InvalidInputError

try:
    import narwhals as nw
except ImportError:  # narwhals comes with scikit-learn >= 1.7; without it, the interchange protocol
    nw = None


def as_pandas(X):
    """``X`` as a pandas DataFrame when it is a non-pandas data frame; anything else
    (pandas frames, arrays, lists) is returned unchanged."""
    if isinstance(X, pd.DataFrame):
        return X
    if nw is not None and nw.dependencies.is_into_dataframe(X):
        return nw.from_native(X, eager_only=True).to_pandas()
    if nw is not None and nw.dependencies.is_into_lazyframe(X):
        raise InvalidInputError(
            f"X is a lazy frame ({type(X).__module__.split('.')[0]} {type(X).__name__}), whose rows are not computed "
            "yet: collect it first, e.g. X.collect()"
        )
    if hasattr(X, "__dataframe__"):
        return pd.api.interchange.from_dataframe(X, allow_copy=True)
    return X
