"""Session 9 dev candidates (scratch; the adopted one, if any, moves to src/perflearn/learn).

SubsetBMA: Bayesian model averaging over linear main-effect models, one per subset of the
columns (spike-and-slab by enumeration): Zellner's g-prior on each model's coefficients with
the hyper-g/n prior on g (Liang et al. 2008, JASA), beta-binomial(1,1) prior on the model
size (Scott & Berger 2010), flat prior on the intercept, Jeffreys on the noise variance.
Everything is closed form given each model's R^2, so all 2^p models are enumerated (p <= 16
after dropping constant and duplicate columns; beyond that, all models up to the largest
size that keeps the count under 2^16).
"""
from __future__ import annotations

import itertools
from math import comb, lgamma

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data


class SubsetBMA(RegressorMixin, BaseEstimator):
    def __init__(self, max_models=2**16, n_g=60):
        self.max_models = max_models
        self.n_g = n_g

    def fit(self, X, y):
        X, y = validate_data(self, X, y, y_numeric=True)
        y = np.asarray(y, float)
        n, p = X.shape
        self.x_mean_ = X.mean(0)
        self.y_mean_ = float(y.mean())
        Xc = X - self.x_mean_
        yc = y - self.y_mean_
        tss = float(yc @ yc)
        self.n_ = n
        # identifiable columns only: drop constants and exact copies (|corr| = 1) of an earlier column
        keep, units = [], []
        for j in range(p):
            nrm = np.linalg.norm(Xc[:, j])
            if nrm <= 1e-10 * max(1.0, np.abs(X[:, j]).max()):
                continue
            u = Xc[:, j] / nrm
            if any(abs(u @ v) > 1 - 1e-9 for v in units):
                continue
            keep.append(j)
            units.append(u)
        self.keep_ = np.array(keep, int)
        q = len(keep)
        Z = Xc[:, self.keep_]
        kmax = min(q, n - 2)  # at least one residual degree of freedom beside the intercept
        total = 0
        for k in range(kmax + 1):
            total += comb(q, k)
            if total > self.max_models:
                kmax = k - 1
                break
        self.kmax_ = kmax
        if tss <= 0 or kmax < 0:
            self.models_ = [((), np.zeros(0), 0.0, np.zeros((0, 0)), 0.0)]
            self.weights_ = np.ones(1)
            self.coef_, self.second_ = np.zeros(q), np.zeros((q, q))
            self.noise_ = tss / max(n - 1, 1) * (1 + 1 / n)
            self.inclusion_ = np.zeros(q)
            return self
        G = Z.T @ Z
        b = Z.T @ yc
        # hyper-g/n prior: pi(g) = (a - 2) / (2 n) (1 + g/n)^(-a/2), a = 3; integrated on a log grid of g
        t = np.linspace(np.log(1e-3), np.log(1e8 * n), int(self.n_g))
        g = np.exp(t)
        a = 3.0
        log_prior_g = np.log((a - 2) / (2 * n)) - a / 2 * np.log1p(g / n) + t + np.log(t[1] - t[0])  # dg = g dt
        logw, shrink, recs, r2s = [], [], [], []
        for k in range(kmax + 1):
            if k == 0:
                idx = np.zeros((1, 0), int)
                beta = np.zeros((1, 0))
                r2 = np.zeros(1)
                Ginv = np.zeros((1, 0, 0))
            else:
                idx = np.array(list(itertools.combinations(range(q), k)), int)
                Gk = G[idx[:, :, None], idx[:, None, :]]
                d = np.sqrt(np.einsum("mii->mi", Gk))
                # a model whose columns are linearly dependent on these runs is not identifiable
                # (the same fit as a smaller model, already enumerated): left out
                ok = np.linalg.eigvalsh(Gk / d[:, :, None] / d[:, None, :])[:, 0] > 1e-8
                idx, Gk = idx[ok], Gk[ok]
                if len(idx) == 0:
                    continue
                Ginv = np.linalg.inv(Gk)
                beta = np.einsum("mij,mj->mi", Ginv, b[idx])
                r2 = np.clip(np.einsum("mi,mi->m", beta, b[idx]) / tss, 0.0, 1.0 - 1e-12)
            # log marginal likelihood given g (up to a constant shared by every model)
            lml = (n - 1 - k) / 2 * np.log1p(g)[None, :] - (n - 1) / 2 * np.log1p(g[None, :] * (1 - r2[:, None]))
            lj = lml + log_prior_g[None, :]
            lm = logsumexp(lj, axis=1)
            post_g = np.exp(lj - lm[:, None])
            sh = post_g @ (g / (1 + g))
            log_model_prior = -np.log(q + 1) - (lgamma(q + 1) - lgamma(k + 1) - lgamma(q - k + 1))
            logw.append(lm + log_model_prior)
            shrink.append(sh)
            r2s.append(r2)
            recs.append((idx, beta, Ginv))
        logw = np.concatenate(logw)
        w = np.exp(logw - logw.max())
        w /= w.sum()
        # keep the models carrying the weight (the rest change nothing measurable)
        order = np.argsort(-w)
        cum = np.cumsum(w[order])
        m_keep = order[: int(np.searchsorted(cum, 1 - 1e-6)) + 1]
        flat = []
        for idx, beta, Ginv in recs:
            for m in range(len(idx)):
                flat.append((idx[m], beta[m], Ginv[m]))
        shrink = np.concatenate(shrink)
        r2s = np.concatenate(r2s)
        self.models_ = [(flat[i][0], flat[i][1], float(shrink[i]), flat[i][2], float(r2s[i])) for i in m_keep]
        self.weights_ = w[m_keep] / w[m_keep].sum()
        # per model: noise scale^2 of the Student-t predictive (Jeffreys prior on sigma^2, g at its posterior shrinkage)
        s2 = np.array([tss * (1 - sh * r2) / (n - 1) for (_, _, sh, _, r2) in self.models_])
        dof = (n - 1) / (n - 3) if n > 3 else 1.0
        # the mixture's first two moments are quadratic in z = x - mean: precompute them once
        b1 = np.zeros(q)
        B2 = np.zeros((q, q))
        c0 = 0.0
        inclusion = np.zeros(q)
        for (idx, beta, sh, Ginv, _), w, s2m in zip(self.models_, self.weights_, s2):
            idx = np.asarray(idx, int)
            bt = np.zeros(q)
            bt[idx] = sh * beta
            b1 += w * bt
            B2 += w * np.outer(bt, bt)
            B2[np.ix_(idx, idx)] += w * s2m * dof * sh * Ginv
            c0 += w * s2m * dof * (1 + 1 / n)
            inclusion[idx] += w
        self.coef_, self.second_, self.noise_ = b1, B2, c0
        self.inclusion_ = inclusion
        return self

    def predict(self, X, return_std=False):
        check_is_fitted(self, "models_")
        X = validate_data(self, X, reset=False)
        Z = (X - self.x_mean_)[:, self.keep_] if len(self.keep_) else np.zeros((X.shape[0], 0))
        mean = self.y_mean_ + Z @ self.coef_
        if return_std:
            var = self.noise_ + np.einsum("ri,ij,rj->r", Z, self.second_, Z) - (Z @ self.coef_) ** 2
            return mean, np.sqrt(np.maximum(var, 0.0))
        return mean
