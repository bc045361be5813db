"""Extra member for the dev harness: hierarchical Bayesian linear model of log y with
main effects and pairwise interactions, two prior scales (interactions shrunk by a
factor r relative to main effects); r chosen by the marginal likelihood (evidence)."""
import os, pickle, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev
from sklearn.linear_model import BayesianRidge
from sklearn.preprocessing import StandardScaler, PolynomialFeatures
from sklearn.base import BaseEstimator, RegressorMixin

class HierBayes(BaseEstimator, RegressorMixin):
    def __init__(self, ratios=(0.0, 0.1, 0.3, 1.0)):
        self.ratios = ratios
    def _feat(self, X, r):
        Z = self.poly_.transform(X); Z = self.sc_.transform(Z); p = self.p_
        Z[:, p:] *= r
        return Z if r > 0 else Z[:, :p]
    def fit(self, X, y):
        self.p_ = X.shape[1]
        self.poly_ = PolynomialFeatures(2, interaction_only=True, include_bias=False).fit(X)
        Z = self.poly_.transform(X); self.sc_ = StandardScaler().fit(Z)
        best = None
        for r in self.ratios:
            m = BayesianRidge(compute_score=True).fit(self._feat(X, r), y)
            if best is None or m.scores_[-1] > best[0]:
                best = (m.scores_[-1], r, m)
        _, self.r_, self.m_ = best
        return self
    def predict(self, X, return_std=False):
        return self.m_.predict(self._feat(X, self.r_), return_std=return_std)

dev.MEMBERS = {"hier": lambda: HierBayes()}
dev.HAS_SD = {"hier"}
if __name__ == "__main__":
    mult = float(sys.argv[1]); reps = int(sys.argv[2]); outp = sys.argv[3]
    res = []
    for name, X, y in dev.sets():
        p = X.shape[1]; n = p + 1 if mult == 1 else int(round(mult * p))
        for rep in range(reps):
            r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
            res.append((name, rep, y[tr], y[te], dev.member_run(X, y, tr, te)))
        print(name, flush=True)
    pickle.dump(res, open(outp, "wb"))
