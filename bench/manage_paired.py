#!/usr/bin/env python3
"""Two policies of interleaved live comparisons (`perflearn manage --interleave --csv`),
paired turn by turn.

With --interleave every step of the trace is run by every policy in turn, so policy A's
turn at step k and policy B's ran minutes apart at most, on the same host phase. Per
step and round: A's misses minus B's, and A's energy minus B's in points of static's
energy over the step. The mean over every (round, step) with its 95 % margin (t
quantile, steps as the unit) says whether A misses less or saves more than B beyond
the noise of the host; the per-round totals are printed too.

    python bench/manage_paired.py bench/manage_live_s34/r*.csv.gz --a heimdall-cheapest --b hipster
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
from scipy import stats


def steps(frame: pd.DataFrame, policy: str, slot: int) -> pd.DataFrame:
    """Per step of the trace: intervals, misses, energy (J) of ``policy``'s turn."""
    own = frame[frame["policy"] == policy]
    if own.empty:
        raise SystemExit(f"no policy {policy!r} in the comparison (has: {', '.join(frame['policy'].unique())})")
    step = ((own["t"] - 1e-9) // slot).astype(int)
    miss = ~(own["p95"] <= own["target"]) & (own["rps"] > 0)
    return pd.DataFrame({"miss": miss, "energy_j": own["energy_j"], "step": step}).groupby("step").sum()


def paired(rounds: dict[str, pd.DataFrame], a: str, b: str, slot: int) -> pd.DataFrame:
    rows = []
    for name, frame in rounds.items():
        if "service_interval" not in frame or frame["service_interval"].isna().all():
            raise SystemExit(f"{name}: not an interleaved comparison (no service_interval): run with --interleave")
        sa, sb, static = steps(frame, a, slot), steps(frame, b, slot), steps(frame, "static", slot)
        for k in sa.index.intersection(sb.index):
            rows.append({"round": name, "step": k, "misses": sa.at[k, "miss"] - sb.at[k, "miss"],
                         "energy": (sa.at[k, "energy_j"] - sb.at[k, "energy_j"]) / static["energy_j"].sum() * 100,
                         "misses_a": sa.at[k, "miss"], "misses_b": sb.at[k, "miss"]})
    return pd.DataFrame(rows)


def margin(values: pd.Series) -> tuple[float, float]:
    n = len(values)
    if n < 2:
        return float(values.mean()), float("nan")
    return float(values.mean()), float(stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--a", default="heimdall-cheapest")
    ap.add_argument("--b", default="hipster")
    ap.add_argument("--step-intervals", type=int, default=20, help="intervals per step (--step-seconds / --interval)")
    args = ap.parse_args(argv)
    rounds = {path: pd.read_csv(path) for path in args.csv}
    table = paired(rounds, args.a, args.b, args.step_intervals)
    per_round = table.groupby("round")[["misses_a", "misses_b", "energy"]].sum()
    print(f"{args.a} (A) against {args.b} (B), per round: misses of A, of B; A's energy minus B's, % of static's")
    print(per_round.round(2).to_string())
    margins = {column: margin(table[column]) for column in ("misses", "energy")}
    for column, what in (("misses", "misses per step, A - B"), ("energy", "energy per step, A - B, points of static's")):
        mean, half = margins[column]
        print(f"{what}: {mean:+.3f} ± {half:.3f} (95 %, {len(table)} steps)")
    per = len(table) / len(rounds)  # steps per round
    (energy, energy_half), (misses, misses_half) = margins["energy"], margins["misses"]
    print(f"so over a round: energy {energy * per:+.2f} ± {energy_half * per:.2f} points, "
          f"misses {misses * per:+.2f} ± {misses_half * per:.2f}")


if __name__ == "__main__":
    sys.exit(main())
