"""Session 6: small-data procedures beyond the session-5 default, offline from the per-member
LOO/test predictions of dev.py / dev_dune.py (BDBJ, Dune, hsmgp real; 13 synthetic). No x264/Apache."""
import sys, pickle, numpy as np, pandas as pd
from scipy.optimize import minimize
from analyze import CUR, mre, sds, blend

def pts(ms, y, names):
    ly = np.log(y); out = {}
    for k in names:
        mu_l, _, mu_t, _ = ms[k]; sl, st = sds(ms[k], ly)
        out[k] = (np.exp(mu_l - sl ** 2), np.exp(mu_t - st ** 2), mre(y, np.exp(mu_l - sl ** 2)))
    return out

def weighted(ms, y, w_fn, names=CUR):
    P = pts(ms, y, names); ks = list(P); w = np.asarray(w_fn(P, ks, y), float); w = w / w.sum()
    return sum(wi * P[k][1] for wi, k in zip(w, ks))

def top(k):
    def f(P, ks, y):
        s = np.array([P[q][2] for q in ks]); w = np.zeros(len(ks)); w[np.argsort(s, kind="stable")[:k]] = 1; return w
    return f

def inv(power):
    return lambda P, ks, y: np.array([P[q][2] for q in ks]) ** -power

def stack(P, ks, y):
    L = np.array([P[q][0] for q in ks])
    def obj(z):
        w = np.exp(z - z.max()); w /= w.sum(); return mre(y, w @ L)
    best = min((minimize(obj, z0, method="Nelder-Mead", options={"maxiter": 400}) for z0 in
                [np.zeros(len(ks))] + [np.eye(len(ks))[i] * 3 for i in range(len(ks))]), key=lambda r: r.fun)
    w = np.exp(best.x - best.x.max()); return w / w.sum()

def mixture(ms, y, names=CUR, close_only=False, frac=0.2):
    """one lognormal for the members' average in log space: mean of mu, var = mean sd^2 + variance of mu (disagreement)"""
    ly = np.log(y)
    if close_only:
        names = blend(ms, y, names, True, frac=frac)[2]
    mus = np.array([ms[k][2] for k in names]); s2 = np.array([sds(ms[k], ly)[1] ** 2 for k in names])
    m = mus.mean(0); v = s2.mean(0) + mus.var(0)
    return np.exp(m - v)

PROCS = {
 "S5 default (rel point, LOO, avg within 20%)": lambda ms, y: blend(ms, y, CUR, True)[1],
 "avg within 50%": lambda ms, y: blend(ms, y, CUR, True, frac=0.5)[1],
 "equal average of all 5 (rel point)": lambda ms, y: weighted(ms, y, lambda P, ks, y: np.ones(len(ks))),
 "equal geometric average of all 5": lambda ms, y: blend(ms, y, CUR, True, frac=1e9, geo=True)[1],
 "best 2 by LOO, averaged": lambda ms, y: weighted(ms, y, top(2)),
 "best 3 by LOO, averaged": lambda ms, y: weighted(ms, y, top(3)),
 "weights 1/LOO-MRE^2": lambda ms, y: weighted(ms, y, inv(2)),
 "weights 1/LOO-MRE^4": lambda ms, y: weighted(ms, y, inv(4)),
 "weights 1/LOO-MRE": lambda ms, y: weighted(ms, y, inv(1)),
 "weights 1/LOO mean squared relative error": lambda ms, y: weighted(ms, y, lambda P, ks, y: np.array([1 / np.mean(((P[q][0] - y) / y) ** 2) for q in ks])),
 "LOO stacking (simplex weights)": lambda ms, y: weighted(ms, y, stack),
 "log-space mixture of all 5 (disagreement as variance)": lambda ms, y: mixture(ms, y),
 "log-space mixture of those within 20%": lambda ms, y: mixture(ms, y, close_only=True),
 "single LOO winner": lambda ms, y: weighted(ms, y, top(1)),
}

def load(paths):
    res = []
    for p in paths:
        res += pickle.load(open(p, "rb"))
    return res

def table(res):
    rows = [(name, rep, pn, mre(yte, f(ms, ytr))) for name, rep, ytr, yte, ms in res for pn, f in PROCS.items()]
    df = pd.DataFrame(rows, columns=["set", "rep", "proc", "mre"])
    t = df.pivot_table(index="proc", columns="set", values="mre", sort=False)
    real = [c for c in ("BDBJ", "Dune", "hsmgp") if c in t.columns]
    syn = [c for c in t.columns if c not in real]
    out = pd.DataFrame({**{c: t[c] for c in real}, "synthetic (mean)": t[syn].mean(axis=1), "all (mean)": t[real + syn].mean(axis=1)})
    base = df[df.proc == list(PROCS)[0]].set_index(["set", "rep"]).mre
    d_sys = {}
    for pn in PROCS:
        cur = df[df.proc == pn].set_index(["set", "rep"]).mre
        diff = (cur - base).groupby(level=0).mean()  # per system
        d_sys[pn] = diff
        out.loc[pn, "paired diff (systems)"] = f"{diff.mean():+.2f} ± {1.96 * diff.std(ddof=1) / np.sqrt(len(diff)):.2f}"
        out.loc[pn, "systems better"] = f"{(diff < -1e-9).sum()}/{len(diff)}"
        out.loc[pn, "sets better/worse"] = f"{(cur < base - 1e-9).sum()}/{(cur > base + 1e-9).sum()} of {len(base)}"
    return out, df

if __name__ == "__main__":
    pd.set_option("display.width", 250); pd.set_option("display.max_columns", 20)
    for group in sys.argv[1:]:
        t, _ = table(load(group.split(",")))
        print(group); print(t.round(2).to_string()); print()
