"""Session 6: a real DeepPerf system from a CSV as an extra dev system (per-member LOO/test predictions, as dev.py).

    python dev_dune.py 1.0 10 d1.pkl Dune_prefix.csv Dune        # first 252 data rows of Data/Dune_AllNumeric.csv
    python dev_dune.py 1.0 10 h1.pkl hsmgp_prefix.csv hsmgp      # first 244 data rows of Data/hsmgp_AllNumeric.csv
"""
import sys, pickle, time, numpy as np, pandas as pd, dev
mult = float(sys.argv[1]); reps = int(sys.argv[2]); outp = sys.argv[3]
d = pd.read_csv(sys.argv[4] if len(sys.argv) > 4 else "Dune_prefix.csv")
X = d.iloc[:, :-1].to_numpy(float); X = X[:, X.std(0) > 0]; y = d.iloc[:, -1].to_numpy(float)
p = X.shape[1]; n = p + 1 if mult == 1 else int(round(mult * p)); res = []
for rep in range(reps):
    r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
    t0 = time.time(); res.append((sys.argv[5] if len(sys.argv) > 5 else "Dune", rep, y[tr], y[te], dev.member_run(X, y, tr, te)))
    print("Dune", n, rep, round(time.time() - t0, 1), flush=True)
pickle.dump(res, open(outp, "wb"))
