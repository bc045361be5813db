"""Session 30: the table of dev30_auto.py's jsonl (as analyze9_auto.py): default vs + mlp, per size."""
import json, sys
import numpy as np, pandas as pd
REAL = ["BDBJ", "Dune", "hsmgp", "SQL", "Lrzip", "VP8"]
df = pd.DataFrame([json.loads(l) for p in sys.argv[1:] for l in open(p)])
for mult, g in df.groupby("mult"):
    t = g.pivot_table(index=["system", "rep"], columns="variant", values="mre")
    t = t.dropna()
    d = (t["+ mlp"] - t["default"]).groupby(level=0).mean()
    per = t.groupby(level=0).mean()
    real = [s for s in REAL if s in per.index]; syn = [s for s in per.index if s not in REAL]
    print(f"N = {'p + 1' if mult == 1 else f'{mult} p'}: {len(t)} sets, {len(per)} systems")
    print(per.loc[real].round(2).to_string())
    print("synthetic mean:", per.loc[syn].mean().round(2).to_dict(), " all mean:", per.mean().round(2).to_dict())
    m, h = d.mean(), 1.96 * d.std(ddof=1) / np.sqrt(len(d))
    print(f"paired (+ mlp - default), mean over systems: {m:+.2f} ± {h:.2f}; systems better {(d < -1e-9).sum()}/{len(d)}; "
          f"sets better/worse {(t['+ mlp'] < t['default'] - 1e-9).sum()}/{(t['+ mlp'] > t['default'] + 1e-9).sum()}")
    print("real systems paired:", d.reindex(real).round(2).to_dict())
    print("fit s median:", g.groupby("variant").fit_s.median().round(2).to_dict()); print()
