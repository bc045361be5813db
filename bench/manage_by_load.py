#!/usr/bin/env python3
"""Where two policies of live comparisons part: energy and misses by load.

Each interval of `perflearn manage --csv` is put in the tenth of the maximum load its
measured rate fell in (rounded, capped at 10). Per tenth: the intervals of policies A and
B, A's energy minus B's in points of static's energy (mean over the rounds given, each
round against its own static pass), and the intervals each missed the target in. The
gaps add up to the difference of the two policies' "energy saved" (mean of the rounds).

Usage: python bench/manage_by_load.py ROUND.csv[.gz] ... --max-rps 38000 \
           [--a heimdall-cheapest] [--b hipster]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def by_load(rounds: list[pd.DataFrame], max_rps: float, a: str, b: str) -> pd.DataFrame:
    rows = []
    for intervals in rounds:
        d = intervals.assign(tenth=(intervals["rps"] / max_rps * 10).round().clip(upper=10),
                             miss=~(intervals["p95"] <= intervals["target"]))
        static = d.loc[d["policy"] == "static", "energy_j"].sum()
        for tenth, g in d.groupby("tenth"):
            pa, pb = g[g["policy"] == a], g[g["policy"] == b]
            rows.append({"tenth": tenth, f"n {a}": len(pa), f"n {b}": len(pb),
                         "gap points": (pa["energy_j"].sum() - pb["energy_j"].sum()) / static * 100,
                         f"misses {a}": int(pa["miss"].sum()), f"misses {b}": int(pb["miss"].sum())})
    table = pd.DataFrame(rows).groupby("tenth").sum()
    table["gap points"] /= len(rounds)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path, nargs="+")
    ap.add_argument("--max-rps", type=float, required=True, help="the maximum load of the comparison (from the knee)")
    ap.add_argument("--a", default="heimdall-cheapest")
    ap.add_argument("--b", default="hipster")
    args = ap.parse_args()
    rounds = [pd.read_csv(path) for path in args.csv]
    for path, intervals in zip(args.csv, rounds):
        missing = {args.a, args.b, "static"} - set(intervals["policy"])
        if missing:
            raise SystemExit(f"{path}: no intervals of {', '.join(sorted(missing))}")
    table = by_load(rounds, args.max_rps, args.a, args.b)
    print(table.round(2).to_string())
    print(f"total gap: {table['gap points'].sum():+.2f} points of static's energy ({args.a} minus {args.b})")


if __name__ == "__main__":
    main()
