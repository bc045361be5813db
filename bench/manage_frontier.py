"""What heimdall-cheapest's misses would cost to remove, from rounds already run.

For each live round (a CSV of `perflearn manage --csv` holding a static and a
heimdall-cheapest pass, and a Heracles-2min and a Hipster pass to compare with), two
counterfactual rules are replayed on heimdall-cheapest's intervals, without running again:

- ``max after a miss``: after the first steady miss of a cheaper configuration in a load
  step (the manager's note says it distrusts it), the rest of the step runs at the maximum;
- ``max at the top``: every interval at the top load runs at the maximum (what Heracles's
  rule "everything above 85 % of the maximum load" does there).

Then, per configuration at the three top loads, over every evaluated pass of the rounds (all
policies; not Hipster's learning passes): intervals, the share that missed, median
utilisation and modelled power. It says whether a cheaper configuration that rarely misses
was there to be found.

Last, a bound in hindsight: one configuration per load, chosen knowing every configuration's
miss share and mean power at that load (pooled as above, configurations with at least 15
intervals), each load held as long as the trace holds it; the Pareto line of misses per pass
against energy saved. It ignores what any policy pays to learn those shares and to change
configuration at a step, and pools passes run on different days: a bound, not a policy.

An interval moved to the maximum is given static's mean modelled power at that load in
the same round, and its miss is counted as removed when a configuration other than the
maximum missed: an upper bound on the misses removed (the maximum misses too at times,
and more after a miss). Energy saved is against static's pass, as `perflearn manage`
reports it.

    python bench/manage_frontier.py bench/manage_live_s29/r[456].csv.gz bench/manage_live_s30/*.csv.gz \\
        bench/manage_live_s31/r?a.csv.gz
"""

from __future__ import annotations

import itertools
import sys

import pandas as pd

HEIMDALL, STATIC = "heimdall-cheapest", "static"


def misses(p: pd.DataFrame) -> pd.Series:
    return (p.p95 > p.target) & (p.offered_rps > 0)


def saving(power: pd.Series, static: pd.DataFrame) -> float:
    return 100 * (1 - power.sum() / static.power_w.sum())


def replay(frame: pd.DataFrame) -> dict:
    static = frame[frame.policy == STATIC]
    at_max_power = static.groupby("offered_rps").power_w.mean()
    h = frame[frame.policy == HEIMDALL].reset_index(drop=True)
    miss = misses(h)
    cheaper = (h.cores < static.cores.max()) | (h.level < static.level.max())
    step = h.offered_rps.ne(h.offered_rps.shift()).cumsum()
    after = pd.Series(False, index=h.index)
    for _, g in h.groupby(step):
        if g.offered_rps.iloc[0] == 0:
            continue
        first = g.index[(miss & cheaper & h.note.fillna("").str.contains("not trusted"))[g.index]]
        if len(first):
            after[first[0] + 1: g.index[-1]] = True
    top = h.offered_rps == h.offered_rps.max()
    row = {"round": "", "heimdall misses": int(miss.sum()), "saved %": saving(h.power_w, static)}
    for name, moved in (("max after a miss", after), ("max at the top", top)):
        power = h.power_w.where(~moved, h.offered_rps.map(at_max_power))
        row[f"{name}: misses removed"] = int((miss & cheaper & moved).sum())
        row[f"{name}: saved %"] = saving(power, static)
    for policy in ("heracles-2min", "hipster"):
        p = frame[frame.policy == policy]
        row[f"{policy} misses"] = int(misses(p).sum())
        row[f"{policy} saved %"] = saving(p.power_w, static)
    return row


def by_configuration(frames: list[pd.DataFrame], loads: int = 3, least: int = 5) -> pd.DataFrame:
    """Intervals, miss share, median utilisation and power per configuration at the top loads."""
    every = pd.concat(frames)
    every = every[(every.offered_rps > 0) & ~every.policy.str.contains("learning")]
    top = sorted(every.offered_rps.unique())[-loads:]
    every = every[every.offered_rps.isin(top)].assign(missed=lambda f: f.p95 > f.target)
    table = every.groupby(["offered_rps", "cores", "level"]).agg(
        intervals=("missed", "size"), missed=("missed", "mean"), utilisation=("utilisation", "median"),
        watts=("power_w", "median"))
    table["missed"] *= 100
    return table[table.intervals >= least].rename(columns={"missed": "missed %"})


def hindsight(frames: list[pd.DataFrame], least: int = 15) -> pd.DataFrame:
    """The Pareto line of (misses per pass, energy saved) over one configuration per load."""
    every = pd.concat(frames)
    every = every[~every.policy.str.contains("learning")].assign(missed=lambda f: (f.p95 > f.target) & (f.offered_rps > 0))
    static = every[every.policy == STATIC]
    per_pass = static.groupby("offered_rps").size() / len(frames)  # intervals at each load in one pass
    static_energy = (static.groupby("offered_rps").power_w.mean() * per_pass).sum()
    idle = every[(every.policy == HEIMDALL) & (every.offered_rps == 0)].power_w.mean() * per_pass.get(0.0, 0.0)
    stats = every[every.offered_rps > 0].groupby(["offered_rps", "cores", "level"]).agg(
        n=("missed", "size"), missed=("missed", "mean"), watts=("power_w", "mean")).reset_index()
    stats = stats[stats.n >= least]
    choices = [[(r.missed * per_pass[load], r.watts * per_pass[load], f"{r.cores:.0f}@{r.level:g}")
                for r in g.itertuples()] for load, g in stats.groupby("offered_rps")]
    loads = sorted(stats.offered_rps.unique())
    plans = sorted((sum(c[0] for c in plan), sum(c[1] for c in plan) + idle, [c[2] for c in plan])
                   for plan in itertools.product(*choices))
    line, least_energy = [], float("inf")
    for misses_, energy, plan in plans:
        if energy < least_energy - 1e-9:
            least_energy = energy
            line.append({"misses per pass": misses_, "QoS %": 100 * (1 - misses_ / per_pass[per_pass.index > 0].sum()),
                         "saved %": 100 * (1 - energy / static_energy),
                         **{f"{load:.0f} req/s": c for load, c in zip(loads, plan)}})
    return pd.DataFrame(line)


def main(paths: list[str]) -> None:
    rows, frames = [], []
    for path in paths:
        frame = pd.read_csv(path)
        if not {HEIMDALL, STATIC} <= set(frame.policy):
            print(f"{path}: no {HEIMDALL} and {STATIC} pass: left out", file=sys.stderr)
            continue
        frames.append(frame)
        rows.append({**replay(frame), "round": "/".join(path.split("/")[-2:]).split(".")[0]})
    if not rows:  # a traceback (KeyError: 'round') said less
        sys.exit(f"no file holds both a {HEIMDALL} and a {STATIC} pass: nothing to replay")
    table = pd.DataFrame(rows).set_index("round")
    total = table.filter(like="misses").sum().to_frame().T.assign(round="all: misses summed")
    mean = table.filter(like="saved").mean().to_frame().T.assign(round="all: saving averaged")
    pd.set_option("display.width", 250)
    print(pd.concat([table, total.set_index("round"), mean.set_index("round")]).round(1).to_string(na_rep=""))
    print()
    print("per configuration at the top loads (configurations with at least 5 intervals):")
    print(by_configuration(frames).round({"missed %": 1, "utilisation": 2, "watts": 3}).to_string())
    print()
    print("in hindsight, one configuration per load (cores@speed), the Pareto line down to 95 % met:")
    line = hindsight(frames)
    print(line[line["QoS %"] >= 95].round(2).to_string(index=False))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # --help was read as a file: a traceback
        sys.exit(__doc__)
    main(sys.argv[1:])
