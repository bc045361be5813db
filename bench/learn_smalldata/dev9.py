"""Session 9 dev harness: per-member LOO + test predictions (log space) as dev.py, for the five
small-data candidates of `auto` plus new ones (s9_members), on BDBJ, Dune, hsmgp (real DeepPerf
prefixes, see README) and the 13 synthetic systems of dev.py. No x264, Apache, LLVM or BDBC.

    BDBJ_CSV=BDBJ.csv DEV_DIR=dir python dev9.py 1.0 10 s9_1.pkl      # N = p + 1
    BDBJ_CSV=BDBJ.csv DEV_DIR=dir python dev9.py 1.5 8 s9_15.pkl      # N = 1.5 p
"""
import os, sys, pickle, time, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev
from s9_members import SubsetBMA
from sklearn.linear_model import LassoCV
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import KFold

dev.MEMBERS["bma"] = lambda: dev.sc(SubsetBMA())
dev.MEMBERS["lasso"] = lambda: dev.sc(LassoCV(cv=KFold(5, shuffle=True, random_state=0), max_iter=20000))
dev.MEMBERS["rf"] = lambda: RandomForestRegressor(100, random_state=0, n_jobs=1)
dev.MEMBERS.pop("gplin", None)
if os.environ.get("MEMBERS"):  # only these members (merge the pickles with merge9.py)
    dev.MEMBERS = {k: v for k, v in dev.MEMBERS.items() if k in os.environ["MEMBERS"].split(",")}
dev.HAS_SD = {"ard", "bridge", "gp", "bma"}


def real(name, path):
    d = pd.read_csv(path); X = d.iloc[:, :-1].to_numpy(float); X = X[:, X.std(0) > 0]
    return name, X, d.iloc[:, -1].to_numpy(float)


def systems():
    dd = os.environ.get("DEV_DIR", ".")
    extra = [real("Dune", os.path.join(dd, "Dune_prefix.csv")), real("hsmgp", os.path.join(dd, "hsmgp_prefix.csv"))]
    for more in os.environ.get("DEV_EXTRA", "").split(","):
        if more:
            extra.append(real(os.path.basename(more).split("_")[0], more))
    yield from dev.sets()
    yield from extra


if __name__ == "__main__":
    mult = float(sys.argv[1]); reps = int(sys.argv[2]); outp = sys.argv[3]
    only = set(sys.argv[4].split(",")) if len(sys.argv) > 4 else None
    res = []
    for name, X, y in systems():
        if only and name not in only:
            continue
        p = X.shape[1]; n = p + 1 if mult == 1 else int(round(mult * p))
        for rep in range(reps):
            r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
            t0 = time.time()
            res.append((name, rep, y[tr], y[te], dev.member_run(X, y, tr, te)))
            print(name, n, rep, round(time.time() - t0, 1), flush=True)
        pickle.dump(res, open(outp, "wb"))
