"""Does a reduced configuration miss live as often as the sweep measured it, at the same
utilisation? And does the CPU time per request depend on the configuration?

    python bench/manage_sweep_vs_live.py --sweeps bench/manage_live_s36/sweep*.csv.gz \
        --rounds bench/manage_live_s36/r?.csv.gz

First table: settled intervals on a fast host (probe at most 636 µs), above 30 % of the
maximum load, in configurations with less than the maximum's capacity: the share that
missed the target, by utilisation of the configuration's capacity, in the sweeps and in
the rounds (every policy, then heimdall-cheapest alone). Second table: the median CPU µs
per request of settled, met, fast-host intervals of the rounds, by offered load and
configuration (cells of at least 15 intervals).
"""

from __future__ import annotations

import argparse

import pandas as pd

SLOW_PROBE_US = 636  # the sweeps' 95th percentile of the host-speed probe (bench/manage.md, session 36)
BUCKETS = [0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 5]


def settled(files: list[str]) -> pd.DataFrame:
    d = pd.concat([pd.read_csv(f) for f in files])
    d = d[(d.offered_rps > 0) & d.settled].copy()
    d["miss"] = d.p95 > d.target
    d["fast"] = d.host_probe_us <= SLOW_PROBE_US
    d["policy"] = d.policy.str.split(" ").str[0]
    return d


def misses_by_utilisation(d: pd.DataFrame) -> pd.Series:
    top = d.cores.max() * d.level.max()
    x = d[(d.cores * d.level < top) & d.fast & (d.offered_rps > 0.3 * d.offered_rps.max())]
    return x.groupby(pd.cut(x.utilisation, BUCKETS), observed=False).miss.agg(
        lambda m: f"{m.mean() * 100:.1f} % of {len(m)}" if len(m) else "-")


def markdown(frame: pd.DataFrame) -> str:
    header = [frame.index.name or "", *map(str, frame.columns)]
    rows = [[str(i), *map(str, r)] for i, r in zip(frame.index, frame.itertuples(index=False))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *rows])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweeps", nargs="+", required=True)
    ap.add_argument("--rounds", nargs="+", required=True)
    args = ap.parse_args()
    sweeps, rounds = settled(args.sweeps), settled(args.rounds)
    table = pd.DataFrame({"sweeps": misses_by_utilisation(sweeps), "rounds": misses_by_utilisation(rounds),
                          "heimdall-cheapest": misses_by_utilisation(rounds[rounds.policy == "heimdall-cheapest"])})
    table.index.name = "utilisation"
    print(markdown(table))
    met = rounds[rounds.fast & ~rounds.miss]
    cost = met.groupby(["offered_rps", "cores", "level"]).cpu_us_per_request.agg(["size", "median"])
    cost = cost[cost["size"] >= 15]["median"].unstack(["cores", "level"]).round(1)
    cost = cost.astype(object).where(cost.notna(), "-")
    cost.columns = [f"{c} x {lv:g}" for c, lv in cost.columns]
    cost.index = [f"{r:.0f}" for r in cost.index]
    cost.index.name = "req/s"
    print()
    print(markdown(cost[sorted(cost.columns, key=lambda c: tuple(map(float, c.split(" x "))))]))


if __name__ == "__main__":
    main()
