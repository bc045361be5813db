"""Jackknife-bagging the whole auto procedure on tiny data: dev experiment (no x264/Apache)."""
import os, pickle, sys, time, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev import syn_loglin, syn_additive, syn_numeric
from perflearn.learn.model import fit_data
from perflearn.learn.features import training_data
from perflearn.store import Dataset

def systems(offset):
    if os.environ.get("ONLY_REAL"):
        yield from real(); return
    for s in range(3):
        p = [8, 10, 12][s]; yield f"loglin{s}", *syn_loglin(offset + s, p)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"inter{s}", *syn_loglin(offset + 100 + s, p, scale=0.3, dens=0.5, n_int=(4, 9), three=True)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"add{s}", *syn_additive(offset + 200 + s, p)
    for s in range(2):
        p = [9, 11][s]; yield f"noisy{s}", *syn_loglin(offset + 300 + s, p, noise=0.1)
    for s in range(2):
        yield f"numeric{s}", *syn_numeric(offset + 400 + s)
    yield from real()

def real():
    for path in os.environ.get("REAL", "").split(","):
        if path:
            d = pd.read_csv(path); X = d.iloc[:, :-1].to_numpy(float); X = X[:, X.std(0) > 0]
            yield os.path.basename(path).split("_")[0], X, d.iloc[:, -1].to_numpy(float)

def predict(X, y, tr, te):
    cols = [f"x{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X[tr], columns=cols); frame["y"] = y[tr]
    data = training_data(Dataset.from_frame(frame, metrics=["y"], name="d"), "y")
    m = fit_data(data, "auto", nested_below=0)
    test = pd.DataFrame(X[te], columns=cols)
    return m.predict(test, where="t")

def run(X, y, tr, te):
    p0 = predict(X, y, tr, te)
    P = []
    for i in range(len(tr)):
        P.append(predict(X, y, np.delete(tr, i), te))
    return p0, np.array(P)

if __name__ == "__main__":
    offset, reps, out, part, parts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    res = []
    jobs = [(name, X, y, rep) for name, X, y in systems(offset) for rep in range(reps)]
    for k, (name, X, y, rep) in enumerate(jobs):
        if k % parts != part:
            continue
        n = min(X.shape[1] + 1, 12)
        r = np.random.default_rng(7000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
        if len(te) > 3000:
            te = r.choice(te, 3000, replace=False)
        t0 = time.time()
        p0, P = run(X, y, tr, te)
        res.append((name, rep, n, y[te], p0, P))
        print(name, rep, n, round(time.time() - t0, 1), flush=True)
        pickle.dump(res, open(out, "wb"))
