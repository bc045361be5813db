#!/usr/bin/env python3
"""What two changes to heimdall-cheapest's CPU headroom would have done in rounds already
run, without running them (bench/manage.md, session 63).

1. By load: each policy's misses, its energy saved against static (J) and its mean capacity
   (cores x speed): where one policy's energy lead over another comes from.
2. A wider headroom (``--room``, default 0.95, against the 0.9 in use): each settled
   heimdall-cheapest interval's measured demand (busy full-speed CPUs) is put on the cheapest
   configuration (``--power`` model) that leaves 0.9, and ``--room``, of its capacity. Where
   the two differ, the wider one saves the power between them and risks a miss at the share
   of every policy's settled intervals at that utilisation (+-0.025) that missed in the
   same rounds. An estimate: the demand is the one measured on the configuration that ran.
3. With ``--cost-model``: the intervals a demand of at least the profile's CPU time per
   request of the configuration that ran (not the measured one, where lower) would have
   moved off it, as the 0.9 headroom reads it, and how many of them missed.

    python bench/manage_counterfactual.py bench/manage_live_s62/[rt]?.csv.gz
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from perflearn.manage.policy import Configuration
from perflearn.manage.power import power_model

HEIMDALL = "heimdall-cheapest"


def read(paths: list[str]) -> pd.DataFrame:
    frames = [pd.read_csv(p).assign(round=p.rsplit("/", 1)[-1].split(".")[0]) for p in paths]
    frame = pd.concat(frames, ignore_index=True)
    return frame.assign(miss=(frame["p95"] > frame["target"]) & (frame["rps"] > 0))


def by_load(frame: pd.DataFrame) -> pd.DataFrame:
    own = frame[frame["offered_rps"] > 0].assign(capacity=frame["cores"] * frame["level"])
    table = own.groupby(["offered_rps", "policy"]).agg(misses=("miss", "sum"), energy_j=("energy_j", "sum"),
                                                       capacity=("capacity", "mean")).unstack()
    saved = -table["energy_j"].sub(table["energy_j"]["static"], axis=0).round(0)
    return pd.concat({"misses": table["misses"], "saved J": saved, "capacity": table["capacity"].round(3)}, axis=1)


def wider_room(frame: pd.DataFrame, room: float, power) -> str:
    configs = sorted({Configuration(int(c), float(l)) for c, l in frame[["cores", "level"]].drop_duplicates().to_numpy()},
                     key=lambda c: (c.cores * c.level, c.cores))
    settled = frame[(frame["settled"] == True) & (frame["offered_rps"] > 0) & frame["p95"].notna()]  # noqa: E712
    pool = settled[settled["policy"] != "static"]
    own = settled[settled["policy"] == HEIMDALL]
    demand = (own["utilisation"] * own["cores"] * own["level"]).to_numpy()
    maximum = configs[-1]

    def watts(c: Configuration, d: float) -> float:
        return power.watts(c, min(1.0, d / (c.cores * c.level)))

    def cheapest(d: float, r: float) -> Configuration:
        return min((c for c in configs if d <= r * c.cores * c.level), key=lambda c: watts(c, d), default=maximum)

    def risk(u: float) -> float:
        near = pool[(pool["utilisation"] > u - 0.025) & (pool["utilisation"] <= u + 0.025)]
        return float(near["miss"].mean()) if len(near) else float("nan")

    moved, saved, extra = 0, 0.0, 0.0
    for d in demand:
        now, wider = cheapest(d, 0.9), cheapest(d, room)
        if now != wider:
            moved, saved = moved + 1, saved + watts(now, d) - watts(wider, d)
            extra += risk(d / (wider.cores * wider.level))
    static = sum(watts(maximum, d) for d in demand)
    rounds = own["round"].nunique()
    return (f"{len(own)} settled {HEIMDALL} intervals over {rounds} rounds: at headroom {room:g}, {moved} would run a "
            f"cheaper configuration, for {extra:.1f} more misses expected ({extra / rounds:.1f} a round, "
            f"{extra / len(own) * 100:.2f} % of intervals) and {saved / static * 100:.1f} points more of static's "
            "energy saved")


def profiled_floor(frame: pd.DataFrame, cost_path: str) -> pd.DataFrame:
    from perflearn.learn import load
    from perflearn.manage.compare import model_predictor

    cost = model_predictor(load(cost_path), 1e-6)
    own = frame[(frame["policy"] == HEIMDALL) & (frame["rps"] > 0)].copy()
    profiled, _ = cost(pd.DataFrame({"cores": own["cores"], "level": own["level"], "rps": own["offered_rps"],
                                     "host_probe_us": own["host_probe_us"]}))
    own["profiled_us"] = np.asarray(profiled, dtype=float) * 1e6
    own["profiled_utilisation"] = own["profiled_us"] * 1e-6 * own["offered_rps"] / (own["cores"] * own["level"])
    return own[own["profiled_utilisation"] > 0.9][["round", "t", "offered_rps", "cores", "level", "utilisation",
                                                    "cpu_us_per_request", "profiled_us", "miss"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--room", type=float, default=0.95)
    parser.add_argument("--power", default="tx1")
    parser.add_argument("--cost-model", help="the profile's cost model (perflearn fit ... -t cpu_us_per_request)")
    args = parser.parse_args()
    frame = read(args.files)
    print(by_load(frame).to_string())
    print(wider_room(frame, args.room, power_model(args.power)))
    if args.cost_model:
        moved = profiled_floor(frame, args.cost_model)
        print(f"a demand floored at the profile's cost would have moved {len(moved)} intervals off their configuration, "
              f"{int(moved['miss'].sum())} of which missed:")
        print(moved.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
