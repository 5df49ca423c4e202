"""Turning user tables into PFN inputs: encoding, column filtering, feature selection,
per-member transforms (feature map, categorical encoding) and stratified subsampling.
Everything is fitted on train rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from sklearn.feature_selection import mutual_info_classif
from sklearn.preprocessing import OrdinalEncoder, QuantileTransformer
from sklearn.utils import check_array

from .errors import InvalidInputError
from .normalize import apply_normalization, fit_normalization, rescale_by_used_features

#: Feature transforms an ensemble member may apply before normalisation: "none" (the raw
#: values) or "quantile" (a quantile map to a normal distribution).
FEATURE_TRANSFORMS = ("none", "quantile")

#: How an ensemble member presents categorical columns: "ordinal" (the category's code) or
#: "onehot" (one 0/1 column per category, for columns of 3 or more categories, fewest
#: categories first, while the table stays within the network's f_max columns).
CATEGORICAL_ENCODINGS = ("ordinal", "onehot")


def _is_categorical(column: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column))


def _as_frame(X) -> pd.DataFrame:
    """A DataFrame view of a 2-D table; object columns that hold only numbers become float,
    datetimes become seconds since 1970-01-01 (UTC for time-zone aware ones) and durations
    seconds; complex columns are refused."""
    if isinstance(X, pd.DataFrame):
        frame = X.reset_index(drop=True)
    else:
        frame = pd.DataFrame(check_array(X, dtype=None, ensure_all_finite=False, ensure_min_samples=1))
    names = list(frame.columns)
    frame.columns = range(frame.shape[1])
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_complex_dtype(series):
            raise InvalidInputError(
                f"column {names[column]!r} holds complex numbers, which have no order; pass its real and imaginary "
                "parts (or magnitude and phase) as separate columns"
            )
        if isinstance(series.dtype, pd.DatetimeTZDtype):
            series = series.dt.tz_convert("UTC").dt.tz_localize(None)
        if pd.api.types.is_datetime64_dtype(series):
            series = series - pd.Timestamp("1970-01-01")
        if pd.api.types.is_timedelta64_dtype(series):  # every datetime column by now; NaT -> NaN
            frame[column] = (series / pd.Timedelta(seconds=1)).astype(np.float64)
        elif series.dtype == object:
            numeric = pd.to_numeric(series, errors="coerce")
            if numeric.notna().sum() == series.notna().sum():
                frame[column] = numeric
    return frame


def _category_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as the ordinal encoder sees them: numeric columns (marked
    categorical) as floats, the others as strings; missing values stay missing."""
    columns = {}
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            columns[column] = series.astype(np.float64)
        else:
            columns[column] = series.astype(str).where(series.notna())
    return pd.DataFrame(columns, index=frame.index)


#: The ordinal encoder's unknown and missing categories are NaN, which the network's indicator sees.
_NAN_FOR_UNKNOWN = {"handle_unknown": "use_encoded_value", "unknown_value": np.nan, "encoded_missing_value": np.nan}


class TableEncoder:
    """Numeric float64 matrix from any 2-D table, fitted on train rows.

    - numeric and boolean columns are kept as floats (NaN and +-inf preserved); datetime
      columns become seconds since 1970-01-01 (UTC), durations seconds, so that unseen dates
      keep their order; complex columns are refused;
    - categorical, object and string columns are ordinal-encoded (unknown or missing
      categories at predict time become NaN, which the model's indicator sees);
    - columns constant on the train rows (same value, or same missingness, everywhere)
      are dropped;
    - above ``max_features`` columns, the ``max_features`` columns with the highest mutual
      information with the train labels are kept (deterministic given ``random_state``),
      in their original order.

    ``categorical_features`` (column positions) marks numeric columns, such as integer
    codes, as categorical too: they are ordinal-encoded in numeric order.
    """

    def __init__(self, max_features: int, random_state: int = 0, categorical_features=()):
        self.max_features = max_features
        self.random_state = random_state
        self.categorical_features = tuple(categorical_features)

    def fit_transform(self, X, y: np.ndarray) -> np.ndarray:
        frame = _as_frame(X)
        marked = set(self.categorical_features)
        self.categorical_ = [c for c in frame.columns if c in marked or _is_categorical(frame[c])]
        if self.categorical_:
            self.ordinal_ = OrdinalEncoder(**_NAN_FOR_UNKNOWN).fit(_category_frame(frame[self.categorical_]))
        values = self._numeric(frame)
        varying = [j for j in range(values.shape[1]) if pd.Series(values[:, j]).nunique(dropna=False) > 1]
        self.n_varying_ = len(varying)
        if len(varying) > self.max_features:
            varying = self._select_by_mutual_information(values, y, varying)
        self.columns_ = np.asarray(varying, dtype=int)
        return values[:, self.columns_]

    def transform(self, X) -> np.ndarray:
        return self._numeric(_as_frame(X))[:, self.columns_]

    def fitted_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The fitted encoder without pickle: its settings as JSON and its arrays (the output
        columns, each categorical column's train categories), for :meth:`from_fitted_state`."""
        settings = {"max_features": self.max_features, "random_state": int(self.random_state),
                    "categorical_features": list(self.categorical_features), "categorical": self.categorical_}
        arrays = {"columns": self.columns_}
        for j, categories in enumerate(self.ordinal_.categories_ if self.categorical_ else []):
            kept = categories[pd.notna(categories)]
            arrays[f"categories/{j}"] = kept.astype(float if kept.dtype.kind in "fiu" else str)
        return settings, arrays

    @classmethod
    def from_fitted_state(cls, settings: dict, arrays: dict[str, np.ndarray]) -> TableEncoder:
        """The encoder that :meth:`fitted_state` describes."""
        encoder = cls(settings["max_features"], settings["random_state"], settings["categorical_features"])
        encoder.categorical_, encoder.columns_ = settings["categorical"], arrays["columns"]
        if encoder.categorical_:
            categories = [arrays[f"categories/{j}"] for j in range(len(encoder.categorical_))]
            categories = [c.astype(object) if c.dtype.kind == "U" else c for c in categories]
            # With explicit categories, fit only checks the columns: one row of known values.
            row = {column: pd.Series(c[:1] if len(c) else [np.nan], dtype=c.dtype)
                   for column, c in zip(encoder.categorical_, categories)}
            encoder.ordinal_ = OrdinalEncoder(categories=categories, **_NAN_FOR_UNKNOWN).fit(pd.DataFrame(row))
        return encoder

    def category_counts(self) -> list[int]:
        """Per output column, its number of train categories (0 for a numeric column); the
        ordinal codes of a column with n categories are 0..n-1 (NaN: missing or unknown)."""
        categories = self.ordinal_.categories_ if self.categorical_ else []
        counts = {column: int(pd.notna(values).sum()) for column, values in zip(self.categorical_, categories)}
        return [counts.get(int(column), 0) for column in self.columns_]

    def _numeric(self, frame: pd.DataFrame) -> np.ndarray:
        out = np.empty(frame.shape, dtype=np.float64)
        numeric = [c for c in frame.columns if c not in self.categorical_]
        for column in numeric:
            if _is_categorical(frame[column]):
                example = frame[column][pd.to_numeric(frame[column], errors="coerce").isna() & frame[column].notna()]
                raise InvalidInputError(
                    f"column {column} was numeric when fitted but now holds non-numeric values (e.g. "
                    f"{example.iloc[0]!r}); convert it to numbers, or fit again with it as a text column"
                )
        out[:, numeric] = frame[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
        if self.categorical_:
            out[:, self.categorical_] = self.ordinal_.transform(_category_frame(frame[self.categorical_]))
        return out

    def _select_by_mutual_information(self, values: np.ndarray, y: np.ndarray, columns: list[int]) -> list[int]:
        candidates = values[:, columns].copy()
        candidates[~np.isfinite(candidates)] = np.nan
        medians = np.nanmedian(np.where(np.isnan(candidates), np.inf, candidates), axis=0)
        medians = np.where(np.isfinite(medians), medians, 0.0)
        candidates = np.where(np.isnan(candidates), medians, candidates)
        discrete = np.isin(columns, self.categorical_)
        scores = mutual_info_classif(candidates, y, discrete_features=discrete, random_state=self.random_state)
        keep = np.sort(np.argsort(-scores, kind="stable")[: self.max_features])
        return [columns[j] for j in keep]


@dataclass(frozen=True)
class MemberSpec:
    """One ensemble member: a preprocessing variant, a categorical encoding, a rotation of
    the feature columns and (TabPFN* only) a rotation of the class ids."""

    variant: str
    feature_shift: int
    class_shift: int
    categorical_encoding: str = "ordinal"


def ensemble_members(
    n_estimators: int,
    n_features: int,
    n_classes: int,
    rng: np.random.RandomState,
    class_shifts: bool,
    transforms: tuple[str, ...] = FEATURE_TRANSFORMS,
    encodings: tuple[str, ...] = ("ordinal",),
) -> list[MemberSpec]:
    """Member i uses ``transforms[i % T]`` and ``encodings[(i // T) % len(encodings)]``
    (T = len(transforms): every transform with each encoding in turn); member 0 keeps the
    original feature and class order, the others rotate them by random shifts."""
    return [
        MemberSpec(
            variant=transforms[i % len(transforms)] if n_features else "none",
            feature_shift=int(rng.randint(n_features)) if n_features and i else 0,
            class_shift=int(rng.randint(n_classes)) if class_shifts and i else 0,
            categorical_encoding=encodings[(i // len(transforms)) % len(encodings)],
        )
        for i in range(n_estimators)
    ]


def one_hot_columns(category_counts: list[int], f_max: int) -> dict[int, int]:
    """The columns a "onehot" member expands, with their category counts: those of 3 or more
    categories (a binary code is already one 0/1 column), fewest categories first, while the
    width stays <= f_max."""
    width, chosen = len(category_counts), {}
    for column in sorted((j for j, n in enumerate(category_counts) if n >= 3), key=lambda j: category_counts[j]):
        if width + category_counts[column] - 1 > f_max:
            break
        width += category_counts[column] - 1
        chosen[column] = category_counts[column]
    return dict(sorted(chosen.items()))


def expand_one_hot(values: np.ndarray, columns: dict[int, int]) -> np.ndarray:
    """Replace each column j of ``columns`` (ordinal codes 0..n_j-1, n_j = ``columns[j]``) in
    place by n_j 0/1 columns; a missing or unknown category (NaN) is all zeros."""
    # values: (N, F) -> (N, F + sum(n_j - 1 over columns))
    if not columns:
        return values
    return np.concatenate([
        (values[:, [j]] == np.arange(columns[j])).astype(values.dtype) if j in columns else values[:, [j]]
        for j in range(values.shape[1])
    ], axis=1)


class MemberTransform:
    """Fitted per-member feature transform: optional one-hot expansion of categorical
    columns, optional quantile map, robust z-score with outlier squashing, rescale by
    f_max / F_used, feature rotation."""

    def __init__(self, spec: MemberSpec, f_max: int):
        self.spec = spec
        self.f_max = f_max

    def fit_transform(self, values: np.ndarray, category_counts: list[int]) -> torch.Tensor:
        # values: (N, F) -> (N, F_used) float32, F_used = F plus the one-hot columns
        onehot = self.spec.categorical_encoding == "onehot"
        self.one_hot_ = one_hot_columns(category_counts, self.f_max) if onehot else {}
        values = expand_one_hot(values, self.one_hot_)
        if self.spec.variant == "quantile":
            n_quantiles = max(2, min(1000, values.shape[0]))
            self.quantile_ = QuantileTransformer(n_quantiles=n_quantiles, output_distribution="normal")
            # sklearn's quantile map has absolute tolerances (1e-7): work on values of magnitude ~1,
            # scaled by a power of two per column (exact, and the map is scale-invariant otherwise)
            finite = np.where(np.isfinite(values), np.abs(values), 0.0)
            self.exponent_ = np.frexp(finite.max(axis=0, initial=0.0))[1] if values.size else 0
            self.quantile_.fit(_infinite_as_nan(np.ldexp(values, -self.exponent_)))
        x = torch.from_numpy(self._variant(values))
        self.mean_, self.std_ = fit_normalization(x)
        return self._finish(x)

    def transform(self, values: np.ndarray) -> torch.Tensor:
        # values: (M, F) -> (M, F_used) float32
        return self._finish(torch.from_numpy(self._variant(expand_one_hot(values, self.one_hot_))))

    def _variant(self, values: np.ndarray) -> np.ndarray:
        if self.spec.variant == "none":
            return values
        mapped = self.quantile_.transform(_infinite_as_nan(np.ldexp(values, -self.exponent_)))
        return np.where(np.isinf(values), values, mapped)  # keep +-inf visible to the indicator

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        x = apply_normalization(x, self.mean_, self.std_)
        x = rescale_by_used_features(x, x.shape[-1], self.f_max)
        return torch.roll(x, self.spec.feature_shift, dims=-1).to(torch.float32)


def _infinite_as_nan(values: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(values), np.nan, values)


#: The fewest rows a class keeps in a subsampled context (or all its rows, if it has fewer), so
#: that every class of the table is present in the context; the rest of the context follows
#: the table's class proportions.
CONTEXT_CLASS_FLOOR = 10


def stratified_subsample(y: np.ndarray, n_rows: int, rng: np.random.RandomState) -> np.ndarray:
    """Sorted indices of at most ``n_rows`` random rows that keep the class proportions of ``y``.

    Each class first gets ``min(its count, CONTEXT_CLASS_FLOOR)`` rows (the floor shrinks to
    ``n_rows // n_classes`` when the floors would not fit, and with fewer rows than classes the
    most frequent classes get one row each); the remaining rows are shared in proportion to
    the classes' remaining counts (largest remainders first, ties to the earlier class). The
    prior the network sees is therefore the table's, except that classes rarer than the floor
    gain a few rows. All rows when ``n_rows >= len(y)``.
    """
    if n_rows >= len(y):
        return np.arange(len(y))
    classes, counts = np.unique(y, return_counts=True)
    if n_rows < len(classes):
        take = np.zeros_like(counts)
        take[np.argsort(-counts, kind="stable")[:n_rows]] = 1
    else:
        take = np.minimum(counts, min(CONTEXT_CLASS_FLOOR, n_rows // len(classes)))
        remaining = (counts - take).astype(np.int64)
        shared = (n_rows - take.sum()) * remaining  # exact integers: class j's share is shared[j] / total
        total = remaining.sum()
        extra, fraction = shared // total, shared % total
        left = n_rows - take.sum() - extra.sum()
        extra[np.argsort(-fraction, kind="stable")[:left]] += 1  # a positive fraction: never past a class's rows
        take = take + extra
    chosen = [rng.choice(np.flatnonzero(y == c), size=t, replace=False) for c, t in zip(classes, take)]
    return np.sort(np.concatenate(chosen))
