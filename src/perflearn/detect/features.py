"""Features of interval samples: statistics of each signal over windows of a run.

A window is ``window`` consecutive sampling ticks; for every signal it gives mean,
std, min, max, 5/25/50/75/95th percentiles, skew and kurtosis (the statistics the
anomaly-diagnosis work of Tuncer et al. and Taxonomist use). A signal missing from a
window gives NaN features, which the models impute from training data only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STATS = ("mean", "std", "min", "max", "p05", "p25", "p50", "p75", "p95", "skew", "kurt")


def _window_stats(values: pd.core.groupby.SeriesGroupBy) -> pd.DataFrame:
    out = values.agg(["mean", "std", "min", "max", "skew"])
    for q, name in ((0.05, "p05"), (0.25, "p25"), (0.5, "p50"), (0.75, "p75"), (0.95, "p95")):
        out[name] = values.quantile(q)
    out["kurt"] = values.apply(lambda v: v.kurt())
    return out[list(STATS)]


def window_features(samples: pd.DataFrame, interval: float, window: int) -> pd.DataFrame:
    """Features of one sample table (``metric, t, value`` [, ``run_id``]).

    Returns one row per (run_id, window) with columns ``run_id``, ``window`` and
    ``<metric>:<stat>``. Windows with fewer than half their ticks are dropped.
    """
    if samples.empty:
        return pd.DataFrame(columns=["run_id", "window"])
    frame = samples.copy()
    if "run_id" not in frame:
        frame["run_id"] = 0
    frame["tick"] = np.rint(frame["t"].to_numpy() / interval).astype(int)
    frame["window"] = (frame["tick"] - 1) // window
    ticks = frame.groupby(["run_id", "window"])["tick"].nunique()
    complete = ticks[ticks >= max(2, (window + 1) // 2)].index
    frame = frame.set_index(["run_id", "window"]).loc[lambda f: f.index.isin(complete)].reset_index()
    if frame.empty:
        return pd.DataFrame(columns=["run_id", "window"])
    stats = _window_stats(frame.groupby(["run_id", "window", "metric"])["value"])
    wide = stats.unstack("metric")
    wide.columns = [f"{metric}:{stat}" for stat, metric in wide.columns]
    wide = wide.reindex(sorted(wide.columns), axis=1)
    return wide.reset_index()
