"""Where a live round's misses are, per policy, and how they cluster in time.

    python bench/manage_misses.py bench/manage_live_s25/r1.csv.gz ...

Each miss (an interval whose p95 is over the target) falls in one kind, in this order:
- ``step``: in the first three intervals of a load step (the seed's steps are 20 s);
- ``at maximum``: the maximum configuration ran (drains after a miss, the machine's spells);
- ``after a miss``: the interval before missed too;
- ``steady``: the rest; ``above 75 %`` counts those of them over 75 % utilisation.

Then, per policy, the chance of a miss after an interval that met the target (how often
a miss run begins) and after one that missed (how long it lasts), and when the miss was
two and three intervals back; for ``static`` (one configuration throughout) that is the
machine's own clustering. A policy that misses more than static through more entries,
with the same persistence, chooses configurations that miss; through more persistence,
it recovers badly (session 40: the former). Last, per policy, the chance of a
miss by the intervals since its last miss (outside the first three intervals of a step):
how long a spell lasts, and whether a policy's choices after a miss (the maximum until
the target is met, then cheaper again) miss more than static does as long after one.
"""

from __future__ import annotations

import signal
import sys

import pandas as pd


def kinds(g: pd.DataFrame, top: tuple[int, float], step_s: int = 20) -> dict[str, int]:
    """``top``: the round's maximum configuration (cores, level), which static runs."""
    miss = g.p95 > g.target
    t = g.t.astype(int)
    step = (t % step_s <= 2) & (t >= step_s)
    at_max = (g.cores == top[0]) & (g.level == top[1])
    after = miss.shift(fill_value=False)
    rest = miss & ~step & ~at_max
    return {"misses": int(miss.sum()), "step": int((miss & step).sum()), "at maximum": int((miss & ~step & at_max).sum()),
            "after a miss": int((rest & after).sum()), "steady": int((rest & ~after).sum()),
            "above 75 %": int((rest & ~after & (g.utilisation > 0.75)).sum())}


def clustering(frames: list[pd.DataFrame]) -> dict[str, float]:
    rows = []
    for g in frames:
        miss = (g.p95 > g.target).reset_index(drop=True)
        rows.append(pd.DataFrame({"miss": miss, **{f"m{k}": miss.shift(k) for k in (1, 2, 3)}}).dropna())
    d = pd.concat(rows)
    m1, m2, m3 = (d[f"m{k}"].astype(bool) for k in (1, 2, 3))
    return {"after a met interval": d.miss[~m1].mean(), "after a miss": d.miss[m1].mean(),
            "miss two back": d.miss[~m1 & m2].mean(), "miss three back": d.miss[~m1 & ~m2 & m3].mean()}


def since_last_miss(frames: list[pd.DataFrame], step_s: int = 20, cap: int = 10) -> pd.Series:
    """Share of intervals that miss, by intervals since the pass's last miss (``cap``: that
    many or more, or none yet), over the intervals outside a step's first three."""
    rows = []
    for g in frames:
        miss = (g.p95 > g.target).to_numpy()
        last, since = None, []
        for i, m in enumerate(miss):
            since.append(cap if last is None else min(cap, i - last))
            if m:
                last = i
        t = g.t.astype(int).to_numpy()
        keep = ~((t % step_s <= 2) & (t >= step_s))
        rows.append(pd.DataFrame({"since": since, "miss": miss})[keep])
    d = pd.concat(rows)
    return d.groupby("since").miss.mean()


def main(paths: list[str]) -> None:
    rounds = [pd.read_csv(p).sort_values("t", kind="stable") for p in paths]  # each policy on its own clock
    policies = [p for p in dict.fromkeys(p for r in rounds for p in r.policy) if "learning" not in p]
    table = pd.DataFrame({p: pd.DataFrame([kinds(r[r.policy == p], (r.cores.max(), r.level.max())) for r in rounds]).sum() for p in policies}).T
    print(f"misses by kind over {len(rounds)} rounds")
    print(table.to_string())
    chance = pd.DataFrame({p: clustering([r[r.policy == p] for r in rounds if (r.policy == p).any()])
                           for p in policies})
    print("\nchance of a miss (%): entries (after a met interval) and persistence (after a miss)")
    print((100 * chance.T).round(1).to_string())
    spells = pd.DataFrame({p: since_last_miss([r[r.policy == p] for r in rounds if (r.policy == p).any()])
                           for p in policies})
    print("\nchance of a miss (%) by intervals since the last miss (10: ten or more, or none yet)")
    print((100 * spells.T).round(1).to_string())


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # --help was read as a file: a traceback
        sys.exit(__doc__ if len(sys.argv) > 1 else "usage: python bench/manage_misses.py ROUND.csv[.gz] ...")
    main(sys.argv[1:])
