"""From a Dataset to the (X, y) a model learns from, and the schema it remembers.

The schema is what a fitted model knows about its inputs: the feature names in
order, each one's kind (numeric / categorical), the categories seen in training
and the numeric range seen. Predicting checks new points against it, so a point
with an unseen category or a model trained on other knobs fails with one line.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from perflearn.errors import UsageError
from perflearn.store import Dataset
from perflearn.store.dataset import listed, name_hint, split_list

# scikit-learn's trees (cart, rf, gbm, and `rules`) cast their input to float32: a value beyond
# this overflows to inf there ("Input X contains infinity", an internal error); every family refuses it
FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4e+38
# a target is squared (RMSE, R², tree impurity) and divided by (MRE, whose spread over splits squares
# it again); within 1e-75..1e75 in magnitude (or 0), a ratio of two values is at most 1e150 and every
# such square a finite float64 (1e-300..1e300 gave MRE 1e33 % or nan, RMSE and R² nan, with warnings)
TARGET_MAX = 1e75
TARGET_MIN = 1e-75


@dataclass
class FeatureSchema:
    """Inputs and target of a model, as seen in its training data."""

    target: str
    features: list[str]
    kinds: dict[str, str]
    categories: dict[str, list[str]] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    unit: str = ""
    one_hot: list[list[str]] = field(default_factory=list)  # 0/1 features exactly one of which was 1 in every run
    # the features that were context (situation, not choice): a saved model forgot them, and `recommend --model`
    # over a CSV read without --context-cols chose the load as a knob (session 58's audit)
    context: list[str] = field(default_factory=list)

    @property
    def numeric(self) -> list[str]:
        return [f for f in self.features if self.kinds[f] == "numeric"]

    @property
    def categorical(self) -> list[str]:
        return [f for f in self.features if self.kinds[f] == "categorical"]

    def constant(self) -> dict[str, str]:
        """Features with one value in every training run, and that value: a model cannot
        learn what they do, so a prediction at another value is a guess."""
        out = {}
        for f in self.features:
            if self.kinds[f] == "numeric" and f in self.ranges and self.ranges[f][0] == self.ranges[f][1]:
                out[f] = f"{self.ranges[f][0]:g}"
            elif self.kinds[f] == "categorical" and len(self.categories.get(f, [])) == 1:
                out[f] = self.categories[f][0]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "features": self.features,
            "kinds": self.kinds,
            "categories": self.categories,
            "ranges": {k: list(v) for k, v in self.ranges.items()},
            "unit": self.unit,
            "one_hot": self.one_hot,
            "context": self.context,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FeatureSchema":
        return cls(
            target=d["target"],
            features=list(d["features"]),
            kinds=dict(d["kinds"]),
            categories={k: list(v) for k, v in d.get("categories", {}).items()},
            ranges={k: (float(v[0]), float(v[1])) for k, v in d.get("ranges", {}).items()},
            unit=d.get("unit", ""),
            one_hot=[list(g) for g in d.get("one_hot", [])],  # models saved before session 44 have none
            context=[str(c) for c in d.get("context", [])],  # nor before session 58
        )

    def outside(self, points: pd.DataFrame, where: str = "points") -> list[str]:
        """One line for each way ``points`` (checked as by ``frame``, its errors naming ``where``)
        leave what the model was trained on: a numeric feature beyond its trained range, a
        one-hot group not set exactly once. The model still predicts there; it extrapolates,
        and says how far."""
        checked, notes = self.frame(points, where), []
        for f, (lo, hi) in self.ranges.items():
            values = checked[f].to_numpy(dtype=float)
            beyond = (values < lo) | (values > hi)
            if beyond.any():
                worst = values[beyond][np.argmax(np.abs(values[beyond] - (lo + hi) / 2))]
                notes.append(f"{int(beyond.sum())} point(s) with {f} outside the trained range {lo:g} to {hi:g} "
                             f"(e.g. {worst:g}): extrapolated")
        for group in self.one_hot:
            ones = sum(checked[f].to_numpy(dtype=float) == 1 for f in group)
            off = ones != 1
            if off.any():
                notes.append(f"{int(off.sum())} point(s) that do not set exactly one of {', '.join(group)} to 1, "
                             "as every training run did: a setting no run had")
        return notes

    def frame(self, points: pd.DataFrame, where: str = "points") -> pd.DataFrame:
        """The feature columns of ``points`` in training order, checked against the schema.

        Extra columns are ignored; no rows, a missing feature, a non-numeric or
        non-finite (nan, inf) value in a numeric feature, one beyond the float32 range
        (``FLOAT32_MAX``) or a category not seen in training is a UsageError.
        """
        if len(points) == 0:  # scikit-learn's own message ("0 sample(s)") names neither
            raise UsageError("no rows (no points to predict)", where=where)
        missing = [f for f in self.features if f not in points.columns]
        if missing:
            raise UsageError(
                f"model was trained on features {', '.join(self.features)}; "
                f"missing {', '.join(missing)} (given: {', '.join(map(str, points.columns))})",
                where=where,
            )
        out: dict[str, pd.Series] = {}  # one frame at the end: a column at a time warned per column past 100
        for f in self.features:
            col = points[f]
            if self.kinds[f] == "numeric":
                values = pd.to_numeric(col, errors="coerce").astype(float)
                bad = ~np.isfinite(values.to_numpy())  # nan and inf would predict silently (as a missing value)
                if bad.any():
                    row = int(np.flatnonzero(bad)[0])
                    raise UsageError(f"feature {f!r} needs a {_bad_number(col.iloc[row])} (row {row + 1})", where=where)
                huge = np.abs(values.to_numpy()) > FLOAT32_MAX
                if huge.any():
                    row = int(np.flatnonzero(huge)[0])
                    raise UsageError(f"feature {f!r} needs a number within ±{FLOAT32_MAX:.2g} (the float32 range "
                                     f"the tree models compute in), got {_shown(col.iloc[row])} (row {row + 1})",
                                     where=where)
                out[f] = values
            else:
                empty = col.isna().to_numpy()  # an empty cell: NULL, as in training (where its run was left out)
                if empty.any():
                    row = int(np.flatnonzero(empty)[0])
                    raise UsageError(f"feature {f!r} is empty (NULL) in row {row + 1}: give one of its categories",
                                     where=where)
                known = set(self.categories.get(f, []))
                values = _as_known(_categories(col), known)
                unseen = sorted(set(values.unique()) - known)
                if unseen:
                    raise UsageError(
                        f"feature {f!r} has category {unseen[0]!r} not seen in training "
                        f"(known: {_some(sorted(known))}){_why_categories(f, unseen[0], known)}",
                        where=where,
                    )
                out[f] = values
        return pd.DataFrame(out, index=points.index)


def _shown(value: Any) -> str:
    """A value as the user wrote it (``nan``, not ``np.float64(nan)``)."""
    return value if isinstance(value, str) else str(value)


def _bad_number(value: Any) -> str:
    """What is wrong with a numeric feature's value, shown as the user wrote it (``nan``, not ``np.float64(nan)``)."""
    text = _shown(value)
    try:
        float(text)
    except ValueError:
        return f"number, got {value!r}"
    return f"finite number, got {text}"


def _as_known(values: pd.Series, known: set[str]) -> pd.Series:
    """Categories written as numbers matched to the one known category of that number:
    ``--set freq=1.0`` (read as 1.0, shown as "1") is the category "1.0" that ``recommend``
    printed; it was refused as unseen, where Python's ``predict`` took "1.0"."""
    unseen = set(values.unique()) - known
    if not unseen:
        return values
    by_number: dict[float, list[str]] = {}
    for category in known:
        number = _number_of(category)
        if number is not None:
            by_number.setdefault(number, []).append(category)
    same = {}
    for value in unseen:
        number = _number_of(value)
        if number is not None and len(by_number.get(number, [])) == 1:
            same[value] = by_number[number][0]
    return values.replace(same) if same else values


def _number_of(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if np.isfinite(number) else None


def _categories(col: pd.Series) -> pd.Series:
    """``col`` as category strings, vectorised where the dtype allows (see ``_category``)."""
    if pd.api.types.is_integer_dtype(col) or pd.api.types.is_bool_dtype(col):
        return col.astype(str)
    if pd.api.types.is_object_dtype(col) or pd.api.types.is_string_dtype(col):
        if col.map(type).eq(str).all():
            return col.astype(str)
    return col.map(_category)


def _category(value: Any) -> str:
    """Categories are compared as strings; integral floats read from CSV lose their '.0'."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass
class TrainingData:
    X: pd.DataFrame
    y: np.ndarray
    schema: FeatureSchema
    excluded: int  # runs left out: failed status, NULL target or NULL feature
    rows: pd.DataFrame  # the kept rows of the dataset frame (for reports)
    excluded_why: str = ""  # the left-out runs by cause: "7 failed, 3 with NULL runtime"

    def hash(self) -> str:
        return data_hash(self.X, self.y)


def data_hash(X: pd.DataFrame, y: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(",".join(map(str, X.columns)).encode())
    h.update(pd.util.hash_pandas_object(X.reset_index(drop=True), index=False).to_numpy().tobytes())
    h.update(np.ascontiguousarray(y, dtype=float).tobytes())
    return "sha256:" + h.hexdigest()


def given_value(text: str) -> int | float | str:
    """A value given as text (``--set``, ``--context``, decide's ``context``) as perflearn reads
    it: a whole number without a point or exponent as int (``4``), another number as float
    (``4.0``, ``1e3``), else the text itself (``small``)."""
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def training_data(
    ds: Dataset,
    target: str,
    features: list[str] | None = None,
    where: str | None = None,
) -> TrainingData:
    """Select the target and features of ``ds``; keep ok runs with a target value.

    Errors (one line, UsageError): unknown target or feature, a feature that is
    NULL in every run, no usable run, a constant target.
    """
    where = where or ds.where
    if target not in ds.metrics:
        # -m p95,thr -t time: time is a column, read as a knob (-m names every metric)
        knob = (f"; {target!r} is a knob or context here (for a CSV, -m names every metric: add it there)"
                if target in ds.features else "")
        raise UsageError(f"unknown target {target!r} (metrics: {', '.join(ds.metrics) or 'none'}){knob}", where=where)
    available = ds.features
    if isinstance(features, str):  # "threads,bs" was read letter by letter: "unknown feature 't'"
        features = split_list(features, "features")
    if features is None:
        features = list(available)
    else:
        for f in features:
            if f not in available:
                hint = (f" (it is a metric; to learn from it as measured, not chosen: --context-cols {f})"
                        if f in ds.metrics and f != target else "")
                raise UsageError(f"unknown feature {f!r}{hint} (knobs and context: {listed(available) or 'none'})"
                                 f"{name_hint(f, available)}", where=where)
        if target in features:
            raise UsageError(f"target {target!r} cannot also be a feature", where=where)
        twice = next((f for i, f in enumerate(features) if f in features[:i]), None)
        if twice is not None:
            raise UsageError(f"feature {twice!r} is given twice", where=where)
    if not features:
        raise UsageError("no features to learn from", where=where)
    frame = ds.frame
    for f in features:
        if frame[f].isna().all():
            raise UsageError(f"feature {f!r} is NULL in every run; leave it out", where=where)
    keep = (frame["status"] == "ok") & frame[target].notna()
    keep &= frame[features].notna().all(axis=1)
    rows = frame[keep]
    excluded = int(len(frame) - len(rows))
    excluded_why = left_out_why(frame, target, features)
    if len(rows) == 0:
        raise UsageError(f"no run has a value for {target!r} (all {len(frame)} failed or NULL)", where=where)
    y = rows[target].to_numpy(dtype=float)
    if len(rows) >= 2 and np.ptp(y) == 0:
        raise UsageError(f"target {target!r} is constant ({y[0]:g}) over all {len(y)} runs; nothing to learn", where=where)
    if len(rows) < 2:
        raise UsageError(f"only {len(rows)} usable run for {target!r}; need at least 2", where=where)
    kinds = {f: ds.kinds.get(f, "numeric" if pd.api.types.is_numeric_dtype(frame[f]) else "categorical") for f in features}
    columns: dict[str, pd.Series] = {}  # one frame at the end: a column at a time warned per column past 100
    categories: dict[str, list[str]] = {}
    ranges: dict[str, tuple[float, float]] = {}
    for f in features:
        if kinds[f] == "numeric":
            columns[f] = pd.to_numeric(rows[f]).astype(float)
            ranges[f] = (float(columns[f].min()), float(columns[f].max()))
        else:
            columns[f] = _categories(rows[f])
            categories[f] = sorted(columns[f].unique().tolist())
    X = pd.DataFrame(columns, index=rows.index)
    # inf is not NULL (so not left out), and scikit-learn's refusal ("Input X contains infinity") names no column
    infinite = {c: int(np.isinf(v).sum()) for c, v in [(target, y), *((f, X[f].to_numpy()) for f in ranges)]}
    infinite = {c: k for c, k in infinite.items() if k}
    if infinite:
        raise UsageError("infinite values in " + ", ".join(f"{c!r} ({k} run(s))" for c, k in infinite.items())
                         + "; remove or cap them", where=where)
    huge = {f: int((np.abs(X[f].to_numpy()) > FLOAT32_MAX).sum()) for f in ranges}
    huge = {f: k for f, k in huge.items() if k}
    if huge:  # the trees' float32 cast made them inf: "cannot fit", or an internal error in `rules`
        raise UsageError(f"values beyond ±{FLOAT32_MAX:.2g} (the float32 range the tree models compute in) in "
                         + ", ".join(f"{c!r} ({k} run(s))" for c, k in huge.items()) + "; rescale or cap them",
                         where=where)
    size = np.abs(y)
    if size.max() > TARGET_MAX or ((size > 0) & (size < TARGET_MIN)).any():
        # squares and ratios overflowed: MRE 1e33 %, RMSE and R² nan, with numpy warnings
        lo, hi = size[size > 0].min(), size.max()
        raise UsageError(f"target {target!r} has values of magnitude {lo:.3g} to {hi:.3g}; the error measures "
                         f"need 0 or {TARGET_MIN:g} to {TARGET_MAX:g} (their squares and ratios overflow "
                         "otherwise): rescale it (another unit)", where=where)
    schema = FeatureSchema(
        target=target,
        features=list(features),
        kinds=kinds,
        categories=categories,
        ranges=ranges,
        unit=ds.units.get(target, ""),
        one_hot=[list(g) for g in one_hot_groups(X, [f for f in features if kinds[f] == "numeric"],
                                                 chosen=[f for f in features if f in ds.knobs])],
        context=[f for f in features if f in ds.context],
    )
    return TrainingData(X=X.reset_index(drop=True), y=y, schema=schema, excluded=excluded,
                        rows=rows.reset_index(drop=True), excluded_why=excluded_why)


def left_out_why(frame: pd.DataFrame, target: str, features: list[str]) -> str:
    """The runs a model cannot learn from, by cause, each run counted once in the first that
    holds: "7 failed, 3 with NULL runtime, 2 with NULL a or b" ("10 left out (failed, or NULL
    runtime or feature)" told a user neither what to rerun nor which column to fix)."""
    failed = (frame["status"] != "ok").to_numpy()
    no_target = ~failed & frame[target].isna().to_numpy()
    rest = ~failed & ~no_target
    null = frame.loc[rest, features].isna()
    no_feature = null.any(axis=1)
    parts = []
    if failed.sum():
        parts.append(f"{int(failed.sum())} failed")
    if no_target.sum():
        parts.append(f"{int(no_target.sum())} with NULL {target}")
    if no_feature.sum():
        named = [f for f in features if null[f].any()]
        shown = " or ".join(named[:3]) + (f" (or {len(named) - 3} more)" if len(named) > 3 else "")
        parts.append(f"{int(no_feature.sum())} with NULL {shown}")
    return ", ".join(parts)


# a group is inferred only where chance would rarely show it: two independent, balanced
# 0/1 options are complementary in 9 distinct runs with probability 2^-9 = 0.002
CHANCE = 1e-3
SEARCH_STEPS = 10_000  # of the exact-cover search per column: plenty for tens of 0/1 knobs


def one_hot_groups(frame: pd.DataFrame, knobs: list[str], chosen: list[str] | None = None) -> list[tuple[str, ...]]:
    """Sets of at least two 0/1 knobs of which exactly one is 1 in every run, and
    could not be so by chance (``CHANCE``: the probability that independent options with
    these shares of 1s show it in every distinct configuration measured: of the ``chosen``
    columns, the knobs by default; a measured context or a repetition is no new draw)."""
    binary = [k for k in knobs if pd.api.types.is_numeric_dtype(frame[k]) and frame[k].notna().all()
              and set(np.unique(frame[k].to_numpy(dtype=float))) == {0.0, 1.0}]
    if len(binary) < 2:
        return []
    m = np.unique(frame[binary].to_numpy(dtype=float).astype(bool), axis=0)  # distinct patterns of the 0/1 knobs
    # each distinct configuration is a draw (a 3-valued option crossed with 6 values of another
    # knob is 18 draws that all show exactly one, not 3: counted as 3, it was never grouped)
    chosen = [c for c in (knobs if chosen is None else chosen) if c in frame]
    draws = max(len(frame[chosen].drop_duplicates()) if chosen else 0, len(m))
    groups: list[tuple[str, ...]] = []
    taken: set[int] = set()
    for i in range(len(binary)):
        if i in taken:
            continue
        members = _exact_cover(m, i, [j for j in range(i + 1, len(binary)) if j not in taken])
        if members is None or len(members) < 2:
            continue
        shares = m[:, members].mean(axis=0)
        exactly_one = sum(p * math.prod(1 - q for b, q in enumerate(shares) if b != a) for a, p in enumerate(shares))
        if exactly_one ** draws < CHANCE:
            groups.append(tuple(binary[j] for j in sorted(members)))
            taken.update(members)
    return groups


def _exact_cover(m: np.ndarray, first: int, candidates: list[int]) -> list[int] | None:
    """Columns, ``first`` among them, that are 1 exactly once in every row of ``m``;
    None when there are none (or the search runs out of steps)."""
    steps = 0

    def extend(covered: np.ndarray, chosen: list[int]) -> list[int] | None:
        nonlocal steps
        if covered.all():
            return chosen
        row = int(np.argmin(covered))  # the first row no chosen column covers
        for j in candidates:
            steps += 1
            if steps > SEARCH_STEPS:
                return None
            if j not in chosen and m[row, j] and not (covered & m[:, j]).any():
                found = extend(covered | m[:, j], [*chosen, j])
                if found is not None:
                    return found
        return None

    return extend(m[:, first].copy(), [first])


def _why_categories(feature: str, value: str, known: set[str]) -> str:
    """Why a number is asked of a feature of categories: a word among its numbers in training
    (one typo, "8x", made a numeric knob categorical, and 3 then "not seen")."""
    words = sorted(k for k in known if not _is_number(k))
    if not _is_number(value) or not words or len(words) > max(1, len(known) // 4):
        return ""
    return (f"; it is a feature of categories, not numbers, because training had {_some(words, 3)} among its "
            "numbers: fix the data if that is a typo, and fit again")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _some(names: list[str], most: int = 12) -> str:
    """A list for a message: 400 categories made a 10-KB line."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, ... ({len(names)} in all)"
