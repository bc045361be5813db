"""Features of interval samples: statistics of each signal over windows of a run.

A window is ``window`` consecutive sampling ticks; for every signal it gives mean,
std, min, max, 5/25/50/75/95th percentiles, skew and kurtosis (the statistics the
anomaly-diagnosis work of Tuncer et al. and Taxonomist use). A signal missing from a
window gives NaN features, which the models impute from training data only.

Before the statistics, every tick gains derived signals that describe the rest of the
node rather than the workload (``DERIVED``): system-wide activity minus the workload's
own, shares of the node's CPU time, and memory the node would have without the
workload. They need only the current and the previous tick, so a live detector
computes them exactly as training did.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

STATS = ("mean", "std", "min", "max", "p05", "p25", "p50", "p75", "p95", "skew", "kurt")

# Bytes of Ethernet + IPv4 + TCP headers (with timestamps) that /proc/net/dev counts in
# every packet but no read() returns: discounted from every packet before comparing the
# node's traffic with the workload's socket bytes.
HEADER_BYTES = 66

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _derived(wide: pd.DataFrame) -> dict[str, pd.Series]:
    """Derived signals of a wide tick table (index run_id, t; one column per signal).

    A term that was not sampled makes the derived signal NaN at that tick (dropped
    later): missing, never a made-up 0.
    """
    def g(name: str) -> pd.Series:
        return wide[name] if name in wide else pd.Series(np.nan, index=wide.index)

    def clip(s: pd.Series) -> pd.Series:
        return s.clip(lower=0)

    own_cpu = g("proc.cpu.user") + g("proc.cpu.system")
    cpus = sum(g(f"sys.cpu.{f}") for f in _CPU_FIELDS)  # the node's CPUs (all time accounted)
    cpus = cpus.where(cpus > 0)
    sock_in = clip(g("proc.rchar") - g("proc.read_bytes"))  # read() bytes that were not storage
    sock_out = clip(g("proc.wchar") - g("proc.write_bytes"))
    rest_anon = clip(g("sys.mem.anon") - g("proc.rss_anon"))
    rest_cpu = clip(g("sys.cpu.user") + g("sys.cpu.nice") + g("sys.cpu.system") - own_cpu)
    out = {
        # what the rest of the node does: system-wide minus the workload's own, same units
        "rest.cpu": rest_cpu,
        "rest.cpu.user": clip(g("sys.cpu.user") + g("sys.cpu.nice") - g("proc.cpu.user")),
        "rest.cpu.system": clip(g("sys.cpu.system") - g("proc.cpu.system")),
        "rest.read_bytes": clip(g("sys.disk.read_bytes") - g("proc.read_bytes")),
        "rest.write_bytes": clip(g("sys.disk.write_bytes") - g("proc.write_bytes")),
        "rest.pgfault": clip(g("sys.vm.pgfault") - g("proc.minflt") - g("proc.majflt")),
        # the workload's socket (and pipe) bytes: an upper bound of its share of the traffic
        "rest.net_rx": clip(g("sys.net.rx_bytes") - sock_in),
        "rest.net_tx": clip(g("sys.net.tx_bytes") - sock_out),
        "rest.net_rx_payload": clip(g("sys.net.rx_bytes") - HEADER_BYTES * g("sys.net.rx_packets") - sock_in),
        "rest.net_tx_payload": clip(g("sys.net.tx_bytes") - HEADER_BYTES * g("sys.net.tx_packets") - sock_out),
        # memory the node would have available without the workload's resident memory
        "rest.mem_avail": g("sys.mem.available") + g("proc.rss"),
        # anonymous memory the rest of the node holds (heaps, arrays; no page cache, so it
        # does not drift with the files the workloads read), also as a share of the node's
        "rest.anon": rest_anon,
        "share.rest_anon": rest_anon / g("sys.mem.total").where(lambda m: m > 0),
        # shares of the node's CPU time: the same on a node of any size
        "share.rest_cpu": rest_cpu / cpus,
        "share.own_cpu": own_cpu / cpus,
        **{f"share.{f}": g(f"sys.cpu.{f}") / cpus for f in ("idle", "iowait", "softirq", "steal")},
        # node-wide over the workload's own, in log scale (0: all of it the workload's)
        "ratio.net_rx": np.log1p(g("sys.net.rx_bytes")) - np.log1p(sock_in),
        "ratio.disk_read": np.log1p(g("sys.disk.read_bytes")) - np.log1p(g("proc.read_bytes")),
        "ratio.disk_write": np.log1p(g("sys.disk.write_bytes")) - np.log1p(g("proc.write_bytes")),
        "ratio.pgfault": np.log1p(g("sys.vm.pgfault")) - np.log1p(g("proc.minflt") + g("proc.majflt")),
        "net.bytes_per_packet": g("sys.net.rx_bytes") / g("sys.net.rx_packets").where(lambda p: p > 0),
    }
    # per-second changes of gauges since the previous tick of the same run
    runs = wide.index.get_level_values(0)
    dt = pd.Series(wide.index.get_level_values(1), index=wide.index).groupby(runs).diff()
    d_avail = g("sys.mem.available").groupby(runs).diff() / dt
    d_rss = g("proc.rss").groupby(runs).diff() / dt
    out["rate.mem_available"] = d_avail
    out["rate.rss"] = d_rss
    out["rest.mem_growth"] = -d_avail - d_rss  # memory the rest of the node takes per second
    out["rate.rest_anon"] = rest_anon.groupby(runs).diff() / dt  # anonymous memory it takes per second
    return out


def with_rest(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` plus the derived signals at every tick where all their terms were sampled."""
    no_run = "run_id" not in samples
    frame = samples.assign(run_id=0) if no_run else samples
    wide = frame.pivot_table(index=["run_id", "t"], columns="metric", values="value", aggfunc="first")
    derived = []
    for name, value in _derived(wide).items():
        value = value.replace([np.inf, -np.inf], np.nan).dropna()
        if len(value):
            derived.append(value.rename("value").reset_index().assign(metric=name))
    if not derived:
        return samples
    extra = pd.concat(derived, ignore_index=True)
    if no_run:
        extra = extra.drop(columns="run_id")
    return pd.concat([samples, extra[list(samples.columns)]], ignore_index=True)


DERIVED = ("rest.", "share.", "ratio.", "rate.", "net.bytes_per_packet")

# Raw signals the classifier leaves out: the workload's own activity, and node-wide
# counts that mix the workload's activity with the interference's (each has an
# attributed or normalised version in DERIVED). On a workload never seen in training,
# its own disk or loopback traffic, I/O waits or softirqs would otherwise look like an
# injector's. Kept: the workload's run-queue delay (what contention does to it), memory
# reclaim and pressure, dirty memory, and any other signal (e.g. perf counters).
_MIXED = ("sys.cpu.", "sys.disk.", "sys.net.", "sys.softirq.", "sys.psi.cpu.", "sys.psi.io.", "sys.vm.pgfault",
          "sys.vm.pgmajfault", "sys.mem.available", "sys.mem.anon", "sys.mem.total", "sys.ctxt", "sys.intr",
          "sys.forks", "sys.procs_")


def node_signal(signal: str) -> bool:
    """Whether the classifier uses ``signal`` (see _MIXED)."""
    if signal.startswith(DERIVED):
        return True
    if signal.startswith("proc."):
        return signal == "proc.run_delay"
    return not signal.startswith(_MIXED)


def node_columns(columns, keep: Callable[[str], bool] = node_signal) -> list[str]:
    """The feature columns (``signal:stat``) whose signal the classifier uses; all of them
    when none is (samples without system-wide signals)."""
    columns = [c for c in columns if ":" in c]
    kept = [c for c in columns if keep(c.rsplit(":", 1)[0])]
    return kept or columns


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
