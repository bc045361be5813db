"""Per-point statistics of a dataset: mean, median, std and a 95% confidence interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from .dataset import Dataset


def confidence_halfwidth(values: np.ndarray, level: float = 0.95) -> float:
    """Half-width of the Student-t confidence interval of the mean (NaN below 2 values)."""
    from scipy import stats  # imported here: scipy.stats costs a second at start-up

    n = len(values)
    if n < 2:
        return math.nan
    return float(stats.t.ppf((1 + level) / 2, n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def describe(values) -> dict[str, float]:
    values = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if len(values) == 0:
        return {"n": 0, "mean": math.nan, "median": math.nan, "std": math.nan, "ci95": math.nan}
    return {
        "n": len(values),
        "mean": float(values.mean()),
        "median": float(np.median(values)),
        "std": float(values.std(ddof=1)) if len(values) > 1 else math.nan,
        "ci95": confidence_halfwidth(values),
    }


def summarize(dataset: Dataset, metrics: list[str] | None = None) -> pd.DataFrame:
    """One row per point: its knob values, run counts by status, and per metric
    ``<metric>.mean/.median/.std/.ci95/.n`` over the runs whose status is ok."""
    metrics = metrics or dataset.metrics
    rows = []
    for point_id, runs in dataset.frame.groupby("point_id", sort=True):
        row = {"point_id": point_id}
        first = runs.iloc[0]
        for feature in dataset.features:
            row[feature] = first[feature]
        row["runs"] = len(runs)
        row["failed"] = int((runs["status"] != "ok").sum())
        ok = runs[runs["status"] == "ok"]
        for metric in metrics:
            for stat, value in describe(ok[metric].tolist()).items():
                row[f"{metric}.{stat}"] = value
        rows.append(row)
    return pd.DataFrame(rows)
