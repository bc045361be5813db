"""Dev harness, session 5: per-member LOO + test predictions in log space (mu, sd), then
procedures combined offline. Data: BDBJ (real) + varied synthetic systems. No x264/Apache."""
import itertools, os, pickle, sys, time, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
from sklearn.linear_model import RidgeCV, BayesianRidge, ARDRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler, PolynomialFeatures
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel as C, WhiteKernel, DotProduct
from perflearn.learn.models import build

def sc(m, deg=1):
    st = [("poly", PolynomialFeatures(deg, interaction_only=True, include_bias=False))] if deg > 1 else []
    return Pipeline(st + [("s", StandardScaler()), ("m", m)])

def gp_lin_rbf():
    k = C(1.0,(1e-3,1e3))*RBF(1.0,(1e-2,1e3)) + C(0.1,(1e-4,1e2))*DotProduct(1.0,(1e-3,1e2)) + WhiteKernel(1e-3,(1e-8,1.0))
    return sc(_ArdLin(k, normalize_y=True, n_restarts_optimizer=0, random_state=0))

class _ArdLin(GaussianProcessRegressor):
    def fit(self, X, y):
        from sklearn.base import clone
        orig = self.kernel; k = clone(orig); k.set_params(k1__k1__k2__length_scale=np.ones(np.asarray(X).shape[1]))
        self.kernel = k
        try:
            return super().fit(X, y)
        finally:
            self.kernel = orig

MEMBERS = {  # all fitted on log y; "sd": model's own predictive sd, or None
 "ridge1": lambda: sc(RidgeCV(alphas=np.logspace(-4,3,22))),
 "ridge2": lambda: sc(RidgeCV(alphas=np.logspace(-4,3,22)), 2),
 "ard": lambda: sc(ARDRegression()),
 "bridge": lambda: sc(BayesianRidge()),
 "gp": lambda: build("gp", {"n_restarts_optimizer": 0}),
 "gplin": gp_lin_rbf,
}
HAS_SD = {"ard", "bridge", "gp", "gplin"}

def fitpred(name, X, ly, Xt):
    m = MEMBERS[name]().fit(X, ly)
    if name in HAS_SD:
        mu, sd = m.predict(Xt, return_std=True)
    else:
        mu, sd = m.predict(Xt), np.full(len(Xt), np.nan)
    return np.asarray(mu, float), np.asarray(sd, float)

def member_run(X, y, tr, te):
    ly = np.log(y[tr]); n = len(tr); out = {}
    for name in MEMBERS:
        mu_l, sd_l = np.empty(n), np.empty(n)
        for i in range(n):
            a = np.delete(np.arange(n), i)
            m_, s_ = fitpred(name, X[tr][a], ly[a], X[tr][i:i+1]); mu_l[i], sd_l[i] = m_[0], s_[0]
        mu_t, sd_t = fitpred(name, X[tr], ly, X[te])
        out[name] = (mu_l, sd_l, mu_t, sd_t)
    return out

# ---------------------------------------------------------------- synthetic systems
def binary_grid(p):
    return np.array(list(itertools.product([0, 1], repeat=p)), float)

def syn_loglin(seed, p, scale=0.15, dens=0.6, n_int=(0, 4), noise=0.02, three=False):
    r = np.random.default_rng(seed); X = binary_grid(p)
    beta = r.laplace(0, scale, p) * (r.random(p) < dens)
    ly = np.log(100) + X @ beta
    for _ in range(r.integers(*n_int)):
        i, j = r.choice(p, 2, replace=False); ly += r.laplace(0, scale) * X[:, i] * X[:, j]
    if three:
        i, j, k = r.choice(p, 3, replace=False); ly += r.laplace(0, 2 * scale) * X[:, i] * X[:, j] * X[:, k]
    ly += r.normal(0, noise, len(ly))
    return X, np.exp(ly)

def syn_additive(seed, p, noise=0.02):
    """raw-scale additive: time = base + sum of option costs (+ a few pairwise), not log-linear"""
    r = np.random.default_rng(seed); X = binary_grid(p)
    cost = r.exponential(20, p) * (r.random(p) < 0.6) * r.choice([1, -0.5], p, p=[0.7, 0.3])
    y = 100 + X @ cost
    for _ in range(r.integers(1, 4)):
        i, j = r.choice(p, 2, replace=False); y += r.exponential(20) * X[:, i] * X[:, j]
    y = np.maximum(y, 10) * np.exp(r.normal(0, noise, len(y)))
    return X, y

def syn_numeric(seed, noise=0.03):
    """numeric options: threads (1..16, log2), block size (1..8), level (0..4), + 5 binary; multiplicative, nonlinear"""
    r = np.random.default_rng(seed)
    th = np.array([1, 2, 4, 8, 16.]); bs = np.arange(1, 9.); lv = np.arange(0, 5.)
    B = binary_grid(5)
    rows = np.array([(t, b, l, *bb) for t in th for b in bs for l in lv for bb in B])
    t, b, l = rows[:, 0], rows[:, 1], rows[:, 2]
    par = r.uniform(0.6, 0.95)  # Amdahl parallel fraction
    opt = r.uniform(2, 7)
    beta = r.laplace(0, 0.2, 5) * (r.random(5) < 0.6)
    ly = (np.log(200) + np.log((1 - par) + par / t) + r.uniform(0.05, 0.2) * ((b - opt) / 4) ** 2
          + r.uniform(0.02, 0.15) * l + rows[:, 3:] @ beta + r.laplace(0, 0.15) * rows[:, 3] * (l / 4))
    ly += r.normal(0, noise, len(ly))
    return rows, np.exp(ly)

def sets():
    d = pd.read_csv(os.environ.get("BDBJ_CSV", "BDBJ.csv")); X = d.iloc[:, :-1].to_numpy(float); X = X[:, X.std(0) > 0]
    yield "BDBJ", X, d.iloc[:, -1].to_numpy(float)
    yield from synthetic()

def synthetic():
    """the 13 synthetic systems, in sets()'s order"""
    for s in range(3):  # the previous round's log-linear sparse systems (subset)
        p = [8, 10, 12][s]; yield f"loglin{s}(p={p})", *syn_loglin(s, p)
    for s in range(3):  # strong interactions, a 3-way one
        p = [8, 10, 12][s]; yield f"inter{s}(p={p})", *syn_loglin(100 + s, p, scale=0.3, dens=0.5, n_int=(4, 9), three=True)
    for s in range(3):  # raw-scale additive
        p = [8, 10, 12][s]; yield f"add{s}(p={p})", *syn_additive(200 + s, p)
    for s in range(2):  # noisy log-linear
        p = [9, 11][s]; yield f"noisy{s}(p={p})", *syn_loglin(300 + s, p, noise=0.1)
    for s in range(2):  # numeric options
        yield f"numeric{s}", *syn_numeric(400 + s)

if __name__ == "__main__":
    mult = float(sys.argv[1]); reps = int(sys.argv[2]); outp = sys.argv[3]
    res = []
    for name, X, y in sets():
        p = X.shape[1]; n = p + 1 if mult == 1 else int(round(mult * p))
        for rep in range(reps):
            r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
            t0 = time.time()
            res.append((name, rep, y[tr], y[te], member_run(X, y, tr, te)))
            print(name, n, rep, round(time.time() - t0, 1), flush=True)
        pickle.dump(res, open(outp, "wb"))
