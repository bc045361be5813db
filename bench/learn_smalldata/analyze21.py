"""Session 21: how the small-data average combines its candidates, offline from dev9.py's
per-member LOO/test predictions (the six candidates of `auto`: CUR + rf). Baseline: session 9's
default, the arithmetic average of the candidates' relative-error points, weights 1/LOO-MRE^2.

The candidates' points, weighted, are read as a discrete predictive distribution of y; the
variants combine them by the rule that the relative error itself asks for, or more robustly:

    python analyze21.py s21_1.pkl s21_15.pkl
"""
import sys
import numpy as np
from analyze import CUR, mre, sds
from analyze6 import inv, pts
import analyze9
from analyze9 import load, table

analyze9.REAL = analyze9.REAL + ("Lrzip", "VP8")  # session 21: two more real systems (ideas-labo/DaL samples)

SIX = CUR + ["rf"]


def combine(how):
    def f(ms, y):
        P = pts(ms, y, SIX); ks = list(P)
        w = np.asarray(inv(2)(P, ks, y), float); w = w / w.sum()
        T = np.array([P[k][1] for k in ks])  # members x test points
        if how == "arith":
            return w @ T
        if how == "geo":
            return np.exp(w @ np.log(T))
        if how == "rel2":  # argmin_p sum w (p - p_k)^2 / p_k^2
            return (w @ (1 / T)) / (w @ (1 / T**2))
        if how in ("wmed", "wmed_rel"):  # weighted median (weights w, or w / p_k: the relative-L1 point)
            W = np.broadcast_to(w[:, None], T.shape) / (T if how == "wmed_rel" else 1)
            o = np.argsort(T, 0); Ts = np.take_along_axis(T, o, 0); Ws = np.take_along_axis(W, o, 0)
            c = np.cumsum(Ws, 0); half = c[-1] / 2
            i = (c < half).sum(0)
            return Ts[i, np.arange(T.shape[1])]
        if how == "trim":  # drop the highest and the lowest point, renormalise
            o = np.argsort(T, 0); keep = np.ones_like(T, bool)
            keep[o[0], np.arange(T.shape[1])] = False; keep[o[-1], np.arange(T.shape[1])] = False
            W = w[:, None] * keep; return (W * T).sum(0) / W.sum(0)
        raise ValueError(how)
    return f


def np_point(ms, y, names):
    """as analyze6.pts, but members without a predictive sd of their own (ridge, forest) take the
    relative-error point of their empirical LOO log residuals r: exp(mu + q), q = median of r under
    weights exp(-r) (the 1/y tilt), instead of the lognormal exp(mu - s^2)."""
    ly = np.log(y); out = {}
    for k in names:
        mu_l, sd_l, mu_t, _ = ms[k]
        if not np.all(np.isnan(sd_l)):
            sl, st = sds(ms[k], ly); pl, pt = np.exp(mu_l - sl**2), np.exp(mu_t - st**2)
        else:
            r = ly - mu_l; n = len(r)
            def q_of(rr):
                o = np.argsort(rr); ww = np.exp(-rr[o]); c = np.cumsum(ww); return rr[o][np.searchsorted(c, c[-1] / 2)]
            pl = np.exp(mu_l + np.array([q_of(np.delete(r, i)) for i in range(n)])); pt = np.exp(mu_t + q_of(r))
        out[k] = (pl, pt, mre(y, pl))
    return out


def np_weighted(ms, y):
    P = np_point(ms, y, SIX); ks = list(P); w = np.asarray(inv(2)(P, ks, y), float); w = w / w.sum()
    return sum(wi * P[k][1] for wi, k in zip(w, ks))


def clipped(lo_too):
    """the default, its points kept within the training targets' range (above only, or both ends):
    with n runs, a new configuration is beyond the largest seen with probability 1 / (n + 1), and an
    over-prediction costs a relative error without bound, an under-prediction at most 100 %"""
    base = combine("arith")
    def f(ms, y):
        p = base(ms, y)
        return np.clip(p, y.min() if lo_too else 0, y.max())
    return f


PROCS = {
    "S9 default: arithmetic, 1/LOO-MRE^2 over 6": combine("arith"),
    "weighted geometric mean": combine("geo"),
    "relative-L2 point of the candidates": combine("rel2"),
    "weighted median": combine("wmed"),
    "relative-L1 point (weighted median, w/p)": combine("wmed_rel"),
    "trimmed (highest and lowest dropped)": combine("trim"),
    "empirical relative point for ridge, rf": np_weighted,
    "default, clipped above at the largest training target": clipped(False),
    "default, clipped to the training targets' range": clipped(True),
}

if __name__ == "__main__":
    import pandas as pd
    pd.set_option("display.width", 300); pd.set_option("display.max_columns", 30)
    for group in [a for a in sys.argv[1:] if not a.startswith("-")]:
        t, df = table(load(group.split(",")), PROCS)
        print(group); print(t.round(2).to_string()); print()
