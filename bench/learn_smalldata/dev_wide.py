"""Session 6, dev data only: on targets spanning more than 10x, does `auto` do better choosing among
log-target candidates only (vs raw and log)? Full AutoRegressor with perflearn's defaults, N > 2 runs/feature.
Systems: hsmgp (real, DeepPerf, first 244 rows, 25x) + 3 synthetic wide-range systems. No x264/Apache/BDBC/LLVM."""
import sys, json, time, warnings, numpy as np, pandas as pd
warnings.filterwarnings("ignore")
import dev
from perflearn.learn.models import AutoRegressor, AUTO_BLEND, AUTO_LOO_BELOW, AUTO_SMALL_RATIO, AUTO_POINT

def systems():
    d = pd.read_csv("hsmgp_prefix.csv"); X = d.iloc[:, :-1].to_numpy(float); X = X[:, X.std(0) > 0]
    yield "hsmgp", X, d.iloc[:, -1].to_numpy(float)
    yield "wide-loglin(p=10)", *dev.syn_loglin(500, 10, scale=0.9, dens=0.7, n_int=(1, 4), noise=0.05)
    yield "wide-inter(p=12)", *dev.syn_loglin(501, 12, scale=0.5, dens=0.6, n_int=(4, 9), noise=0.05, three=True)
    X, y = dev.syn_numeric(502); yield "wide-numeric", X, y ** 1.6  # steeper: thread scaling and level effects

if __name__ == "__main__":
    reps = int(sys.argv[1]); out = sys.argv[2]
    for name, X, y in systems():
        print(name, X.shape, round(y.max() / y.min(), 1), flush=True)
        for n in (36, 54):
            for rep in range(reps):
                r = np.random.default_rng(2000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
                for variant, lt in (("raw+log", "auto"), ("log only", True)):
                    t0 = time.time()
                    m = AutoRegressor(cv=5, loo_below=AUTO_LOO_BELOW, blend=AUTO_BLEND, small_ratio=AUTO_SMALL_RATIO,
                                      point=AUTO_POINT, log_target=lt, random_state=0).fit(X[tr], y[tr])
                    p = m.predict(X[te]); e = float(np.mean(np.abs(p - y[te]) / y[te]) * 100)
                    rec = dict(system=name, n=n, rep=rep, variant=variant, mre=e, range=float(y[tr].max() / y[tr].min()),
                               members=m.members_, fit_s=time.time() - t0)
                    open(out, "a").write(json.dumps(rec) + "\n"); print(name, n, rep, variant, round(e, 2), round(rec["fit_s"], 1), flush=True)
