"""Session 13 (see README and bench/learn.md, "Geometric mean of near-ties"): per-candidate out-of-fold (2 shuffles of 5-fold) and test predictions of `auto`'s
candidates above the small-data size, so selection rules can be compared offline."""
import os, sys, pickle, time, warnings
import numpy as np, pandas as pd
from pathlib import Path
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: learn_deepperf
DEV_DIR = os.environ.get("DEV_DIR", ".")  # hsmgp_prefix.csv, BDBJ.csv, Dune_prefix.csv, SQL_prefix.csv (see README)
OUT = os.environ.get("OUT", "s13_out")
from perflearn.learn.models import AutoRegressor, AUTO_BLEND, AUTO_LOO_BELOW, AUTO_SMALL_RATIO, AUTO_POINT, build, _cv_params, cv_splits

def dev_systems():
    import dev
    out = {}
    for name, f in [("hsmgp", f"{DEV_DIR}/hsmgp_prefix.csv"), ("BDBJ", f"{DEV_DIR}/BDBJ.csv"), ("Dune", f"{DEV_DIR}/Dune_prefix.csv"), ("SQL", f"{DEV_DIR}/SQL_prefix.csv")]:
        d = pd.read_csv(f); out[name] = (d.iloc[:, :-1].to_numpy(float), d.iloc[:, -1].to_numpy(float))
    out["wide-loglin"] = dev.syn_loglin(500, 10, scale=0.9, dens=0.7, n_int=(1, 4), noise=0.05)
    out["wide-inter"] = dev.syn_loglin(501, 12, scale=0.5, dens=0.6, n_int=(4, 9), noise=0.05, three=True)
    X, y = dev.syn_numeric(502); out["wide-numeric"] = (X, y ** 1.6)
    X, y = dev.syn_additive(503, 10); out["additive"] = (X, y)
    return out

def bench_split(system, n, rep, data_dir):
    """The published training set of repetition ``rep``, read as the benchmark itself reads it."""
    from learn_deepperf import load
    d, idx, labels = load(system, Path(data_dir))
    tr = idx.iloc[rep, np.flatnonzero(labels == n)].astype(int).to_numpy()
    return d.iloc[:, :-1].to_numpy(float), d.iloc[:, -1].to_numpy(float), tr

def task(args):
    kind, system, n, rep = args
    os.makedirs(OUT, exist_ok=True)
    out = f"{OUT}/{system}_{n}_{rep}.pkl"
    if os.path.exists(out):
        return out
    if kind == "dev":
        X, y = DEV[system]
        tr = np.random.default_rng(3000 + rep).choice(len(y), n, replace=False)
    else:
        X, y, tr = bench_split(system, n, rep, kind)
    te = np.setdiff1d(np.arange(len(y)), tr)
    t0 = time.time()
    a = AutoRegressor(cv=5, loo_below=AUTO_LOO_BELOW, blend=AUTO_BLEND, small_ratio=AUTO_SMALL_RATIO, point=AUTO_POINT, weights="auto", random_state=0)
    cands = a.candidates(n, X.shape[1], bool(np.all(y[tr] > 0)))
    Xtr, ytr = X[tr], y[tr]
    split_sets = [cv_splits(Xtr, 5, loo_below=AUTO_LOO_BELOW, random_state=s) for s in (0, 1)]
    rec = {"system": system, "n": n, "rep": rep, "y_train": ytr, "y_test": y[te], "cands": [c.label() for c in cands],
           "log": [c.log_target for c in cands], "oof": [], "test": []}
    for c in cands:
        oofs = []
        for k, splits in enumerate(split_sets):
            if k and n <= AUTO_LOO_BELOW:  # leave-one-out: both "shuffles" are the same folds
                oofs.append(oofs[0]); continue
            oof = np.empty(n)
            try:
                for a_, b_ in splits:
                    e = build(c.family, _cv_params(c), log_target=c.log_target, random_state=0, n_jobs=1)
                    e.fit(Xtr[a_], ytr[a_]); oof[b_] = e.predict(Xtr[b_])
            except Exception:
                oof[:] = np.nan
            oofs.append(oof)
        rec["oof"].append(np.array(oofs))
        try:
            e = build(c.family, c.params, log_target=c.log_target, random_state=0, n_jobs=1); e.fit(Xtr, ytr); p = e.predict(X[te])
        except Exception:
            p = np.full(len(te), np.nan)
        rec["test"].append(p)
    rec["oof"] = np.array(rec["oof"]); rec["test"] = np.array(rec["test"]); rec["s"] = time.time() - t0
    pickle.dump(rec, open(out, "wb"))
    print(system, n, rep, round(rec["s"], 1), flush=True)
    return out

def dev_systems_s33():
    """Session 33's confirmation set (none of it seen by session 13's comparisons): samples of the real
    hipacc (DeepPerf), Lrzip and VP8 (DaL) files, and the three wide-range synthetic kinds with new seeds."""
    import dev
    out = {}
    for name in ("hipacc", "Lrzip", "VP8"):
        d = pd.read_csv(f"{DEV_DIR}/{name}_sample.csv"); out[name] = (d.iloc[:, :-1].to_numpy(float), d.iloc[:, -1].to_numpy(float))
    out["wide-loglin-b"] = dev.syn_loglin(5500, 10, scale=0.9, dens=0.7, n_int=(1, 4), noise=0.05)
    out["wide-inter-b"] = dev.syn_loglin(5501, 12, scale=0.5, dens=0.6, n_int=(4, 9), noise=0.05, three=True)
    X, y = dev.syn_numeric(5502); out["wide-numeric-b"] = (X, y ** 1.6)
    return out


def dev_sizes(system):
    """Session 13: N = 36, 54, 72 for every dev system. Session 33: BDBC's 36, 54, 72 as runs per feature
    (2.25, 3.375, 4.5 p), so every size is above the small-data rule's 2 p."""
    if DEV_SET != "s33":
        return (36, 54, 72)
    p = DEV[system][0].shape[1]
    return tuple(int(round(m * p)) for m in (2.25, 3.375, 4.5))


DEV_SET = os.environ.get("DEV_SET", "s13")
DEV = {}  # the dev systems, read in dev mode only (the bench mode needs none of them)

if __name__ == "__main__":
    from multiprocessing import Pool
    which = sys.argv[1]
    tasks = []
    if which == "dev":
        DEV.update(dev_systems_s33() if DEV_SET == "s33" else dev_systems())  # before the pool forks
        # repetition-major, so that a run stopped early has every (system, N) equally often
        for rep in range(8):
            for name in DEV:
                for n in dev_sizes(name):
                    tasks.append(("dev", name, n, rep))
    else:  # "bench SYSTEM:N1,N2 ..."  data dir in DATA_DIR
        dd = os.environ["DATA_DIR"]
        for spec in sys.argv[2:]:
            s, ns = spec.split(":")
            for n in map(int, ns.split(",")):
                for rep in range(1, 31):
                    tasks.append((dd, s, n, rep))
    with Pool(int(os.environ.get("W", "2"))) as p:
        for _ in p.imap_unordered(task, tasks):
            pass
