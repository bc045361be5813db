#!/usr/bin/env python3
"""The policies of one live comparison under another power model, without running again.

Every control interval of `perflearn manage --csv` carries the configuration that ran
(cores, level) and its measured utilisation, so the modelled energy can be recomputed
for any `--power` model (server, tx1, or "static,idle,dynamic" watts) from the same run:
the QoS columns are the measured ones, unchanged.

`--hindsight` adds a row that no policy can run: at each interval, the least energy
among the policies' intervals that met the target (the configurations the round tried
at that moment, each with the utilisation it measured). It bounds what choosing among
them could have saved at full QoS: a policy that saves more than this row did so by
missing the target.

Usage: python bench/manage_repower.py /tmp/perflearn-manage-live.csv --power tx1 [--hindsight]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from perflearn.manage.loop import energy_under, summarize  # noqa: E402
from perflearn.manage.power import power_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--power", default="tx1")
    ap.add_argument("--hindsight", action="store_true", help="add the least energy that met the target at each interval")
    a = ap.parse_args()
    intervals = pd.read_csv(a.csv)
    if "utilisation" not in intervals:
        raise SystemExit(f"{a.csv}: no utilisation column (written before session 5); rerun the comparison")
    power = power_model(a.power)
    frames = {p: energy_under(f, power) for p, f in intervals.groupby("policy", sort=False)}
    static = frames["static"]["energy_j"].sum() if "static" in frames else None
    print(f"| policy | QoS guarantee | tardiness | energy ({a.power}, modelled) | vs static | changes |")
    print("|---|---|---|---|---|---|")
    for name, frame in frames.items():
        s = summarize(frame, static)
        print(f"| {name} | {s['qos_guarantee']:.1f}% | {s['qos_tardiness']:.2f} | {s['energy_j'] / 1e3:.3f} kJ | "
              f"{s['energy_reduction']:+.1f}% | {s['changes']} |")
    if a.hindsight:
        best = hindsight(pd.concat(frames.values()))
        s = summarize(best, static)
        print(f"| hindsight: least energy that met the target, per interval | {s['qos_guarantee']:.1f}% | "
              f"{s['qos_tardiness']:.2f} | {s['energy_j'] / 1e3:.3f} kJ | {s['energy_reduction']:+.1f}% | - |")


def hindsight(intervals: pd.DataFrame) -> pd.DataFrame:
    """Per interval (same t in every policy's run of one trace), the interval of least
    energy among those at or under target (an interval without latency, no request,
    counts as met); where none met, the lowest p95."""
    met = intervals["p95"].isna() | (intervals["p95"] <= intervals["target"])
    ranked = intervals.assign(_miss=~met, _p95=intervals["p95"].fillna(0.0))
    ranked = ranked.sort_values(["t", "_miss", "energy_j", "_p95"])
    best = ranked.groupby("t", sort=True).head(1)
    return best.drop(columns=["_miss", "_p95"]).assign(changed=False, reactions=0)


if __name__ == "__main__":
    main()
