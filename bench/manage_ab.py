#!/usr/bin/env python3
"""A/B of one policy's setting across paired invocations of `perflearn manage --csv`.

A round is two invocations run back to back: A (static and the policies) and B (static
and the policy under another setting, e.g. `--headroom 0.8`). Per round, every pass of
both: QoS met, energy saved against its own invocation's static and against the mean of
the round's two statics, misses at the top load, and the share of intervals on a slow
host (host speed judged over all passes of the round together). Then the pooled miss
rate on a fast host per pass, and B's policy against A's, round by round.

    python bench/manage_ab.py --label "headroom 0.8" bench/manage_live_s31/r1a.csv.gz \
        bench/manage_live_s31/r1b.csv.gz [RkA RkB ...]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from perflearn.manage.hostspeed import slow_flags
from perflearn.manage.loop import summarize


def round_passes(a: str, b: str, label: str) -> dict[str, pd.DataFrame]:
    """The passes of one round, B's named ``NAME (label)``."""
    passes = {}
    for path, suffix in ((a, ""), (b, f" ({label})")):
        for policy, frame in pd.read_csv(path).groupby("policy", sort=False):
            passes[policy + suffix] = frame
    return passes


def round_table(passes: dict[str, pd.DataFrame], label: str) -> pd.DataFrame:
    statics = {name: f["energy_j"].sum() for name, f in passes.items() if name.startswith("static")}
    flags = slow_flags(passes) or {}
    rows = []
    for name, frame in passes.items():
        own = statics[f"static ({label})"] if name.endswith(f"({label})") else statics["static"]
        s = summarize(frame, own)
        loaded = frame["offered_rps"] > 0
        top = frame["offered_rps"] >= 0.95 * frame["offered_rps"].max()
        slow = flags.get(name, pd.Series(np.nan, index=frame.index))[loaded]
        miss = frame["p95"] > frame["target"]
        rows.append({
            "pass": name, "QoS %": round(s["qos_guarantee"], 1),
            "saved vs own static %": round(s["energy_reduction"], 1),
            "saved vs both statics %": round((1 - s["energy_j"] / np.mean(list(statics.values()))) * 100, 1),
            "misses": int(miss.sum()), "at top load": int((miss & top).sum()),
            "fast-host intervals": int((slow == 0).sum()), "fast-host misses": int((miss[loaded] & (slow == 0)).sum()),
            "host slow %": round(float(slow.mean() * 100), 0) if slow.notna().any() else float("nan"),
        })
    return pd.DataFrame(rows).set_index("pass")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csvs", nargs="+", help="A then B of each round, round after round")
    parser.add_argument("--label", required=True, help="what B changed, e.g. 'headroom 0.8'")
    parser.add_argument("--policy", default="heimdall-cheapest", help="the policy B runs under its setting")
    args = parser.parse_args(argv)
    if len(args.csvs) % 2:
        print("error: give the CSVs in pairs (A then B of each round)", file=sys.stderr)
        return 2
    pooled, paired = [], []
    for a, b in zip(args.csvs[::2], args.csvs[1::2]):
        table = round_table(round_passes(a, b, args.label), args.label)
        print(f"\n{Path(a).name.split('.')[0]} + {Path(b).name.split('.')[0]}")
        print(table.to_string())
        pooled.append(table)
        ours, theirs = table.loc[f"{args.policy} ({args.label})"], table.loc[args.policy]
        paired.append({"QoS": ours["QoS %"] - theirs["QoS %"],
                       "saved": ours["saved vs both statics %"] - theirs["saved vs both statics %"]})
    total = pd.concat(pooled).groupby(level=0, sort=False)[["fast-host intervals", "fast-host misses"]].sum()
    total["fast-host miss %"] = (total["fast-host misses"] / total["fast-host intervals"] * 100).round(2)
    print("\npooled over the rounds\n" + total.to_string())
    diff = pd.DataFrame(paired)
    print(f"\n{args.policy} ({args.label}) minus {args.policy}, per round (saved: against both statics' mean)")
    print(diff.round(1).to_string())
    print(f"mean: QoS {diff['QoS'].mean():+.2f} points, saved {diff['saved'].mean():+.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
