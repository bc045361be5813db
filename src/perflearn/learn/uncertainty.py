"""Prediction with an uncertainty band, for any fitted family.

Forests give the spread across their trees (mean ± 1.645 std of the per-tree
predictions), quantile forests the 5 % and 95 % quantiles of the values they predict
(a band of the values, not of the forest's estimate), Gaussian processes their posterior std; target transforms (log, scaling) are monotone, so bands are mapped through
them. Other families fall back on the relative error measured by
cross-validation when the model was fitted.

A family's own spread is not a prediction error: the trees of a forest fitted on nine
runs agree with each other far more than with the truth (a 90 % band of the trees
covered 26 % of held-out Apache configurations). So a model fitted since session 47
also carries the out-of-fold residuals' spread (``band_calibration``, conformal:
the 90 % quantile of |log(y / out-of-fold prediction)|, finite-sample corrected), and
its band spans at least that (``predict_spread(..., band=...)``); ``std`` stays the
family's own spread, which the manager's uncertainty-aware policy was built on.

Forests predict through ``fastforest`` (a compiled numba kernel, same values as
scikit-learn) when the input is large enough to pay for it; without numba, through
``forest_members`` below.
"""

from __future__ import annotations

import math
import os

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.pipeline import Pipeline

Z90 = 1.6448536269514722  # two-sided 90% band of a normal
BAND = 0.90  # the share of values lo..hi is meant to cover

# from this many (row, tree) walks, forests go through the compiled kernel of
# perflearn.learn.fastforest (numba); below it, or without numba, through the trees' own predict
COMPILED_FROM = 20_000

_POOL = None


def _compiled(forest, X, what: str, threads: int | None = None):
    """``fastforest.<what>(forest, X)`` when the work is worth a compiled kernel, else None."""
    if np.ndim(X) != 2 or np.shape(X)[0] * len(forest.estimators_) < COMPILED_FROM:
        return None
    from . import fastforest  # imports numba: only when it pays

    return getattr(fastforest, what)(forest, X, threads)


def _pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1)), thread_name_prefix="perflearn-trees")
    return _POOL


def _thresholds(forest) -> list[np.ndarray]:
    """Per input column, the sorted distinct split thresholds of the whole forest (cached on it)."""
    cached = getattr(forest, "_perflearn_thresholds", None)
    if cached is not None:
        return cached
    n_features = forest.n_features_in_
    parts: list[list[np.ndarray]] = [[] for _ in range(n_features)]
    for tree in forest.estimators_:
        t = tree.tree_
        internal = t.feature >= 0
        feats, thr = t.feature[internal], t.threshold[internal]
        for f in np.unique(feats):
            parts[f].append(thr[feats == f])
    out = [np.unique(np.concatenate(p)) if p else np.empty(0) for p in parts]
    forest._perflearn_thresholds = out
    return out


def _distinct_cells(forest, X32: np.ndarray):
    """Rows that fall in the same cell of every split of the forest get the same prediction
    from every tree: (index of one row per cell, cell of each row), or None if no row shares a cell."""
    thresholds = _thresholds(forest)
    key = np.zeros(X32.shape[0], dtype=np.int64)
    radix = 1
    for f, t in enumerate(thresholds):
        if len(t) == 0:
            continue
        # x <= t[k] exactly when k >= searchsorted(t, x, "left"): same bin, same branch at every split on f
        b = np.searchsorted(t, X32[:, f].astype(np.float64), side="left")
        radix *= len(t) + 1
        if radix >= 2**62:
            return None
        key = key * (len(t) + 1) + b
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) == X32.shape[0]:
        return None
    return first, inverse.ravel()


def forest_members(forest, X: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Per-tree predictions, shape (n_trees, n_samples), exactly as each tree predicts.

    Faster than looping ``tree.predict``: no per-call validation; rows falling in the
    same cell of every split of the forest are predicted once (candidate grids share
    cells a lot); the rest are sorted by the most important features so neighbouring
    rows take the same branches (traversal is bound by branch misprediction); trees
    are split over at most two threads (the traversal releases the GIL) when the work
    is large. Large inputs go through the compiled kernel instead (same values).
    """
    fast = _compiled(forest, X, "members", threads)
    if fast is not None:
        return fast
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    n_all = X32.shape[0]
    expand = None
    if n_all >= 256:
        cells = _distinct_cells(forest, X32)
        if cells is not None:
            first, expand = cells
            X32 = np.ascontiguousarray(X32[first])
    n = X32.shape[0]
    trees = forest.estimators_
    order = None
    if n >= 256:
        imp = np.argsort(forest.feature_importances_)[::-1][:3]
        order = np.lexsort(X32[:, imp[::-1]].T)
        X32 = np.ascontiguousarray(X32[order])
    out = np.empty((len(trees), n))

    def run(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            out[i] = trees[i].tree_.predict(X32).reshape(n, -1)[:, 0]

    workers = threads if threads is not None else (2 if n * len(trees) >= 200_000 else 1)
    workers = max(1, min(workers, 2, os.cpu_count() or 1, len(trees)))
    if workers == 1:
        run(0, len(trees))
    else:
        bounds = np.linspace(0, len(trees), workers + 1).astype(int)
        list(_pool().map(lambda b: run(*b), zip(bounds[:-1], bounds[1:])))
    if order is not None:
        unsorted = np.empty_like(out)
        unsorted[:, order] = out
        out = unsorted
    if expand is not None:
        out = out[:, expand]
    return out


def _dist(est, X, bands: bool = True):
    """(center, lo, hi) in est's output space, or None when est has no own spread."""
    if isinstance(est, (RandomForestRegressor, ExtraTreesRegressor)):
        if not bands:
            center = _compiled(est, X, "predict")
            if center is None:
                center = forest_members(est, X).mean(axis=0)
            return center, center, center
        # normal approximation of the spread across trees (exact percentiles cost ~10x more)
        fast = _compiled(est, X, "mean_std")
        if fast is not None:
            center, sd = fast
        else:
            P = forest_members(est, X)
            center, sd = P.mean(axis=0), P.std(axis=0)
        return center, center - Z90 * sd, center + Z90 * sd
    if not bands and not _has_forest(est):
        return None
    if _is_quantile_forest(est):  # its point is its quantile; its band, the 5 % and 95 % of the values it predicts
        center = np.asarray(est.predict(X), dtype=float).ravel()
        lo, hi = np.asarray(est.predict(X, quantiles=[0.05, 0.95]), dtype=float).T
        return center, lo, hi
    if isinstance(est, GaussianProcessRegressor):
        mu, sd = est.predict(X, return_std=True)
        return mu, mu - Z90 * sd, mu + Z90 * sd
    if isinstance(est, Pipeline):
        Xt = X
        for _, step in est.steps[:-1]:
            if step is not None and step != "passthrough":
                Xt = step.transform(Xt)
        return _dist(est.steps[-1][1], Xt, bands)
    if isinstance(est, TransformedTargetRegressor):
        inner = _dist(est.regressor_, X, bands)
        if inner is None:
            return None
        return tuple(_inverse(est, v) for v in inner)
    return None


def _inverse(ttr: TransformedTargetRegressor, v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=float).reshape(-1, 1)
    out = ttr.transformer_.inverse_transform(v)
    return np.asarray(out, dtype=float).ravel()


def fast_predict(est, X: np.ndarray) -> np.ndarray:
    """``est.predict(X)``, through the faster forest path when ``est`` is (a transformed) forest."""
    d = _dist(est, X, bands=False)
    if d is not None:
        return d[0]
    return np.asarray(est.predict(X), dtype=float)


def predict_spread(est, X: np.ndarray, rel_error: float | None = None, band: dict | None = None):
    """(pred, std, lo, hi) per row; lo/hi bound a ~90% band.

    ``band`` (``band_calibration`` of the fit's out-of-fold predictions) widens lo/hi
    to at least what cross-validation measured; it replaces the ``rel_error`` band of
    families without a spread of their own. ``std`` is left as the family gives it.
    """
    d = _dist(est, X)
    if d is not None:
        center, lo, hi = d
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        pred = np.asarray(center, dtype=float)  # for forests and GPs, center is exactly est.predict(X)
        std = (hi - lo) / (2 * Z90)
        if band is not None:
            clo, chi = calibrated_band(pred, band)
            lo, hi = np.fmin(lo, clo), np.fmax(hi, chi)
        return pred, std, lo, hi
    pred = np.asarray(est.predict(X), dtype=float)
    if rel_error is None or not np.isfinite(rel_error):
        std = np.full_like(pred, np.nan)
        lo, hi = std, std
    else:
        std = np.abs(pred) * float(rel_error) / 100.0 * 1.2533  # mean |e| -> std of a normal
        lo, hi = pred - Z90 * std, pred + Z90 * std
    if band is not None:
        clo, chi = calibrated_band(pred, band)
        known = np.isfinite(clo)
        lo, hi = np.where(known, clo, lo), np.where(known, chi, hi)
    return pred, std, lo, hi


def band_calibration(y, oof, quantile: float | None = None, units: int | None = None) -> dict | None:
    """The spread of out-of-fold residuals that a 90 % band must span (split conformal).

    Residuals are log(y / oof) when every value and prediction is > 0 (performance
    spans orders of magnitude; a relative band), else y - oof. A model of the mean or
    median gets the symmetric bound: the ceil((n + 1) 0.9)-th smallest |residual| of n,
    which covers 90 % of new values when residuals are exchangeable (up to 18 runs: the
    largest). A model of a quantile (its residuals are not centred) gets the 5 % and
    95 % residuals, corrected the same way (up to 38 runs: the extremes). ``units``: the
    independent units the rows come from (runs or configurations of per-sample or
    repeated data, which cross-validation kept together): the rank is theirs, scaled to
    the rows. None with fewer than 2 residuals.
    """
    y, oof = np.asarray(y, dtype=float).ravel(), np.asarray(oof, dtype=float).ravel()
    ok = np.isfinite(y) & np.isfinite(oof)
    y, oof = y[ok], oof[ok]
    n = len(y)
    units = n if units is None else max(1, min(int(units), n))
    if n < 2 or units < 2:
        return None
    log = bool(np.all(y > 0) and np.all(oof > 0))
    r = np.log(y / oof) if log else y - oof
    if quantile is None:
        q = float(np.sort(np.abs(r))[_rank(n, units, BAND)])
        lo, hi = -q, q
    else:
        k = _rank(n, units, (1 + BAND) / 2)
        ordered = np.sort(r)
        lo, hi = float(ordered[n - 1 - k]), float(ordered[k])
    out = {"scale": "log" if log else "absolute", "lo": lo, "hi": hi, "n": units, "share": BAND}
    if units != n:
        out["rows"] = n
    return out


def few_units(quantile: float | None) -> int:
    """Below this many runs a band spans the largest error(s): a handful cannot show how wrong a model can be."""
    share = BAND if quantile is None else (1 + BAND) / 2
    return round((1 + share) / (1 - share))  # ceil((n + 1) share) < n from here: 19 for 90 %, 39 for 95 %


def _rank(n: int, units: int, share: float) -> int:
    """Finite-sample conformal rank: index of the ceil((units + 1) share)-th smallest of ``units``
    values, at most the largest, scaled to ``n`` rows."""
    k = min(units, math.ceil((units + 1) * share - 1e-9))
    return min(n, math.ceil(k / units * n - 1e-9)) - 1


def calibrated_band(pred: np.ndarray, band: dict) -> tuple[np.ndarray, np.ndarray]:
    """lo/hi around ``pred`` spanning the out-of-fold residuals of ``band_calibration``."""
    pred = np.asarray(pred, dtype=float)
    if band.get("scale") == "log":
        with np.errstate(all="ignore"):  # a prediction <= 0 has no relative band
            ok = pred > 0
            return np.where(ok, pred * math.exp(band["lo"]), np.nan), np.where(ok, pred * math.exp(band["hi"]), np.nan)
    return pred + band["lo"], pred + band["hi"]


def _has_forest(est) -> bool:
    if isinstance(est, (RandomForestRegressor, ExtraTreesRegressor)):
        return True
    if isinstance(est, Pipeline):
        return _has_forest(est.steps[-1][1])
    if isinstance(est, TransformedTargetRegressor):
        return _has_forest(est.regressor_)
    return False


def _is_quantile_forest(est) -> bool:
    return type(est).__name__ == "RandomForestQuantileRegressor"  # without importing quantile_forest to know


def _is_plain_forest(est) -> bool:
    return isinstance(est, (RandomForestRegressor, ExtraTreesRegressor))
