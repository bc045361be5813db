import sys, pickle, numpy as np, pandas as pd
from scipy.stats import norm
CUR = ["ridge1", "ridge2", "ard", "bridge", "gp"]
ALL = CUR + ["gplin"]

def mre(y, p): return float(np.mean(np.abs(p - y) / y) * 100)

def sds(m, ly):
    """per-member sd (LOO, test): own predictive sd; ridge: RMS of its LOO log residuals"""
    mu_l, sd_l, mu_t, sd_t = m
    if np.all(np.isnan(sd_l)):
        s = np.sqrt(np.mean((mu_l - ly) ** 2)); return np.full_like(mu_l, s), np.full_like(mu_t, s)
    return sd_l, sd_t

def blend(ms, y, names, rel, frac=0.2, kmax=5, geo=False):
    ly = np.log(y); sc = {}; pts = {}
    for k in names:
        mu_l, _, mu_t, _ = ms[k]; sl, st = sds(ms[k], ly)
        pl = np.exp(mu_l - (sl ** 2 if rel else 0)); pt = np.exp(mu_t - (st ** 2 if rel else 0))
        sc[k] = mre(y, pl); pts[k] = (pl, pt)
    order = sorted(names, key=lambda k: sc[k]); best = sc[order[0]]
    close = [k for k in order if sc[k] <= best * (1 + frac)][:kmax]
    if geo:
        oof = np.exp(np.mean([np.log(pts[k][0]) for k in close], 0)); te = np.exp(np.mean([np.log(pts[k][1]) for k in close], 0))
    else:
        oof = np.mean([pts[k][0] for k in close], 0); te = np.mean([pts[k][1] for k in close], 0)
    return oof, te, close

def proc_empirical(ms, y, names, how):
    oof, te, _ = blend(ms, y, names, rel=False)
    if how == "lognormal":
        s2 = np.mean((np.log(oof) - np.log(y)) ** 2); return te * np.exp(-s2)
    if how == "wmedian":  # c minimising sum |c*oof - y|/y = weighted median of y/oof, weights oof/y
        r = y / oof; w = oof / y; o = np.argsort(r); cw = np.cumsum(w[o]); c = r[o][np.searchsorted(cw, cw[-1] / 2)]
        return te * c

def mixture_point(mus, sds_, ws, rel):
    """point minimising expected relative (rel) or absolute-log (median) error under a lognormal mixture, per row"""
    mus, sds_ = np.asarray(mus), np.asarray(sds_); ws = np.asarray(ws)[:, None]
    if rel:  # tilt by 1/y: component k -> N(mu - s^2, s), weight * exp(-mu + s^2/2)
        lw = np.log(ws) - mus + sds_ ** 2 / 2; lw -= lw.max(0); w = np.exp(lw); w /= w.sum(0); m = mus - sds_ ** 2
    else:
        w = np.broadcast_to(ws, mus.shape); m = mus
    lo, hi = (m - 4 * sds_).min(0), (m + 4 * sds_).max(0)
    for _ in range(50):
        mid = (lo + hi) / 2; F = (w * norm.cdf((mid - m) / sds_)).sum(0)
        lo = np.where(F < 0.5, mid, lo); hi = np.where(F >= 0.5, mid, hi)
    return np.exp((lo + hi) / 2)

def pseudo_bma(ms, y, names, rel):
    ly = np.log(y); lpd = []
    for k in names:
        sl, st = sds(ms[k], ly); lpd.append(np.sum(norm.logpdf(ly, ms[k][0], sl)))
    lpd = np.array(lpd); w = np.exp(lpd - lpd.max()); w /= w.sum()
    mus = [ms[k][2] for k in names]; ss = [sds(ms[k], ly)[1] for k in names]
    return mixture_point(mus, ss, w, rel)

def single(ms, y, k, rel):
    ly = np.log(y); st = sds(ms[k], ly)[1]; return np.exp(ms[k][2] - (st ** 2 if rel else 0))

PROCS = {
 "cur (5 cands, LOO, blend)": lambda ms, y: blend(ms, y, CUR, False)[1],
 "cur + rel point (model sd)": lambda ms, y: blend(ms, y, CUR, True)[1],
 "cur + rel point (LOO sd)": lambda ms, y: proc_empirical(ms, y, CUR, "lognormal"),
 "cur + LOO-calibrated factor": lambda ms, y: proc_empirical(ms, y, CUR, "wmedian"),
 "cur, geometric blend": lambda ms, y: blend(ms, y, CUR, False, geo=True)[1],
 "cur + rel point (model sd), geometric": lambda ms, y: blend(ms, y, CUR, True, geo=True)[1],
 "6 cands (+gp lin+rbf)": lambda ms, y: blend(ms, y, ALL, False)[1],
 "6 cands + rel point": lambda ms, y: blend(ms, y, ALL, True)[1],
 "pseudo-BMA 5, median": lambda ms, y: pseudo_bma(ms, y, CUR, False),
 "pseudo-BMA 5, rel point": lambda ms, y: pseudo_bma(ms, y, CUR, True),
 "pseudo-BMA 6, rel point": lambda ms, y: pseudo_bma(ms, y, ALL, True),
 "gp alone": lambda ms, y: single(ms, y, "gp", False),
 "gp alone, rel point": lambda ms, y: single(ms, y, "gp", True),
 "gp lin+rbf alone": lambda ms, y: single(ms, y, "gplin", False),
 "gp lin+rbf alone, rel": lambda ms, y: single(ms, y, "gplin", True),
 "ard alone, rel": lambda ms, y: single(ms, y, "ard", True),
}

def table(path):
    res = pickle.load(open(path, "rb")); rows = []
    for name, rep, ytr, yte, ms in res:
        for pn, f in PROCS.items():
            rows.append((name, rep, pn, mre(yte, f(ms, ytr))))
    df = pd.DataFrame(rows, columns=["set", "rep", "proc", "mre"])
    t = df.pivot_table(index="proc", columns="set", values="mre", sort=False)
    t["mean"] = t.mean(1); t["mean w/o BDBJ"] = t.drop(columns=["BDBJ", "mean"]).mean(1)
    base = df[df.proc == list(PROCS)[0]].set_index(["set", "rep"]).mre
    wins = {pn: f"{(df[df.proc == pn].set_index(['set','rep']).mre < base - 1e-9).sum()}/{len(base)}" for pn in PROCS}
    t["wins vs cur"] = pd.Series(wins)
    return t, df

if __name__ == "__main__":
    pd.set_option("display.width", 250)
    for p in sys.argv[1:]:
        t, _ = table(p); print(p); print(t.round(2).to_string()); print()
