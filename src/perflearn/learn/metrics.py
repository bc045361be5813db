"""Accuracy measures of a performance model.

MRE (mean relative error, Heimdall's PAAE) is the headline: mean(|pred - y| / |y|),
reported in percent. MAPE is the same quantity without skipping y = 0: it is
undefined (NaN) when any target is 0 (scikit-learn's epsilon floor gave 1e17 %);
both are kept because papers use both names. A model of a quantile (``--quantile``) is
judged by its coverage (the share of values at or under it, which should be the
quantile) and its pinball loss, not by its relative error.
"""

from __future__ import annotations

import numpy as np


def mre(y_true, y_pred) -> float:
    """Mean relative error in percent (= PAAE x 100). Rows with y = 0 are skipped."""
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    nz = y_true != 0
    if not nz.any():
        return float("nan")
    return float(np.mean(np.abs(y_pred[nz] - y_true[nz]) / np.abs(y_true[nz])) * 100.0)


def mape(y_true, y_pred) -> float:
    """Mean absolute percentage error in percent; NaN (undefined) when any target is 0."""
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    if np.any(y_true == 0):
        return float("nan")
    return float(np.mean(np.abs(y_pred - y_true) / np.abs(y_true)) * 100.0)


def rmse(y_true, y_pred) -> float:
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    return float(np.sqrt(np.mean((y_pred - y_true) ** 2)))


def r2(y_true, y_pred) -> float:
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    ss_tot = float(np.sum((y_true - y_true.mean()) ** 2))
    if ss_tot == 0:
        return float("nan")
    return 1.0 - float(np.sum((y_true - y_pred) ** 2)) / ss_tot


METRICS = {"mre": mre, "mape": mape, "rmse": rmse, "r2": r2}
LOWER_IS_BETTER = {"mre": True, "mape": True, "rmse": True, "r2": False}
QUANTILE_METRICS = ("coverage", "pinball")  # of a model of a quantile, besides METRICS


def all_metrics(y_true, y_pred, quantile: float | None = None) -> dict[str, float]:
    """Every metric; for a model of a quantile, also its coverage and pinball loss."""
    out = {name: fn(y_true, y_pred) for name, fn in METRICS.items()}
    if quantile is not None:
        out.update(coverage=coverage(y_true, y_pred), pinball=pinball(y_true, y_pred, quantile))
    return out


def coverage(y_true, y_pred) -> float:
    """Share of the values at or under the prediction: a model of the q-quantile should cover q."""
    return float(np.mean(np.asarray(y_true, dtype=float) <= np.asarray(y_pred, dtype=float)))


def pinball(y_true, y_pred, quantile: float) -> float:
    """Mean pinball (quantile) loss: the loss the q-quantile minimises (q x under-, 1 - q x over-prediction)."""
    d = np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)
    return float(np.mean(np.maximum(quantile * d, (quantile - 1) * d)))
