#!/usr/bin/env python3
"""One line per live pass of one policy: its misses and its interval p95 by load.

    python bench/manage_passes.py bench/manage_live_s27/static_1core_*.csv.gz [--policy static]

For A/B comparisons of the harness (bench/manage.md, session 27): per pass, the
intervals over the target, and at 60, 80 and 100 % of the pass's peak offered load the
median, 90th percentile and maximum interval p95 (µs) over the intervals outside a
step's first three, with the median CPU time per request and utilisation at the peak.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pandas as pd


def summary(path: str, policy: str, step_s: int = 20) -> dict:
    d = pd.read_csv(path)
    d = d[d.policy == policy]
    tenth = (d.offered_rps / d.offered_rps.max() * 10).round()
    steady = d[d.t.astype(int) % step_s > 2].assign(tenth=tenth)
    row = {"pass": Path(path).name.split(".")[0], "misses": int((d.p95 > d.target).sum())}
    for tenths in (6, 8, 10):
        p95 = steady[steady.tenth == tenths].p95 * 1e6
        for name, value in (("median", p95.median()), ("q90", p95.quantile(0.9)), ("max", p95.max())):
            row[f"{tenths * 10}%: {name}"] = round(value)
    top = steady[steady.tenth == 10]
    row["µs CPU/request at 100%"] = round(top.cpu_us_per_request.median(), 1)
    row["utilisation at 100%"] = round(top.utilisation.median(), 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--policy", default="static")
    args = parser.parse_args()
    print(pd.DataFrame([summary(p, args.policy) for p in args.csv]).to_string(index=False))


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
    main()
