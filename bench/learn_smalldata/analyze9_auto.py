"""Table of dev9_auto.py's results: `auto` through perflearn's code path, default (+ rf) vs session 6.

    python analyze9_auto.py auto9.jsonl
"""
import sys, numpy as np, pandas as pd

REAL = ("BDBJ", "Dune", "hsmgp", "SQL")
d = pd.read_json(sys.argv[1], lines=True)
for mult, g in d.groupby("mult"):
    t = g.pivot_table(index=["system", "rep"], columns="variant", values="mre")
    base, new = t["session 6 (linear, bayes, gp)"], t["default (+ rf)"]
    per = (new - base).groupby(level=0).mean()
    means = t.groupby(level=0).mean()
    syn = [s for s in means.index if s not in REAL]
    m = 1.96 * per.std(ddof=1) / np.sqrt(len(per))
    print(f"N = {'p + 1' if mult == 1 else '1.5 p'}: {len(per)} systems, {len(t)} training sets")
    print(means.round(2).to_string())
    print(f"  synthetic mean: {means.loc[syn][base.name].mean():.2f} -> {means.loc[syn][new.name].mean():.2f};"
          f" all: {means[base.name].mean():.2f} -> {means[new.name].mean():.2f}")
    print(f"  paired (mean over systems of per-system mean difference): {per.mean():+.2f} ± {m:.2f};"
          f" systems better {(per < 0).sum()}/{len(per)}; sets better/worse {(new < base).sum()}/{(new > base).sum()} of {len(t)}")
    w = g[g.variant == "default (+ rf)"].members.apply(lambda ms: sum(wt for lab, wt in ms if lab.startswith("rf")))
    print(f"  weight of the forest in the average: median {w.median():.2f}, max {w.max():.2f}")
    print(f"  fit s (median): {g.groupby('variant').fit_s.median().round(2).to_dict()}")
