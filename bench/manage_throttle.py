#!/usr/bin/env python3
"""Misses against the CFS quota's hold, for rounds recorded before `throttled_ms` existed.

Session 31 read the service cgroup's cpu.stat from outside the manager every 0.5 s
(wall time, group, quota, cpuset, nr_periods, nr_throttled, throttled_time in ns). Each
pass of a `perflearn manage --csv` file is aligned to those samples by its sequence of
quota and cpuset (the offset of t = 0 that makes the most samples agree with the
interval's configuration); each interval then gets the throttled time over its second.
Static passes (one configuration throughout) cannot be aligned and are left out.

    python bench/manage_throttle.py bench/manage_live_s31/throttle.txt.gz bench/manage_live_s31/r*.csv.gz
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import numpy as np
import pandas as pd

BANDS = [-1, 0, 5, 20, np.inf]
LABELS = ["not at all", "up to 5 ms/s", "5-20 ms/s", "over 20 ms/s"]


def samples(path: str) -> pd.DataFrame:
    d = pd.read_csv(path, sep=" ", names=["wall", "group", "quota", "cpus", "periods", "throttled", "ttime"])
    return d.assign(cores=d["cpus"].astype(str).map(lambda c: 1 + c.count(",") + c.count("-")))


def align(run: pd.DataFrame, s: pd.DataFrame, start: float, span: float = 1400.0) -> tuple[float, float]:
    """(agreement, wall time of t = 0) of the best offset after ``start``."""
    quota = (run["cores"] * run["level"] * 100_000).round().astype(int).to_numpy()
    cores, t = run["cores"].to_numpy(), run["t"].to_numpy()
    s = s[(s["wall"] >= start) & (s["wall"] <= start + span)]
    best = (0.0, start)
    for w0 in np.arange(start, start + span - t.max(), 0.1):
        i = np.searchsorted(t, s["wall"].to_numpy() - w0)
        ok = i < len(t)
        if ok.sum() < 100:
            continue
        agree = float(((quota[i[ok]] == s["quota"].to_numpy()[ok]) & (cores[i[ok]] == s["cores"].to_numpy()[ok])).mean())
        best = max(best, (agree, w0))
    return best


def held_back(run: pd.DataFrame, s: pd.DataFrame, w0: float) -> np.ndarray:
    """Throttled ms per second over each interval (NaN where no two samples bound it)."""
    walls, out = s["wall"].to_numpy(), []
    for t in run["t"]:
        a, b = np.searchsorted(walls, w0 + t - 1.0), np.searchsorted(walls, w0 + t) - 1
        if a < 1 or b < a:
            out.append(np.nan)
            continue
        lo, hi = s.iloc[a - 1], s.iloc[b]
        out.append((hi["ttime"] - lo["ttime"]) / 1e6 / (hi["wall"] - lo["wall"]))
    return np.array(out)


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples")
    parser.add_argument("csvs", nargs="+")
    args = parser.parse_args()
    d, parts = samples(args.samples), []
    for path in args.csvs:
        frame, start = pd.read_csv(path), None
        for policy, run in frame.groupby("policy", sort=False):
            if policy == "static":
                continue
            run = run.reset_index(drop=True)
            fits = []
            for group, s in d.groupby("group"):
                s = s.reset_index(drop=True)
                agree, w0 = align(run, s, s["wall"].min() if start is None else max(s["wall"].min(), start))
                fits.append((agree, w0, group))
            agree, w0, group = max(fits)
            start = w0 + run["t"].max()
            s = d[d["group"] == group].reset_index(drop=True)
            name = Path(path).name.split(".")[0]
            label = f"{policy} (B)" if name.endswith("b") else policy  # session 31: r<k>b ran B's setting
            parts.append(run.assign(file=name, policy=label, held=held_back(run, s, w0), agreement=agree))
    o = pd.concat(parts)
    o = o[o["offered_rps"] > 0].assign(miss=lambda f: f["p95"] > f["target"],
                                       band=lambda f: pd.cut(f["held"], BANDS, labels=LABELS))
    print("alignment (share of samples agreeing with the interval's configuration):")
    print(o.groupby(["file", "policy"], sort=False)["agreement"].first().round(3).to_string())
    table = o.groupby("band", observed=True)["miss"].agg(intervals="size", missed="sum")
    table["missed %"] = (table["missed"] / table["intervals"] * 100).round(1)
    print("\nall passes under load\n" + table.to_string())
    misses = o[o["miss"]].groupby(["policy", "band"], observed=True).size().unstack(fill_value=0)
    print("\nmisses by policy and hold\n" + misses.to_string())


if __name__ == "__main__":
    main()
