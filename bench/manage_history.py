#!/usr/bin/env python3
"""The live evidence for the issue's goal, one line per session: the rounds of
`perflearn manage --csv` grouped by their directory, each policy's QoS guarantee and
energy saved against static (means over the rounds), in how many rounds Heimdall met the
goal (97.7 % met, 22 % saved), and in how many it beat both baselines on both counts at
once, strictly (a tie to the 0.1 point perflearn prints is not a win).

    python bench/manage_history.py bench/manage_live_s3[56]/r?.csv.gz --heimdall heimdall-cheapest
    python bench/manage_history.py bench/manage_live_s3[4-9]/r?.csv.gz bench/manage_live_s4[02]/r?.csv.gz --by host

``--by host`` groups the rounds by how slow the host was in Heimdall's intervals instead
(at most 25 %, 25-50 %, over 50 %): which rounds could show the goal at all.

Every number is computed as `perflearn manage` prints it (`manage.loop.summarize`); the
host's slow share is that of Heimdall's own intervals (`manage.hostspeed`, since session 28).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from perflearn.manage.hostspeed import slow_intervals
from perflearn.manage.loop import summarize

BASELINES = ("hipster", "heracles-2min")
GOAL_MET, GOAL_SAVED = 97.7, 22.0


def round_row(path: Path, heimdall: str) -> dict | None:
    """One round: each policy's (QoS, saved), the goal and the strict win; None without Heimdall or static."""
    frame = pd.read_csv(path)
    frames = {name: f for name, f in frame.groupby("policy") if "(learning)" not in name}
    if heimdall not in frames or "static" not in frames:
        return None
    static = frames["static"]["energy_j"].sum()
    # to the 0.1 point perflearn prints: a difference it does not show is a tie
    scores = {name: {k: round(v, 1) for k, v in summarize(f, static).items()} for name, f in frames.items()}
    ours = scores[heimdall]
    row = {"session": path.parent.name.removeprefix("manage_live_")}
    for name in ("static", heimdall, *BASELINES):
        row[f"{name} met"] = scores[name]["qos_guarantee"] if name in scores else np.nan
        row[f"{name} saved"] = scores[name]["energy_reduction"] if name in scores else np.nan
    row["goal"] = ours["qos_guarantee"] >= GOAL_MET and ours["energy_reduction"] >= GOAL_SAVED
    row["static met goal"] = scores["static"]["qos_guarantee"] >= GOAL_MET
    row["hipster goal"] = ("hipster" in scores and scores["hipster"]["qos_guarantee"] >= GOAL_MET
                           and scores["hipster"]["energy_reduction"] >= GOAL_SAVED)
    rivals = [scores[b] for b in BASELINES if b in scores]
    row["beats both"] = (len(rivals) == len(BASELINES) and all(
        ours["qos_guarantee"] > r["qos_guarantee"] and ours["energy_reduction"] > r["energy_reduction"] for r in rivals))
    slow = slow_intervals(frames) if "host_probe_us" in frame else None
    row["host slow"] = slow.get(heimdall, np.nan) if slow else np.nan
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csvs", nargs="+", type=Path)
    parser.add_argument("--heimdall", default="heimdall-cheapest", help="the Heimdall policy judged")
    parser.add_argument("--by", choices=("session", "host"), default="session", help="how rounds are grouped")
    args = parser.parse_args()
    rows = [r for r in (round_row(p, args.heimdall) for p in args.csvs) if r is not None]
    if not rows:
        raise SystemExit(f"no round with both static and {args.heimdall}")
    rounds = pd.DataFrame(rows)
    if args.by == "host":
        rounds["group"] = pd.cut(rounds["host slow"], [-1, 25, 50, 101], labels=["<= 25 %", "25-50 %", "> 50 %"])
        by = rounds.dropna(subset=["group"]).groupby("group", observed=True)
    else:
        rounds["order"] = rounds["session"].str.extract(r"(\d+)", expand=False).astype(float)
        by = rounds.sort_values("order", kind="stable").rename(columns={"session": "group"}).groupby("group", sort=False)
    table = pd.DataFrame({"rounds": by.size(), "host slow %": [("-" if np.isnan(v) else f"{v:.0f}") for v in by["host slow"].mean()]})
    for name in ("static", args.heimdall, *BASELINES):
        met, saved = by[f"{name} met"].mean(), by[f"{name} saved"].mean()
        table[name] = [("-" if np.isnan(m) else f"{m:.1f} / {s:.1f}" if name != "static" else f"{m:.1f}")
                       for m, s in zip(met, saved)]
    table["static met 97.7 %"] = by["static met goal"].sum().astype(int)
    table["goal held"] = by["goal"].sum().astype(int)
    table["beats both"] = by["beats both"].sum().astype(int)
    table["Hipster's goal held"] = by["hipster goal"].sum().astype(int)
    print(f"means over each {'group' if args.by == 'host' else 'session'}'s rounds: QoS met % / energy saved % against static; goal: "
          f"{args.heimdall} >= {GOAL_MET} % met and >= {GOAL_SAVED:g} % saved")
    print(f"| {'host slow' if args.by == 'host' else 'session'} | " + " | ".join(table.columns) + " |")
    print("|---" * (len(table.columns) + 1) + "|")
    for group, row in table.iterrows():
        print(f"| {group} | " + " | ".join(str(v) for v in row) + " |")


if __name__ == "__main__":
    main()
