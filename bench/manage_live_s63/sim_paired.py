# Session 63: two simulated comparisons paired per seed (new - old): QoS points and energy points of static's.
# python sim_paired.py OLD.csv NEW.csv
import sys, pandas as pd, numpy as np
from scipy import stats
def per_seed(path):
    f = pd.read_csv(path); rows = {}
    for (pol, seed), g in f.groupby(['policy', 'seed']):
        rows[(pol, seed)] = ((g.p95 <= g.target) | (g.rps <= 0)).mean() * 100, g.energy_j.sum()
    return rows
o, n = per_seed(sys.argv[1]), per_seed(sys.argv[2])
for pol in sorted({p for p, _ in o if p != 'static'}):
    seeds = sorted(s for p, s in o if p == pol)
    dq = np.array([n[(pol, s)][0] - o[(pol, s)][0] for s in seeds])
    de = np.array([(o[(pol, s)][1] - n[(pol, s)][1]) / o[('static', s)][1] * 100 for s in seeds])
    m = lambda x: stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    print(f"{pol}: new - old QoS {dq.mean():+.2f} ± {m(dq):.2f} pts (better in {(dq > 0).sum()}, worse in {(dq < 0).sum()} of {len(dq)}); "
          f"energy saved {de.mean():+.2f} ± {m(de):.2f} pts")
