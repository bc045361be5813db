#!/usr/bin/env python3
"""The policies of one live comparison under another power model, without running again.

Every control interval of `perflearn manage --csv` carries the configuration that ran
(cores, level) and its measured utilisation, so the modelled energy can be recomputed
for any `--power` model (server, tx1, or "static,idle,dynamic" watts) from the same run:
the QoS columns are the measured ones, unchanged.

Usage: python bench/manage_repower.py /tmp/perflearn-manage-live.csv --power tx1
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


if __name__ == "__main__":
    main()
