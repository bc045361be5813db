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

# What the rest of the node does: system-wide signals minus the workload's own. They
# describe the interference rather than the workload, so they carry over to workloads
# the model has never seen. name -> (system-wide terms, workload terms), same units.
REST = {
    "rest.cpu": (("sys.cpu.user", "sys.cpu.nice", "sys.cpu.system"), ("proc.cpu.user", "proc.cpu.system")),
    "rest.read_bytes": (("sys.disk.read_bytes",), ("proc.read_bytes",)),
    "rest.write_bytes": (("sys.disk.write_bytes",), ("proc.write_bytes",)),
    "rest.pgfault": (("sys.vm.pgfault",), ("proc.minflt", "proc.majflt")),
    # bytes the workload moved through read/write calls that were not storage: its own
    # sockets (and pipes), an upper bound of its share of the network traffic
    "rest.net_rx": (("sys.net.rx_bytes", "proc.read_bytes"), ("proc.rchar",)),
    "rest.net_tx": (("sys.net.tx_bytes", "proc.write_bytes"), ("proc.wchar",)),
}


def with_rest(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` plus the REST signals at every tick where all their terms were sampled."""
    keys = ["run_id", "t"] if "run_id" in samples else ["t"]
    needed = {m for plus, minus in REST.values() for m in (*plus, *minus)}
    wide = samples[samples["metric"].isin(needed)].pivot_table(index=keys, columns="metric", values="value",
                                                               aggfunc="first")
    derived = []
    for name, (plus, minus) in REST.items():
        if all(m in wide for m in (*plus, *minus)):
            value = wide[list(plus)].sum(axis=1, min_count=len(plus)) - wide[list(minus)].sum(axis=1, min_count=len(minus))
            derived.append(value.clip(lower=0).rename("value").reset_index().assign(metric=name))
    return pd.concat([samples, *derived], ignore_index=True) if derived else samples


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
    frame = with_rest(samples)
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
