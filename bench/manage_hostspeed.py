"""Misses against the host's speed (docs/manage.md, "A slow host").

For each CSV of `perflearn manage --csv` (session 28 on: it has the host-speed probe's
column, host_probe_us), each pass's intervals under load are split by the host's speed
as the manager flags it (perflearn.manage.hostspeed.slow_flags: fixed work at least
1.3x the comparison's fastest). Per file and policy: intervals, misses, the share on a
slow host, the miss rate on a fast host and on a slow one; then pooled per policy, with
the service's CPU time per request on each.

    python bench/manage_hostspeed.py bench/manage_live_s28/*.csv.gz
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from perflearn.manage.hostspeed import slow_flags


def intervals(paths: list[str]) -> pd.DataFrame:
    parts = []
    for path in paths:
        frame = pd.read_csv(path)
        if "host_probe_us" not in frame:
            print(f"{path}: no host_probe_us column (recorded before session 28): left out", file=sys.stderr)
            continue
        if "host_probe_min_us" not in frame:  # session 28's first rounds recorded the median only
            print(f"{path}: no host_probe_min_us: the fastest is its fastest interval median", file=sys.stderr)
            frame["host_probe_min_us"] = frame["host_probe_us"]
        passes = {p: f for p, f in frame.groupby("policy", sort=False)}
        flags = slow_flags(passes)
        # the round's directory too: r1 of one session is not r1 of another
        for policy, f in passes.items():
            parts.append(f.assign(slow=flags[policy], file="/".join(path.split("/")[-2:]).split(".")[0]))
    frame = pd.concat(parts)
    frame = frame[(frame["offered_rps"] > 0) & frame["slow"].notna()]
    return frame.assign(miss=frame["p95"] > frame["target"], host=frame["slow"].map({0.0: "fast", 1.0: "slow"}))


def by_host(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rate = frame.pivot_table(index=keys, columns="host", values="miss", aggfunc="mean", observed=True) * 100
    counts = frame.groupby(keys, sort=False).agg(intervals=("miss", "size"), misses=("miss", "sum"),
                                                 slow_host=("slow", "mean"))
    counts["slow_host"] *= 100
    out = counts.join(rate.add_prefix("miss % on a ").add_suffix(" host"))
    return out.round(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+")
    frame = intervals(parser.parse_args().csv)
    pd.set_option("display.width", 200)
    print("per file and policy (intervals under load):")
    print(by_host(frame, ["file", "policy"]).to_string())
    print("\npooled per policy:")
    print(by_host(frame, ["policy"]).to_string())
    cost = frame.pivot_table(index="policy", columns="host", values="cpu_us_per_request", aggfunc="median")
    print("\nmedian CPU µs per request:")
    print(cost.round(1).to_string())


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head
        sys.exit(0)
