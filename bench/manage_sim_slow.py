"""Per-seed reading of a simulated slow host: `perflearn manage --simulate --slow-host S --seeds N --csv F`.

    python bench/manage_sim_slow.py slow_0.15.csv [slow_0.35.csv ...]

For each file: the seeds where static met 97.7 %, where each Heimdall variant met the seed's goal
(>= 97.7 % met, >= 22 % saved against static of the same seed) among those, where it beat Hipster
and Heracles-2min on both counts at once; then where the misses fell, summed over the seeds: at the
top load step, or below it on a slow or a fast host interval (slow: the host probe above 1.3x its
10th percentile in the seed's pass; the simulator's slow host runs it 1.61x slower).
"""
import sys

import pandas as pd

GOAL_QOS, GOAL_SAVED = 97.7, 22.0
HEIMDALLS = ("heimdall", "heimdall-cheapest", "heimdall-uncertain")
BASELINES = ("hipster", "heracles-2min")


def per_pass(frame: pd.DataFrame) -> pd.DataFrame:
    """QoS met % and energy saved % against static, per policy and seed."""
    met = frame.assign(ok=frame.p95 <= frame.target).groupby(["policy", "seed"]).ok.mean() * 100
    energy = frame.groupby(["policy", "seed"]).energy_j.sum()
    static = energy.xs("static", level="policy")
    saved = (1 - energy / static.reindex(energy.index, level="seed")) * 100
    return pd.DataFrame({"qos": met, "saved": saved})


def misses(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (policy, seed), p in frame.groupby(["policy", "seed"]):
        miss = p.p95 > p.target
        top = p.offered_rps >= p.offered_rps.max() * 0.999
        slow = p.host_probe_us > 1.3 * p.host_probe_us.quantile(0.1)  # a fast interval: 30 % or more are
        rows.append({"policy": policy, "misses": int(miss.sum()), "at the top step": int((miss & top).sum()),
                     "below it, slow host": int((miss & ~top & slow).sum()),
                     "below it, fast host": int((miss & ~top & ~slow).sum())})
    return pd.DataFrame(rows).groupby("policy", sort=False).sum()


def main(paths: list[str]) -> None:
    for path in paths:
        frame = pd.read_csv(path)
        passes = per_pass(frame)
        seeds = sorted(frame.seed.unique())
        static_met = [s for s in seeds if passes.loc[("static", s), "qos"] >= GOAL_QOS]
        print(f"{path}: {len(seeds)} seeds; static met {GOAL_QOS} % in {len(static_met)}")
        for h in HEIMDALLS:
            if h not in frame.policy.values:
                continue
            goal = [s for s in seeds if passes.loc[(h, s), "qos"] >= GOAL_QOS and passes.loc[(h, s), "saved"] >= GOAL_SAVED]
            if not all(b in frame.policy.values for b in BASELINES):
                print(f"  {h}: no {' and '.join(BASELINES)} passes to beat")
                continue
            beat = [s for s in seeds if all(passes.loc[(h, s), "qos"] > passes.loc[(b, s), "qos"]
                                            and passes.loc[(h, s), "saved"] > passes.loc[(b, s), "saved"]
                                            for b in BASELINES)]
            print(f"  {h}: goal in {len(goal)} seeds, {len(set(goal) & set(static_met))} of the {len(static_met)} "
                  f"where static met it; beats {' and '.join(BASELINES)} on both counts in {len(beat)}")
        table = misses(frame)
        print(table.loc[[p for p in ("static", "hipster", "heracles-2min", *HEIMDALLS) if p in table.index]]
              .to_string())
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # --help was read as a file: a traceback
        sys.exit(__doc__)
    main(sys.argv[1:])
