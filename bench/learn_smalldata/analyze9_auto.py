"""Table of dev9_auto.py's results: `auto` through perflearn's code path, default (+ rf) vs session 6.

    python analyze9_auto.py auto9.jsonl
"""
import sys, numpy as np, pandas as pd

REAL = ("BDBJ", "Dune", "hsmgp", "SQL")


def report(d, base_name, new_name, member, real=REAL):
    """Per size: mean MRE per system, the paired change new - base (mean over systems of the
    per-system mean difference, 95 % margin), and the weight of ``member`` in the new average."""
    for mult, g in d.groupby("mult"):
        t = g.pivot_table(index=["system", "rep"], columns="variant", values="mre").dropna()  # a stopped run's last set
        base, new = t[base_name], t[new_name]
        per = (new - base).groupby(level=0).mean()
        means = t.groupby(level=0).mean()
        syn = [s for s in means.index if s not in real]
        m = 1.96 * per.std(ddof=1) / np.sqrt(len(per))
        print(f"N = {'p + 1' if mult == 1 else '1.5 p'}: {len(per)} systems, {len(t)} training sets")
        print(means.round(2).to_string())
        print(f"  synthetic mean: {means.loc[syn][base.name].mean():.2f} -> {means.loc[syn][new.name].mean():.2f};"
              f" all: {means[base.name].mean():.2f} -> {means[new.name].mean():.2f}")
        print(f"  paired (mean over systems of per-system mean difference): {per.mean():+.2f} ± {m:.2f};"
              f" systems better {(per < 0).sum()}/{len(per)}; sets better/worse {(new < base).sum()}/{(new > base).sum()} of {len(t)}")
        print(f"  real systems, paired: {per.reindex([s for s in real if s in per.index]).round(2).to_dict()}")
        w = g[g.variant == new_name].members.apply(lambda ms: sum(wt for lab, wt in ms if lab.startswith(member)))
        print(f"  weight of {member} in the average: median {w.median():.2f}, max {w.max():.2f}")
        print(f"  fit s (median): {g.groupby('variant').fit_s.median().round(2).to_dict()}")


if __name__ == "__main__":
    report(pd.read_json(sys.argv[1], lines=True), "session 6 (linear, bayes, gp)", "default (+ rf)", "rf")
