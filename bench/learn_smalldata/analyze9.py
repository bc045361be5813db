"""Session 9: small-data procedures offline from dev9.py's per-member LOO/test predictions.
Baseline: session 6's default (relative point, weights 1/LOO-MRE^2 over the 5 candidates).

    python analyze9.py s9_1.pkl s9_15.pkl
"""
import sys, pickle, numpy as np, pandas as pd
from analyze import CUR, mre, sds
from analyze6 import weighted, inv, pts

REAL = ("BDBJ", "Dune", "hsmgp", "SQL", "javagc", "hipacc", "sac")


def alone(k):
    return lambda ms, y: pts(ms, y, [k])[k][1]


PROCS = {
    "S6 default: 1/LOO-MRE^2 over 5": lambda ms, y: weighted(ms, y, inv(2), CUR),
    "+ bma (6 candidates)": lambda ms, y: weighted(ms, y, inv(2), CUR + ["bma"]),
    "+ lasso (6 candidates)": lambda ms, y: weighted(ms, y, inv(2), CUR + ["lasso"]),
    "+ bma + lasso (7)": lambda ms, y: weighted(ms, y, inv(2), CUR + ["bma", "lasso"]),
    "bma instead of ard": lambda ms, y: weighted(ms, y, inv(2), ["ridge1", "ridge2", "bma", "bridge", "gp"]),
    "bma alone": alone("bma"),
    "lasso alone": alone("lasso"),
    "ard alone": alone("ard"),
    "gp alone": alone("gp"),
}


def load(paths):
    res = []
    for p in paths:
        res += pickle.load(open(p, "rb"))
    return res


def table(res, procs=PROCS):
    rows = [(name, rep, pn, mre(yte, f(ms, ytr))) for name, rep, ytr, yte, ms in res for pn, f in procs.items()]
    df = pd.DataFrame(rows, columns=["set", "rep", "proc", "mre"])
    t = df.pivot_table(index="proc", columns="set", values="mre", sort=False)
    real = [c for c in REAL if c in t.columns]
    syn = [c for c in t.columns if c not in real]
    out = pd.DataFrame({**{c: t[c] for c in real}, "synthetic (mean)": t[syn].mean(axis=1), "all (mean)": t[real + syn].mean(axis=1)})
    base = df[df.proc == list(procs)[0]].set_index(["set", "rep"]).mre
    for pn in procs:
        cur = df[df.proc == pn].set_index(["set", "rep"]).mre
        diff = (cur - base).groupby(level=0).mean()  # per system
        out.loc[pn, "paired (systems)"] = f"{diff.mean():+.2f} ± {1.96 * diff.std(ddof=1) / np.sqrt(len(diff)):.2f}"
        out.loc[pn, "systems better"] = f"{(diff < -1e-9).sum()}/{len(diff)}"
        dr = diff[[c for c in real if c in diff.index]]
        out.loc[pn, "real: paired"] = " ".join(f"{v:+.2f}" for v in dr)
        out.loc[pn, "sets better/worse"] = f"{(cur < base - 1e-9).sum()}/{(cur > base + 1e-9).sum()} of {len(base)}"
    return out, df


# ---- weights aware of the candidates' error correlations (offline; session 9)
def shrunk_minvar(P, ks, y):
    """min-variance combination w ~ S^-1 1 of the LOO signed relative errors, S shrunk toward its diagonal
    (Schafer & Strimmer 2005, target D: correlations shrunk to 0 by the estimated intensity); w >= 0."""
    E = np.array([(P[k][0] - y) / y for k in ks]).T  # n x m
    n, m = E.shape
    s = np.sqrt(np.mean(E**2, 0))
    Z = E / s
    R = Z.T @ Z / n
    W = np.einsum("ni,nj->nij", Z, Z)
    var_r = W.var(0, ddof=1) * n / (n - 1) ** 2
    off = ~np.eye(m, dtype=bool)
    lam = float(np.clip(var_r[off].sum() / max((R[off] ** 2).sum(), 1e-12), 0, 1))
    Rs = (1 - lam) * R + lam * np.eye(m)
    S = Rs * np.outer(s, s)
    from scipy.optimize import nnls
    # min w'Sw s.t. sum w = 1, w >= 0 via NNLS on the Cholesky factor with a heavy sum constraint row
    L = np.linalg.cholesky(S + 1e-12 * np.eye(m))
    A = np.vstack([L.T, 1e3 * np.ones((1, m))]); b = np.r_[np.zeros(m), 1e3]
    w, _ = nnls(A, b)
    return w / w.sum()


PROCS["shrunk min-variance weights over 5"] = lambda ms, y: weighted(ms, y, shrunk_minvar, CUR)
PROCS["shrunk min-variance weights over 6 (+bma)"] = lambda ms, y: weighted(ms, y, shrunk_minvar, CUR + ["bma"])
PROCS["1/LOO-MRE^2 over ridge1, ridge2, bma, gp"] = lambda ms, y: weighted(ms, y, inv(2), ["ridge1", "ridge2", "bma", "gp"])


def bb_best(P, ks, y, draws=2000):
    """weights = probability that each candidate has the lowest LOO MRE under the Bayesian bootstrap
    of the training runs (Dirichlet(1..1) weights on the n LOO errors; Rubin 1981), paired across candidates"""
    A = np.array([np.abs(P[k][0] - y) / y for k in ks])  # m x n
    D = np.random.default_rng(0).dirichlet(np.ones(A.shape[1]), draws)  # draws x n
    best = np.argmin(D @ A.T, axis=1)
    return np.bincount(best, minlength=len(ks)) / draws


PROCS["Bayesian-bootstrap P(best) weights over 5"] = lambda ms, y: weighted(ms, y, bb_best, CUR)
PROCS["Bayesian-bootstrap P(best) weights over 6 (+bma)"] = lambda ms, y: weighted(ms, y, bb_best, CUR + ["bma"])


def pts_cal(ms, y, names, robust=False):
    """as analyze6.pts, but each candidate's predictive variance of log y is recalibrated by one factor
    c = mean over the LOO runs of (LOO log residual / LOO predictive sd)^2 (for the LOO points c leaves
    that run out too); ridge's sd is its LOO RMS, so c = 1 there by construction."""
    ly = np.log(y); out = {}
    for k in names:
        mu_l, _, mu_t, _ = ms[k]; sl, st = sds(ms[k], ly)
        z2 = (mu_l - ly) ** 2 / sl ** 2
        n = len(z2)
        if robust:  # median of z^2 over its median under N(0,1) (0.455): insensitive to a few wild LOO errors
            c_all = np.median(z2) / 0.4549; c_loo = np.array([np.median(np.delete(z2, i)) for i in range(n)]) / 0.4549
        else:
            c_all = z2.mean(); c_loo = (z2.sum() - z2) / (n - 1)
        pl = np.exp(mu_l - c_loo * sl ** 2); pt = np.exp(mu_t - c_all * st ** 2)
        out[k] = (pl, pt, mre(y, pl))
    return out


def weighted_cal(ms, y, w_fn, names=CUR, robust=False):
    P = pts_cal(ms, y, names, robust); ks = list(P); w = np.asarray(w_fn(P, ks, y), float); w = w / w.sum()
    return sum(wi * P[k][1] for wi, k in zip(w, ks))


PROCS["LOO-recalibrated variance, 1/LOO-MRE^2 over 5"] = lambda ms, y: weighted_cal(ms, y, inv(2), CUR)
PROCS["LOO-recalibrated variance, over 6 (+bma)"] = lambda ms, y: weighted_cal(ms, y, inv(2), CUR + ["bma"])


PROCS["LOO-recalibrated variance (median), over 5"] = lambda ms, y: weighted_cal(ms, y, inv(2), CUR, True)


PROCS["+ rf (6 candidates: random forest of log y)"] = lambda ms, y: weighted(ms, y, inv(2), CUR + ["rf"])
PROCS["rf alone"] = alone("rf")


if __name__ == "__main__":
    pd.set_option("display.width", 300); pd.set_option("display.max_columns", 30)
    for group in [a for a in sys.argv[1:] if not a.startswith("-")]:
        t, df = table(load(group.split(",")))
        print(group); print(t.round(2).to_string()); print()
        if "-v" in sys.argv:
            print(df.pivot_table(index="set", columns="proc", values="mre", sort=False).round(2).to_string())
