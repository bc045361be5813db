"""Where the simulator's slow host (``--slow-host``, ``SlowHost``) gets its numbers: the
live rounds' intervals, read again.

    python bench/manage_slow_host.py bench/manage_live_s3*/r*.csv.gz bench/manage_live_s4*/r*.csv.gz

Per round, in the order the service ran the intervals: the share of slow intervals
(``hostspeed.slow_flags``), the chance of a slow interval after a fast one and after a
slow one, their difference (the lag-1 correlation of the flag) and how much slower the
probe ran. Then static's settled intervals by load: slow against fast, the CPU time per
request, the median and spread of log p95 (against the fast median of the same round
and load), and the share that missed.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from perflearn.manage.hostspeed import slow_flags


def read(path: str) -> pd.DataFrame:
    frame = pd.read_csv(path)
    if "service_interval" in frame:
        frame = frame.sort_values("service_interval", kind="stable")
    return frame.assign(slow=slow_flags({"round": frame})["round"].to_numpy(), round=path)


def spells(frame: pd.DataFrame) -> dict[str, float]:
    flag = frame["slow"].dropna().to_numpy()
    before, after = flag[:-1], flag[1:]
    after_fast, after_slow = after[before == 0].mean(), after[before == 1].mean() if (before == 1).any() else np.nan
    probe = frame["host_probe_us"]
    return {"intervals": len(flag), "slow": flag.mean(), "after fast": after_fast, "after slow": after_slow,
            "persistence": after_slow - after_fast,
            "probe ratio": probe[frame["slow"] == 1].median() / probe[frame["slow"] == 0].median()}


def at_the_maximum(frames: list[pd.DataFrame]) -> pd.DataFrame:
    rows = pd.concat([f[(f["policy"] == "static") & (f["settled"] == 1) & f["slow"].notna() & (f["offered_rps"] > 1000)]
                      for f in frames], ignore_index=True)
    rows = rows.assign(load=(rows["offered_rps"] / 1000).round(), log_p95=np.log(rows["p95"]),
                       missed=rows["p95"] > rows["target"])
    fast = rows[rows["slow"] == 0].groupby(["round", "load"], as_index=False)[["log_p95", "cpu_us_per_request"]].median()
    rows = rows.merge(fast, on=["round", "load"], suffixes=("", "_fast"))
    rows["log_p95_vs_fast"] = rows["log_p95"] - rows["log_p95_fast"]
    rows["cpu_vs_fast"] = rows["cpu_us_per_request"] / rows["cpu_us_per_request_fast"]
    return rows.groupby(["load", "slow"]).agg(
        intervals=("p95", "size"), cpu_ratio=("cpu_vs_fast", "median"),
        p95_ratio=("log_p95_vs_fast", lambda x: float(np.exp(x.median()))),
        log_p95_sd=("log_p95_vs_fast", "std"), missed=("missed", "mean"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="live --csv files with host_probe_us")
    args = parser.parse_args()
    frames = [f for f in map(read, args.files) if f["host_probe_us"].notna().any()]
    table = pd.DataFrame([{"round": f["round"].iloc[0], **spells(f)} for f in frames])
    pd.set_option("display.width", 200)
    print(table.round(3).to_string(index=False))
    print("\nmedian over rounds:")
    print(table.drop(columns=["round"]).median().round(3).to_string())
    print("\nstatic, settled, slow against fast host, by load (k req/s):")
    print(at_the_maximum(frames).round(3).to_string())


if __name__ == "__main__":
    main()
