"""Session 13: selection and averaging rules of `auto` outside small data, offline from s13_harness.py's pickles.

    SYSTEMS=hsmgp,BDBJ,Dune,SQL,wide-loglin,wide-inter,wide-numeric,additive python s13_analyze.py "s13_out/*.pkl"
    SYSTEMS=BDBC,LLVM python s13_analyze.py "s13_out/*.pkl" "R2 geo near-ties" "R0 current"   # paired A minus B

R0 is `auto` as of session 12 (near-ties within 20 %, at most 5, arithmetic mean); R2 the same near-ties
averaged geometrically (session 13's default). The others were compared and not adopted.
"""
import sys, glob, pickle, numpy as np, pandas as pd
BLEND, BMAX = 0.2, 5

def mre(y, p): return float(np.mean(np.abs(p - y) / y))

def near_ties(scores):
    ok = np.isfinite(scores); b = np.nanargmin(np.where(ok, scores, np.inf))
    close = np.flatnonzero(ok & (scores <= scores[b] * (1 + BLEND)))
    return close[np.argsort(scores[close], kind="stable")][:BMAX]

def combine(test, idx, w=None, geo=False):
    w = np.ones(len(idx)) / len(idx) if w is None else w / w.sum()
    from perflearn.learn.models import average
    return average(test[idx], w, geometric=geo)

def rules(r):
    y, yt, oof, test, log = r["y_train"], r["y_test"], r["oof"], r["test"], np.array(r["log"])
    C = len(test)
    s0 = np.array([mre(y, oof[c, 0]) if np.all(np.isfinite(oof[c, 0])) else np.inf for c in range(C)])
    s1 = np.array([mre(y, oof[c, 1]) if np.all(np.isfinite(oof[c, 1])) else np.inf for c in range(C)])
    sr = (s0 + s1) / 2
    okt = np.all(np.isfinite(test), axis=1)
    s0 = np.where(okt, s0, np.inf); sr = np.where(okt, sr, np.inf)
    out = {}
    out["R0 current"] = combine(test, near_ties(s0))
    out["R1 repeated 2x5"] = combine(test, near_ties(sr))
    out["R2 geo near-ties"] = combine(test, near_ties(s0), geo=True)
    out["R7 repeated+geo"] = combine(test, near_ties(sr), geo=True)
    order = np.argsort(s0, kind="stable"); order = order[np.isfinite(s0[order])]
    for k in (3, 5):
        out[f"R8 top-{k} geo"] = combine(test, order[:k], geo=True)
        out[f"R8 top-{k} arith"] = combine(test, order[:k])
        out[f"R9 top-{k} median"] = np.exp(np.median(np.log(np.maximum(test[order[:k]], 1e-12)), axis=0))
    nt = near_ties(s0)
    out["R10 near-ties or top-3, geo"] = combine(test, nt if len(nt) >= 3 else order[:3], geo=True)
    fin = np.flatnonzero(np.isfinite(s0))
    out["R3 inverse-sq"] = combine(test, fin, 1 / s0[fin] ** 2)
    out["R4 inverse-sq geo"] = combine(test, fin, 1 / s0[fin] ** 2, geo=True)
    # log unless raw is significantly better (paired, per training point)
    e = np.abs(oof[:, 0] - y) / y
    bl = np.flatnonzero(log)[np.argmin(s0[log])] if log.any() else None
    br = np.flatnonzero(~log)[np.argmin(s0[~log])] if (~log).any() else None
    s6 = s0.copy()
    if bl is not None and br is not None:
        d = e[br] - e[bl]
        if not (d.mean() + 2 * d.std(ddof=1) / np.sqrt(len(d)) < 0):
            s6[~log] = np.inf
    out["R6 log unless raw signif."] = combine(test, near_ties(s6))
    out["R6g log unless raw signif., geo"] = combine(test, near_ties(s6), geo=True)  # session 33
    s5 = s0.copy()
    if y.max() / y.min() > 10: s5[~log] = np.inf
    out["R5 log only if >10x"] = combine(test, near_ties(s5))
    out["oracle single"] = test[np.nanargmin([mre(yt, t) if np.all(np.isfinite(t)) else np.inf for t in test])]
    return {k: mre(yt, v) * 100 for k, v in out.items()}

if __name__ == "__main__":
    rows = []
    for f in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else "s13_out/*.pkl")):
        r = pickle.load(open(f, "rb"))
        import os
        if os.environ.get("SYSTEMS") and r["system"] not in os.environ["SYSTEMS"].split(","): continue
        for k, v in rules(r).items():
            rows.append(dict(system=r["system"], n=r["n"], rep=r["rep"], rule=k, mre=v, range=r["y_train"].max() / r["y_train"].min()))
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    t = df.pivot_table(index=["system", "n"], columns="rule", values="mre", aggfunc="mean")
    print(t.round(2).to_string())
    print("\nmean over (system, n):"); print(t.mean().round(2).to_string())
    base = df[df.rule == "R0 current"].set_index(["system", "n", "rep"]).mre
    print("\npaired vs R0 (per set): mean diff, better/worse count, geometric mean ratio")
    for k in df.rule.unique():
        d = df[df.rule == k].set_index(["system", "n", "rep"]).mre
        diff = d - base; ratio = np.exp(np.mean(np.log(d / base)))
        print(f"{k:28s} {diff.mean():+7.2f} ± {1.96*diff.std()/np.sqrt(len(diff)):.2f}  better {int((diff < -1e-9).sum()):3d} worse {int((diff > 1e-9).sum()):3d}  ratio {ratio:.3f}")

    if len(sys.argv) > 2:
        a, b = sys.argv[2], sys.argv[3]
        A = df[df.rule == a].set_index(["system", "n", "rep"]).mre; B = df[df.rule == b].set_index(["system", "n", "rep"]).mre
        d = (A - B); per = d.groupby(level=[0, 1]).mean()
        print(f"\n{a} minus {b}: per set {d.mean():+.3f} ± {1.96*d.std()/np.sqrt(len(d)):.3f}; per (system,n) {per.mean():+.3f} ± {1.96*per.std()/np.sqrt(len(per)):.3f}, better in {(per<-1e-9).sum()}/{len(per)}")
