"""Model families, their hyperparameter grids, and ``auto`` (choice by cross-validation).

Every family is a scikit-learn estimator over a numeric matrix (categorical knobs
are one-hot encoded before, by :func:`make_pipeline`), carrying its own scaling:
min-max for the MLP (as NESCAT), standard scaling for SVR, kNN, GP and the linear
model, none for trees. A log target (for metrics spanning orders of magnitude)
wraps any family. ``AutoRegressor`` picks family, hyperparameters and log target
by K-fold cross-validation on the data it is fitted on, and nothing else.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin, clone
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.ensemble import BaggingRegressor, GradientBoostingRegressor, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import ARDRegression, BayesianRidge, RidgeCV
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, PolynomialFeatures, StandardScaler
from sklearn.svm import SVR
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from perflearn.errors import UsageError

from .metrics import mre, rmse

FAMILIES = ("cart", "rf", "gbm", "svr", "mlp", "linear", "bayes", "knn", "gp")
AUTO_FAMILIES = ("cart", "rf", "gbm", "svr", "mlp", "linear", "knn", "gp")
# The only candidates of `auto` on small data (AUTO_SMALL_RATIO): low-variance families
# (few effective parameters, or hyperparameters set by the marginal likelihood of all the
# training runs rather than by held-out folds) and one random forest with fixed settings,
# a different model whose errors are less correlated with the others' (it enters the
# weighted average, see `weights`; chosen on dev data in session 9, bench/learn.md).
# `bayes` is a candidate only there (with more runs, `linear`, ridge with interactions,
# covers the same models).
SMALL_FAMILIES = ("linear", "bayes", "gp", "rf")
# The general procedure behind `perflearn fit --family auto` (see docs/learn.md):
AUTO_LOO_BELOW = 30  # leave-one-out CV up to this many training runs
# below this many runs (of small data) the band's out-of-fold predictions are nested (AutoRegressor.nested_below);
# a bound by cost, one more fit per fold: CPU s of a fit at DeepPerf Apache N = 9 1.5 -> 12, x264 N = 16 2.8 -> 45
AUTO_NESTED_BELOW = 13
AUTO_ENSEMBLE = 1  # greedy ensemble rounds (1 = refit the single best candidate)
AUTO_BLEND = 0.2  # average the candidates within this fraction of the best CV error
AUTO_SMALL_RATIO = 2.0  # at most this many runs per feature: only SMALL_FAMILIES are candidates
AUTO_POINT = "auto"  # point prediction: "relative" (minimises expected relative error) on small data, else median
POINTS = ("auto", "median", "relative")
AUTO_WEIGHTS = "auto"  # averaging of candidates: "inverse" (every candidate, weight 1/CV error^2) on small data, else "near-ties"
WEIGHTS = ("auto", "near-ties", "inverse")
COMBINES = ("auto", "arithmetic")  # how near-ties are averaged: auto = geometrically when scored by MRE
# Above this many model-input columns (numeric features + one column per category of each
# categorical one), `auto` leaves out the two candidates whose cost grows faster than the width:
# the GP (one length scale per column, every optimizer step O(runs^2 x width)) and ridge with
# pairwise interactions (width^2 / 2 columns: 450k, GBs, for a knob of 950 categories). A
# knob of ~1000 categories took many minutes per fold in those two alone; the rest grow linearly.
# Within it: every DeepPerf system of bench/learn.md (at most 60 columns), so no choice there changes.
AUTO_MAX_WIDTH = 100
QUANTILE_LEAF = 10  # a quantile forest's leaves hold at least this many rows (see build, quantile_leaf)
GP_HYPER_ROWS = 500  # a GP's kernel is tuned on at most this many rows (see _ArdGaussianProcess)
GP_MAX_ROWS = 8000  # above, no GP among `auto`'s candidates: its n x n matrices (1.7 GB at 8000, bench/learn_gp_large.py)
KNN_NEIGHBORS = 5  # knn's default n_neighbors (at most the training runs: see evaluate.check_neighbors)


def _log(y):
    return np.log(y)


def _exp(y):
    return np.exp(y)


def log_dist(est, X):
    """(mu, sd) of log(y) predicted by a fitted log-target estimator; sd is None when the
    model has no predictive distribution of its own (only GPs and Bayesian linear models have)."""
    inner = est.regressor_
    final = inner.steps[-1][1] if isinstance(inner, Pipeline) else inner
    if isinstance(final, (GaussianProcessRegressor, ARDRegression, BayesianRidge)):
        mu, sd = inner.predict(X, return_std=True)
        return np.asarray(mu, dtype=float), np.asarray(sd, dtype=float)
    return np.asarray(inner.predict(X), dtype=float), None


class _RelativePoint:
    """A fitted log-target regressor predicting the point that minimises the expected
    *relative* error |p - y| / y instead of the median exp(mu).

    If log(y) ~ N(mu, s^2) (the model's predictive distribution of the log target), the
    expected relative error E|p - y|/y is minimised by the median of the density
    weighted by 1/y, which is again lognormal, with log-mean mu - s^2: p = exp(mu - s^2).
    ``s`` is the model's own predictive sd (GP, Bayesian linear: posterior + noise),
    or ``spread`` (the RMS of its out-of-fold log residuals) for models without one.
    """

    def __init__(self, estimator, spread=None):
        self.estimator = estimator
        self.spread = spread

    def predict(self, X):
        mu, sd = log_dist(self.estimator, X)
        if sd is None:
            sd = np.full_like(mu, float(self.spread or 0.0))
        return np.exp(mu - sd**2)


def _scaled_target(model) -> TransformedTargetRegressor:
    return TransformedTargetRegressor(regressor=model, transformer=StandardScaler())


def power_up(x: float) -> float:
    """The power of two that brings ``x`` > 0 to 1 or more (1 when it is): it scales exactly."""
    return 2.0 ** max(0, -math.floor(math.log2(x)))


class BinaryScaler(TransformerMixin, BaseEstimator):
    """A target times the power of two that brings its spread to 1 or more. scikit-learn's
    trees make a node a leaf when its variance is 2.2e-16 or less, in the target's own unit:
    seconds per operation (2e-8) were learned as a constant (R² -0.01, every importance 0;
    the same runs in ns: 0.98). A power of two scales exactly, so a tree splits as it would
    in a larger unit; a target whose spread is 1 or more is left as it is."""

    def fit(self, y, _=None):
        y = np.asarray(y, dtype=float)
        sd = float(np.nanstd(y))
        # a spread of rounding (0.3 and 0.30000000000000004, or a constant fold's std of 1e-17) is none:
        # scaled up, the trees split on float noise
        noise = 1e-12 * float(np.nanmax(np.abs(y))) if y.size and np.isfinite(y).any() else 0.0
        self.scale_ = power_up(sd) if noise < sd < math.inf else 1.0
        return self

    def transform(self, y):
        return np.asarray(y, dtype=float) * self.scale_

    def inverse_transform(self, y):
        return np.asarray(y, dtype=float) / self.scale_


TREE_FAMILIES = ("cart", "rf", "gbm")

# scikit-learn's tree splitters take values this close for one (their FEATURE_THRESHOLD)
TREE_GAP_MIN = 1e-7


class GapScaler(TransformerMixin, BaseEstimator):
    """Each numeric column times the power of two that brings the median gap between its
    distinct values to 1 or more, where that gap is ``TREE_GAP_MIN`` or less; every other
    column as it is. scikit-learn's trees take values 1e-7 apart for one: a delay in seconds
    at nanosecond scale was never split on (importance 0, one rule for every run; in ns:
    R² 0.997). A power of two scales exactly, so a tree splits as it would in a smaller
    unit, and every other family (which standardises its input) fits as before."""

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=float)
        self.n_features_in_ = X.shape[1]
        self.scale_ = np.ones(X.shape[1])
        for j, column in enumerate(X.T):
            values = np.unique(column[np.isfinite(column)])
            gap = float(np.median(np.diff(values))) if len(values) > 1 else 0.0
            if 0 < gap <= TREE_GAP_MIN:
                self.scale_[j] = power_up(gap)
        return self

    def transform(self, X):
        if np.all(self.scale_ == 1.0):
            return X  # as "passthrough" did: nothing to scale
        return np.asarray(X, dtype=float) * self.scale_

    def get_feature_names_out(self, input_features=None):
        return np.asarray(input_features, dtype=object)


def quantile_leaf(family: str, params: dict | None, n: int) -> dict | None:
    """A quantile forest's leaf size for ``n`` training rows, unless ``params`` set one:
    ``QUANTILE_LEAF`` (10, as R's quantregForest), but at most an eighth of the rows. On 24
    runs, leaves of 10 left the trees no split: one constant prediction, every feature's
    importance 0. Smaller leaves read narrower quantiles, which beats reading none."""
    if family != "rf" or not params or params.get("quantile") is None or "min_samples_leaf" in params:
        return params
    return {**params, "min_samples_leaf": max(1, min(QUANTILE_LEAF, n // 8))}


def build(
    family: str,
    params: dict[str, Any] | None = None,
    *,
    log_target: bool = False,
    random_state: int | None = 0,
    n_jobs: int = 1,
) -> BaseEstimator:
    """An unfitted estimator of ``family`` over a numeric matrix."""
    p = dict(params or {})
    q = quantile_of(family, p.pop("quantile", None))
    if family == "cart":
        model = DecisionTreeRegressor(random_state=random_state, **p)
    elif family == "rf" and q is not None:
        # Meinshausen's quantile regression forest: every training value kept in its leaves, the
        # quantile read off the values a point's leaves hold. Leaves of at least 10, as R's
        # quantregForest: smaller leaves hold the noise they were split on, and their quantiles
        # are too narrow (a 0.9 quantile covered 72 % of new values with leaves of 1, 86 % of 5, 89 % of 10)
        from quantile_forest import RandomForestQuantileRegressor

        p.setdefault("n_estimators", 100)
        p.setdefault("min_samples_leaf", QUANTILE_LEAF)
        p.setdefault("max_samples_leaf", None)
        model = RandomForestQuantileRegressor(default_quantiles=q, random_state=random_state, n_jobs=n_jobs, **p)
    elif family == "rf":
        p.setdefault("n_estimators", 100)
        model = RandomForestRegressor(random_state=random_state, n_jobs=n_jobs, **p)
    elif family == "gbm":
        p.setdefault("n_estimators", 200)
        p.setdefault("learning_rate", 0.05)
        p.setdefault("subsample", 0.8)
        if q is not None:  # the pinball loss of that quantile
            p.update(loss="quantile", alpha=q)
        model = GradientBoostingRegressor(random_state=random_state, **p)
    elif family == "svr":
        p.setdefault("C", 10.0)
        p.setdefault("epsilon", 0.05)
        model = Pipeline([("scale", StandardScaler()), ("svr", SVR(**p))])
        model = _scaled_target(model)
    elif family == "mlp":
        bag = _whole("mlp", "bag", p.pop("bag", 1), 1, " (the random starts averaged)")
        p.setdefault("hidden_layer_sizes", (64, 64))
        p.setdefault("max_iter", 2000)
        p.setdefault("early_stopping", False)
        p.setdefault("learning_rate_init", 0.003)
        net = MLPRegressor(random_state=random_state, **p)
        if bag > 1:  # the same runs from `bag` random starts, averaged: one net's start is noise on a few runs
            net = BaggingRegressor(net, n_estimators=bag, bootstrap=False, random_state=random_state)
        model = _scaled_target(Pipeline([("scale", MinMaxScaler()), ("mlp", net)]))
    elif family == "linear":
        degree = _whole("linear", "degree", p.pop("degree", 1), 1, " (2: pairwise interactions)")
        steps: list = []
        if degree > 1:
            steps.append(("poly", PolynomialFeatures(degree, interaction_only=True, include_bias=False)))
        steps += [("scale", StandardScaler()), ("ridge", RidgeCV(alphas=np.logspace(-4, 3, 22)))]
        model = Pipeline(steps)
    elif family == "bayes":
        prior = p.pop("prior", "ard")
        if prior not in ("ard", "ridge"):
            raise ValueError(f"bayes: prior must be ard or ridge, got {prior!r}")
        reg = ARDRegression(**p) if prior == "ard" else BayesianRidge(**p)
        model = Pipeline([("scale", StandardScaler()), ("bayes", reg)])
        if not log_target:  # its hyperpriors are set for a target near unit scale: IOPS (1e5) or seconds (1e-3)
            model = _scaled_target(model)  # were learned as a constant (R² -0.04); a log target is near it already
    elif family == "knn":
        p.setdefault("n_neighbors", KNN_NEIGHBORS)
        p.setdefault("weights", "distance")
        model = Pipeline([("scale", StandardScaler()), ("knn", KNeighborsRegressor(**p))])
    elif family == "gp":
        restarts = _whole("gp", "n_restarts_optimizer", p.pop("n_restarts_optimizer", 1), 0)
        kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(1.0, length_scale_bounds=(1e-2, 1e3)) + WhiteKernel(
            1e-3, (1e-8, 1.0)
        )
        model = Pipeline(
            [
                ("scale", StandardScaler()),
                ("gp", _ArdGaussianProcess(kernel=kernel, n_restarts_optimizer=restarts, random_state=random_state,
                                           **{"normalize_y": True, **p})),
            ]
        )
    else:
        raise ValueError(f"unknown model family {family!r} (families: {', '.join(FAMILIES)}, auto)")
    if family in TREE_FAMILIES:
        model = TransformedTargetRegressor(regressor=model, transformer=BinaryScaler(), check_inverse=False)
    if log_target:  # a quantile of log y is the log of y's quantile: quantile models take a log target as they are
        model = TransformedTargetRegressor(regressor=model, func=_log, inverse_func=_exp, check_inverse=False)
    return model


def _whole(family: str, name: str, given, least: int, meaning: str = "") -> int:
    """``given`` as a whole number of at least ``least``, or a ValueError naming it (0 and 2.5 fitted
    degree 1, unsaid; 'abc' was int()'s message, without the parameter's name)."""
    try:
        value = float(given)
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if isinstance(given, bool) or not value.is_integer() or value < least:
        raise ValueError(f"{family}: {name} must be a whole number >= {least}{meaning}, got {given!r}")
    return int(value)


QUANTILE_FAMILIES = ("rf", "gbm")


def quantile_of(family: str, q) -> float | None:
    """The quantile a model of ``family`` is asked to predict (None: its usual point), checked."""
    if q is None:
        return None
    if family not in QUANTILE_FAMILIES:
        raise ValueError(f"quantile: only {' and '.join(QUANTILE_FAMILIES)} predict a quantile, not {family}")
    q = float(q)
    if not 0 < q < 1:
        raise ValueError(f"quantile: a fraction in (0, 1), got {q:g}")
    return q


# hyperparameters ``build`` reads itself rather than passing them to the estimator
_BUILD_KEYS = {"linear": ("degree",), "bayes": ("prior",), "gp": ("n_restarts_optimizer",), "rf": ("quantile",),
               "gbm": ("quantile",), "mlp": ("bag",)}


def check_families(family: str, families) -> None:
    """Raise ValueError unless ``families`` (auto's candidate families, or None for all)
    is a non-empty list of known families given with ``family`` auto."""
    if families is None:
        return
    if family != "auto":
        raise ValueError(f"candidate families apply to auto; --family {family} is one family already")
    if not families:
        raise ValueError("no candidate family given")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown model family {unknown[0]!r} (families: {', '.join(FAMILIES)})")


def check_params(family: str, params: dict[str, Any] | None) -> None:
    """Raise ValueError when ``params`` are not hyperparameters of ``family``, naming
    the first unknown one and the family's own (scikit-learn's TypeError says less)."""
    if not params:
        return
    if family == "auto":
        raise ValueError("hyperparameters apply to an explicit --family; auto chooses its own by cross-validation")
    quantile_of(family, params.get("quantile"))
    # the keys that choose the estimator itself (bayes's prior; a quantile makes rf a quantile forest)
    chooser = {k: params[k] for k in ("prior", "quantile") if k in params and k in _BUILD_KEYS.get(family, ())}
    est = build(family, chooser)
    while True:  # the estimator the parameters go to, inside the target transform and pipeline
        if isinstance(est, TransformedTargetRegressor):
            est = est.regressor
        elif isinstance(est, Pipeline):
            est = est.steps[-1][1]
        else:
            break
    known = (set(est.get_params(deep=False)) | set(_BUILD_KEYS.get(family, ()))) - {"random_state", "n_jobs", "kernel"}
    for name in params:
        if name in ("random_state", "n_jobs"):
            raise ValueError(f"{name} is perflearn's to set (random_state: --seed)")
        if name not in known:
            raise ValueError(f"{family} has no hyperparameter {name!r} (it has: {', '.join(sorted(known))})")
    build(family, params)  # the values build reads itself (degree, bag, prior, restarts): evaluate's fit had no check


class _ArdGaussianProcess(GaussianProcessRegressor):
    """A GP whose RBF kernel gets one length scale per input column at fit time (ARD).

    Above ``GP_HYPER_ROWS`` training rows, the kernel's hyperparameters are those that
    maximise the marginal likelihood of a random ``GP_HYPER_ROWS`` of them, and the GP is
    then conditioned on every row with them: each step of the optimizer costs a
    factorisation cubic in the rows. On x264's 1152 configurations the GP's five folds took
    84.9 s and now 19.7 s (CV MRE 0.0262 and 0.0267 %); on 2000 noisy runs of a smooth
    function 221.9 s and 15.3 s (4.036 and 4.043 %); bench/learn.md, "Fitting a GP on many
    runs". The DeepPerf benchmark's training sets (at most 80 runs) are not touched."""

    def fit(self, X, y):
        # checked as the GP checks them, before their shape is read (a 1-D X, y=None or a sparse X
        # raised IndexError or TypeError here: six of scikit-learn's estimator checks failed)
        n, width = validate_data(self, X, y, multi_output=True, y_numeric=True)[0].shape
        original, optimizer = self.kernel, self.optimizer
        if n > GP_HYPER_ROWS and optimizer is not None:
            rows = check_random_state(self.random_state).choice(n, GP_HYPER_ROWS, replace=False)
            tuned = clone(self).fit(_rows(X, rows), _rows(y, rows))
            self.kernel, self.optimizer = tuned.kernel_, None
        else:
            ard = clone(original)
            ard.set_params(k1__k2__length_scale=np.ones(width))
            self.kernel = ard
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                return super().fit(X, y)
        finally:
            self.kernel, self.optimizer = original, optimizer


def _rows(a, rows):
    return a.iloc[rows] if hasattr(a, "iloc") else np.asarray(a)[rows]


def grid(family: str, n_samples: int, n_features: int, small: bool = False,
         max_width: float = AUTO_MAX_WIDTH) -> list[dict[str, Any]]:
    """Hyperparameter settings ``auto`` tries for ``family`` on a training set of this shape
    (``small``: under the small-data rule, where nothing is chosen among settings of a forest;
    wider than ``max_width`` columns: no GP, no pairwise interactions)."""
    if family == "cart":
        return [{"min_samples_leaf": m} for m in (1, 3)] + [{"max_depth": 4}]
    if family == "rf":
        return [{"max_features": 1.0}] if small else [{"max_features": 1.0}, {"max_features": 0.5}]
    if family == "gbm":
        return [{"max_depth": 2}, {"max_depth": 4}]
    if family == "svr":
        return [{"C": c} for c in (1.0, 10.0, 100.0)]
    if family == "mlp":
        if small:  # one setting: full-batch L-BFGS for a few runs, strong weight decay, three starts averaged
            return [{"hidden_layer_sizes": (32,), "alpha": 1.0, "solver": "lbfgs", "bag": 3}]
        early = n_samples >= 200  # validation-based early stopping needs a validation set worth the name
        return [{"hidden_layer_sizes": (64, 64), "alpha": a, "early_stopping": early} for a in (1e-3, 1e-1)]
    if family == "linear":
        out = [{"degree": 1}]
        if 2 <= n_features <= max_width:  # interactions: n_features^2 / 2 columns
            out.append({"degree": 2})
        return out
    if family == "bayes":
        return [{"prior": "ard"}, {"prior": "ridge"}]
    if family == "knn":
        return [{"n_neighbors": k} for k in (1, 3, 7) if k < n_samples]
    if family == "gp":  # exact GP is cubic in the samples; its ARD kernel has a length scale per column
        return [{}] if n_samples <= GP_MAX_ROWS and n_features <= max_width else []
    raise ValueError(f"unknown model family {family!r}")


def resolve_log_target(log_target: bool | str, y: np.ndarray, where: str, family: str = "auto") -> bool | str:
    """``log_target`` as given; a log target of a value <= 0 is refused in one line (it
    reached scikit-learn as "Input y contains NaN"). For one ``family``, "auto" is decided
    here: a log target when every value is > 0 and they span 100x or more (auto tries both)."""
    if log_target is True and not np.all(y > 0):
        raise UsageError("a log target needs every value > 0", where=where)
    if family != "auto" and log_target == "auto":
        return bool(np.all(y > 0) and y.max() / y.min() >= 100)
    return log_target


@dataclass
class Candidate:
    family: str
    params: dict[str, Any]
    log_target: bool

    def label(self) -> str:
        ps = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.family}({ps}){' log' if self.log_target else ''}"


def _cv_params(cand: Candidate) -> dict[str, Any]:
    """Cheaper settings used only while scoring candidates (the refit uses the full ones):
    fewer trees for forests, no optimizer restarts for GPs."""
    p = dict(cand.params)
    if cand.family == "rf":
        p.setdefault("n_estimators", 50)
    elif cand.family == "gp":
        p.setdefault("n_restarts_optimizer", 0)
    return p


def cv_folds(n_samples: int, cv: int) -> int:
    """Folds actually used: ``cv``, at most one sample per test fold."""
    return max(2, min(int(cv), n_samples))


def n_groups(groups) -> int:
    return 0 if groups is None else int(len(np.unique(np.asarray(groups))))


def cv_splits(X, cv: int, *, groups=None, loo_below: int = 0, random_state=None) -> list:
    """(train, test) index pairs of the cross-validation ``auto`` scores candidates on.

    Without ``groups``: shuffled K-fold (leave-one-out up to ``loo_below`` samples).
    With ``groups`` (one label per row, e.g. the run of each per-sample row): the folds
    keep every row of a group together (GroupKFold, shuffled; leave-one-group-out up to
    ``loo_below`` groups), so rows of one run are never on both sides of a split.
    """
    n = np.shape(X)[0]
    if groups is None:
        folds = n if n <= int(loo_below) else cv_folds(n, cv)
        return list(KFold(folds, shuffle=True, random_state=random_state).split(X))
    g = np.asarray(groups)
    k = n_groups(g)
    if k < 2:
        raise ValueError(f"cross-validation by group needs at least 2 groups (runs), got {k}")
    if k <= int(loo_below):
        return list(LeaveOneGroupOut().split(X, groups=g))
    return list(GroupKFold(max(2, min(int(cv), k)), shuffle=True, random_state=random_state).split(X, groups=g))


def _score(scoring: str, y, pred) -> float:
    return mre(y, pred) if scoring == "mre" else rmse(y, pred)


class AutoRegressor(RegressorMixin, BaseEstimator):
    """Chooses model family, hyperparameters and log target by K-fold cross-validation.

    Parameters
    ----------
    families : tuple of str or None
        Families to consider (default: all of ``AUTO_FAMILIES``).
    cv : int
        Folds (capped at the number of samples).
    loo_below : int
        Up to this many samples, leave-one-out instead (a steadier choice on tiny data).
    scoring : {"auto", "mre", "rmse"}
        Out-of-fold error to minimise. ``auto``: MRE when every target is > 0, else RMSE.
    log_target : {"auto", True, False}
        ``auto`` tries both when every target is > 0. Scored by relative error (MRE), a
        raw-target candidate is then kept only if the best of them beats the best
        log-target candidate by 2 standard errors, paired per training run
        (``raw_set_aside_``). On a target spanning two orders of magnitude a raw-target
        model that fits the large values well can over-predict the small ones
        several-fold, and a cross-validation score on a few dozen runs does not always
        show it: on BDBC at N = 36, a raw-target tree scored 13.6 % in CV and erred by
        234 % on the other 2524 configurations. Adopted on development data none of the
        earlier comparisons saw, by a rule written before the run (bench/learn.md,
        session 33).
    ensemble : int
        1: refit the single best candidate. k > 1: greedy ensemble selection
        (Caruana et al. 2004) over the candidates' out-of-fold predictions, k
        rounds with replacement; the result averages the chosen members.
    blend : float
        > 0: average (equal weights) every candidate whose CV error is within this
        fraction of the best one's, at most ``blend_max`` of them. When one
        candidate clearly wins it stays alone; when several are as good (small,
        noisy data) their average is steadier than any one pick. Overrides ``ensemble``.
    blend_max : int
    small_ratio : float
        > 0: when the training set has at most ``small_ratio`` runs per feature, only
        the families of ``SMALL_FAMILIES`` (ridge, Bayesian linear, GP, and one random forest
        with fixed settings, there to diversify the weighted average rather than to be
        chosen; those of them in ``families`` when it is given) are candidates. With about one run per feature a
        flexible model's error is mostly variance, and choosing among many such
        models by cross-validation on a handful of runs adds the choice's own
        variance (the winner's CV score is optimistically biased); a shrunken
        linear model of the (log) target, or a GP whose hyperparameters come from
        the marginal likelihood, has far fewer effective parameters. With
        ``log_target="auto"`` and every target > 0, only the log target is tried
        then: squared error on log(y) is the error measure closest to the relative
        error that scores the candidates (|log(p/y)| ~ |p - y|/y), option effects on
        performance are typically multiplicative, and it halves the candidates the
        noisy leave-one-out scores have to choose among.
    random_state : int or None
    n_jobs : int
        Passed to forests (keep <= 2 on shared machines).

    point : {"auto", "median", "relative"}
        The point each log-target candidate predicts. ``median``: exp(mu), the median
        of its predictive distribution of y. ``relative``: exp(mu - s^2), the point that
        minimises the expected relative error |p - y| / y (MRE, the error ``auto``
        scores by) when log(y) ~ N(mu, s^2); s is the model's own predictive sd (GP,
        Bayesian linear) or the RMS of its out-of-fold log residuals (others). It lies
        below the median, by more where the model is less sure. ``auto``: ``relative``
        when the small-data rule applies and candidates are scored by MRE (there every
        candidate is a log-target model with a predictive distribution, and the spread
        is large enough to matter), else ``median``. Candidates are scored with the
        point they will predict.
    weights : {"auto", "near-ties", "inverse"}
        How the candidates are combined. ``near-ties``: ``blend`` (equal weights for
        those within ``blend`` of the best CV error) or ``ensemble``. ``inverse``: every
        candidate that did not fail, weighted by 1 / (its CV error)^2, the inverse-variance
        weighting of estimators whose error variances are estimated by their CV errors:
        no hard choice, so the choice's own variance (large when the CV errors come from
        a handful of runs) is not paid, while clearly worse candidates weigh little.
        ``auto``: ``inverse`` when the small-data rule applies, else ``near-ties``.
    combine : {"auto", "arithmetic"}
        How near-ties (``weights="near-ties"`` with ``blend``) are averaged. ``auto``: when
        candidates are scored by relative error (MRE, every target > 0), geometrically,
        exp(mean of log predictions), wherever every member predicts > 0: the mean that
        treats a member's error by its ratio, as MRE does, so one member predicting 3x too
        much moves the average as far as one predicting 3x too little (the arithmetic mean
        lets over-prediction dominate). Chosen on development data (session 13,
        ``bench/learn.md``); the inverse weights of small data stay arithmetic (the
        geometric mean was not better there).

    nested_below : int
        When the small-data rule applies and there are fewer independent units than
        this, ``honest_oof_`` (the out-of-fold predictions the prediction band is
        calibrated on) is fully nested: each fold predicted by the whole procedure
        refitted on the other folds. Otherwise the members and weights are chosen again
        on the other folds' out-of-fold predictions, which came from models that saw
        the fold (cheaper, a little optimistic). Nested, the band held 86 % of new
        values at DeepPerf Apache with 9 runs instead of 77 % (10 training sets; the goal
        is 90 %): with so few runs the band spans the largest out-of-fold error, and one
        optimistic error narrows it most. It costs one more fit per fold (9 runs: 1.5
        -> 12 CPU s), so ``fit`` nests below ``AUTO_NESTED_BELOW`` runs only.

    ``fit(X, y, groups=None)``: with ``groups`` (one label per row, e.g. the run each
    row of per-sample data comes from), the cross-validation keeps each group's rows
    in one fold (see :func:`cv_splits`), and ``loo_below`` and ``small_ratio`` count
    groups, the independent units, instead of rows.

    On small data with every target > 0, predictions are kept within the training
    targets' range widened by its own width on each side, on the log scale
    (``bounds_``; see :func:`plausible_range`): a guard against one member's runaway
    extrapolation, not a fit. On a development system with numeric options and 9 runs,
    main-effect ridge on log y was off by 7200 % on average over the other
    configurations, and the weighted average by 835 %; the guard changed 3 of 402 dev
    training sets, that one among them, and made none worse (bench/learn.md, session 32).

    Attributes
    ----------
    best_estimator_, best_family_, best_params_, best_log_target_, best_score_,
    cv_results_ (list of dicts: candidate, family, params, log_target, score),
    left_out_ (candidates not tried because the input is wider than ``AUTO_MAX_WIDTH``),
    raw_set_aside_ (True when raw-target candidates were tried and set aside, see ``log_target``),
    bounds_ ((low, high) the predictions are kept within, or None),
    scoring_, n_features_in_.
    """

    def __init__(self, families=None, cv=5, loo_below=0, scoring="auto", log_target="auto", ensemble=1,
                 blend=0.0, blend_max=5, small_ratio=0.0, point="median", weights="near-ties", combine="auto",
                 random_state=0, n_jobs=1, nested_below=0):
        self.families = families
        self.cv = cv
        self.loo_below = loo_below
        self.scoring = scoring
        self.log_target = log_target
        self.ensemble = ensemble
        self.blend = blend
        self.blend_max = blend_max
        self.small_ratio = small_ratio
        self.point = point
        self.weights = weights
        self.combine = combine
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.nested_below = nested_below

    def candidates(self, n_samples: int, n_features: int, positive: bool,
                   max_width: float = AUTO_MAX_WIDTH) -> list[Candidate]:
        # a family named twice is one candidate, not two averaged at twice its weight
        families = tuple(dict.fromkeys(self.families)) if self.families is not None else AUTO_FAMILIES
        for f in families:
            if f not in FAMILIES:
                raise ValueError(f"unknown model family {f!r} (families: {', '.join(FAMILIES)})")
        small = self.small_data(n_samples, n_features)
        if small:
            if self.families is None:
                families = SMALL_FAMILIES
            else:
                families = tuple(f for f in families if f in SMALL_FAMILIES) or families
        if self.log_target == "auto":
            # small data: the log target only (see small_ratio)
            logs = ((True,) if small else (False, True)) if positive else (False,)
        elif self.log_target:
            logs = (True,)
        else:
            logs = (False,)
        return [Candidate(f, params, lg) for f in families for params in grid(f, n_samples, n_features, small, max_width)
                for lg in logs]

    def small_data(self, n_samples: int, n_features: int) -> bool:
        """True when the small-data rule applies: at most ``small_ratio`` runs per feature."""
        return float(self.small_ratio) > 0 and n_samples <= float(self.small_ratio) * max(1, n_features)

    def fit(self, X, y, groups=None):
        X, y = validate_data(self, X, y, y_numeric=True)
        y = np.asarray(y, dtype=float)
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"AutoRegressor needs at least 2 samples, got {n} sample")
        if groups is not None:
            groups = np.asarray(groups)
            if len(groups) != n:
                raise ValueError(f"groups has {len(groups)} labels for {n} samples")
            if n_groups(groups) == n:
                groups = None  # one row per group: plain cross-validation
        if self.scoring not in ("auto", "mre", "rmse"):
            raise ValueError(f"scoring must be auto, mre or rmse, got {self.scoring!r}")
        positive = bool(np.all(y > 0))
        if self.log_target is True and not positive:
            raise ValueError("log_target needs every target value > 0")
        self.scoring_ = ("mre" if positive else "rmse") if self.scoring == "auto" else self.scoring
        units = n if groups is None else n_groups(groups)  # independent units: rows, or groups (runs)
        cands = self.candidates(units, X.shape[1], positive)
        # said, not silent: the candidates left out because the input is wider than AUTO_MAX_WIDTH
        tried = {c.label() for c in cands}
        self.left_out_ = [c.label() for c in self.candidates(units, X.shape[1], positive, max_width=np.inf)
                          if c.label() not in tried]
        if not cands:
            why = (f" ({', '.join(self.left_out_)} left out: the input is {X.shape[1]} columns wide, above "
                   f"{AUTO_MAX_WIDTH})") if self.left_out_ else ""
            raise ValueError(f"no candidate models for this data{why}")
        splits = cv_splits(X, self.cv, groups=groups, loo_below=self.loo_below, random_state=self.random_state)
        self.n_splits_ = len(splits)
        self.grouped_ = groups is not None
        self.small_data_ = self.small_data(units, X.shape[1])
        if self.point not in POINTS:
            raise ValueError(f"point must be one of {', '.join(POINTS)}, got {self.point!r}")
        relative = self.point == "relative" or (self.point == "auto" and self.small_data_ and self.scoring_ == "mre")
        self.point_ = "relative" if relative else "median"
        if self.combine not in COMBINES:
            raise ValueError(f"combine must be one of {', '.join(COMBINES)}, got {self.combine!r}")
        if self.weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        inverse = self.weights == "inverse" or (self.weights == "auto" and self.small_data_)
        self.weights_ = "inverse" if inverse else "near-ties"
        results = []
        oof_all = []
        spreads = []
        for cand in cands:
            oof = np.empty(n)
            rel = relative and cand.log_target
            mu_oof, sd_oof = np.empty(n), np.full(n, np.nan)
            ok = True
            for tr, te in splits:
                est = build(cand.family, _cv_params(cand), log_target=cand.log_target, random_state=self.random_state,
                            n_jobs=self.n_jobs)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        est.fit(X[tr], y[tr])
                        if rel:
                            mu_oof[te], sd = log_dist(est, X[te])
                            if sd is not None:
                                sd_oof[te] = sd
                        else:
                            oof[te] = est.predict(X[te])
                except (ValueError, np.linalg.LinAlgError, FloatingPointError):
                    ok = False
                    break
            spread = None
            if rel and ok:
                if np.isnan(sd_oof).any():  # no predictive sd of its own: the spread of its out-of-fold log errors
                    spread = float(np.sqrt(np.mean((mu_oof - np.log(y)) ** 2)))
                    sd_oof[:] = spread
                with np.errstate(over="ignore", invalid="ignore"):
                    oof = np.exp(mu_oof - sd_oof**2)
            spreads.append(spread)
            score = _score(self.scoring_, y, oof) if ok and np.all(np.isfinite(oof)) else np.inf
            results.append({"candidate": cand.label(), "family": cand.family, "params": cand.params,
                            "log_target": cand.log_target, "score": float(score)})
            oof_all.append(oof)
        scores = np.array([r["score"] for r in results])
        self.raw_set_aside_ = self._raw_set_aside(scores, oof_all, y, cands)
        if self.raw_set_aside_:
            scores = np.where([c.log_target for c in cands], scores, np.inf)
        best = int(np.argmin(scores))
        if not np.isfinite(scores[best]):
            raise ValueError("every candidate model failed in cross-validation")
        oof_all = np.array(oof_all)
        weights = self._weights(scores, oof_all, y, inverse)
        geometric = self._geometric(inverse)
        # the out-of-fold prediction each run would get had the choice of members and weights not
        # seen it (chosen again on the other folds): the ensemble's own oof is optimistic, the more so
        # on small data (it chose the candidates that erred least there); the prediction band is
        # calibrated on these (perflearn.learn.uncertainty.band_calibration)
        self.honest_oof_ = np.full(n, np.nan)
        for tr, te in splits:
            sub = np.array([_score(self.scoring_, y[tr], o[tr]) if np.isfinite(sc) else np.inf
                            for o, sc in zip(oof_all, scores)])
            if np.isfinite(sub).any():
                w = self._weights(sub, oof_all[:, tr], y[tr], inverse)
                m = np.flatnonzero(w > 0)
                self.honest_oof_[te] = average(oof_all[m][:, te], w[m], geometric=geometric)
        self.nested_ = bool(self.small_data_ and units < int(self.nested_below)) and self._nest(X, y, groups, splits)
        cand = cands[best]
        self.cv_results_ = results
        self.best_family_ = cand.family
        self.best_params_ = dict(cand.params)
        self.best_log_target_ = cand.log_target
        self.best_score_ = results[best]["score"]
        members = np.flatnonzero(weights > 0)
        self.combine_ = "geometric" if geometric else "arithmetic"
        self.oof_predictions_ = average(oof_all[members], weights[members], geometric=geometric)
        self.ensemble_score_ = float(_score(self.scoring_, y, self.oof_predictions_))
        fitted = []
        for i in members:
            c = cands[i]
            est = build(c.family, c.params, log_target=c.log_target, random_state=self.random_state, n_jobs=self.n_jobs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
            fitted.append(_RelativePoint(est, spreads[i]) if relative and c.log_target else est)
        self.members_ = [(cands[i].label(), float(weights[i])) for i in members]
        self.bounds_ = plausible_range(y) if self.small_data_ and positive else None
        if len(fitted) == 1 and self.bounds_ is None:
            self.best_estimator_ = fitted[0]
        else:
            self.best_estimator_ = _Averaged(fitted, weights[members], geometric=geometric, bounds=self.bounds_)
        return self

    def _nest(self, X, y, groups, splits) -> bool:
        """``honest_oof_`` from the whole procedure refitted without each fold (see
        ``nested_below``); False, keeping the cheaper one, when a refit fails."""
        nested = np.full(len(y), np.nan)
        for tr, te in splits:
            inner = clone(self).set_params(nested_below=0)
            try:
                inner.fit(X[tr], y[tr], groups=None if groups is None else groups[tr])
                nested[te] = inner.predict(X[te])
            except ValueError:  # every candidate failed on the smaller set: keep the other estimate
                return False
        self.honest_oof_ = nested
        return True

    def _geometric(self, inverse: bool) -> bool:
        """Near-ties of a relative error (MRE) are averaged geometrically: see ``combine``."""
        return not inverse and float(self.blend) > 0 and self.scoring_ == "mre" and self.combine == "auto"

    def _weights(self, scores: np.ndarray, oof: np.ndarray, y: np.ndarray, inverse: bool) -> np.ndarray:
        """Each candidate's weight in the prediction, from its CV ``scores`` (out-of-fold
        predictions ``oof`` of ``y`` for the greedy ensemble)."""
        best = int(np.argmin(scores))
        weights = np.zeros(len(scores))
        weights[best] = 1.0
        if inverse:
            ok = np.isfinite(scores)
            exact = ok & (scores <= 0)
            weights[:] = 0.0
            if exact.any():  # a perfect CV score: those candidates alone
                weights[exact] = 1.0
            else:
                weights[ok] = 1.0 / scores[ok] ** 2
            weights /= weights.sum()
        elif float(self.blend) > 0:
            close = np.flatnonzero(scores <= scores[best] * (1.0 + float(self.blend)))
            close = close[np.argsort(scores[close], kind="stable")][: max(1, int(self.blend_max))]
            weights[:] = 0.0
            weights[close] = 1.0 / len(close)
        elif int(self.ensemble) > 1:
            weights = self._greedy_ensemble(oof, scores, y, int(self.ensemble))
        return weights

    def _raw_set_aside(self, scores: np.ndarray, oof: list, y: np.ndarray, cands: list) -> bool:
        """Whether the raw-target candidates are set aside: when candidates are scored by
        relative error and both kinds were tried, unless the best raw-target candidate's
        relative errors are below the best log-target one's by 2 standard errors, paired
        per training run. See the class docstring, ``log_target``."""
        if self.scoring_ != "mre" or self.small_data_ or len(y) < 3:
            return False
        logs = np.array([c.log_target for c in cands])
        if not (logs.any() and (~logs).any()):
            return False
        best_log = np.flatnonzero(logs)[np.argmin(scores[logs])]
        best_raw = np.flatnonzero(~logs)[np.argmin(scores[~logs])]
        if not np.isfinite(scores[best_log]):
            return False
        if not np.isfinite(scores[best_raw]):
            return True
        d = (np.abs(oof[best_raw] - y) - np.abs(oof[best_log] - y)) / y
        return not d.mean() + 2 * d.std(ddof=1) / np.sqrt(len(d)) < 0

    def _greedy_ensemble(self, oof: np.ndarray, scores: np.ndarray, y: np.ndarray, rounds: int) -> np.ndarray:
        ok = np.isfinite(scores)
        counts = np.zeros(len(scores))
        current = np.zeros(len(y))
        for r in range(rounds):
            best_i, best_s = -1, np.inf
            for i in np.flatnonzero(ok):
                s = _score(self.scoring_, y, (current * r + oof[i]) / (r + 1))
                if s < best_s - 1e-12:
                    best_i, best_s = i, s
            counts[best_i] += 1
            current = (current * r + oof[best_i]) / (r + 1)
        return counts / counts.sum()

    def predict(self, X):
        check_is_fitted(self, "best_estimator_")
        X = validate_data(self, X, reset=False)
        return self.best_estimator_.predict(X)


class _Averaged:
    """Weighted mean of fitted regressors (the members of an ensemble). ``geometric``: the
    weighted mean of their logarithms, at every point where all members predict > 0 (the
    arithmetic mean elsewhere). ``bounds``: (low, high) the mean is kept within."""

    def __init__(self, members, weights, geometric=False, bounds=None):
        self.members = list(members)
        self.weights = np.asarray(weights, dtype=float)
        self.geometric = geometric
        self.bounds = bounds

    def predict(self, X):
        P = np.array([m.predict(X) for m in self.members])
        out = average(P, self.weights, geometric=getattr(self, "geometric", False))  # saved before session 13: arithmetic
        bounds = getattr(self, "bounds", None)  # saved before session 32: none
        return out if bounds is None else np.clip(out, *bounds)


def plausible_range(y: np.ndarray) -> tuple[float, float]:
    """The range of positive targets ``y`` widened by its own width on each side, on the
    log scale: (min^2 / max, max^2 / min). A configuration outside it would have to be
    further from every measured one than the measured ones are from each other. With
    n runs, the next one lies beyond their range with probability 2 / (n + 1), and far
    beyond it rarely; a log-linear member extrapolating in a numeric option can land
    orders of magnitude out."""
    lo, hi = float(np.log(np.min(y))), float(np.log(np.max(y)))
    return float(np.exp(2 * lo - hi)), float(np.exp(2 * hi - lo))


def average(P: np.ndarray, weights: np.ndarray, *, geometric: bool = False) -> np.ndarray:
    """Weighted mean over the rows of P (members x points); geometric where every member is > 0."""
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    out = w @ P
    if geometric:
        pos = np.all(P > 0, axis=0)
        out[pos] = np.exp(w @ np.log(P[:, pos]))
    return out


def make_pipeline(schema, estimator) -> Pipeline:
    """Preprocessing (one-hot for categorical knobs, unseen categories an error) + estimator."""
    cats = schema.categorical
    nums = schema.numeric
    transformers = []
    if cats:
        transformers.append(
            (
                "onehot",
                OneHotEncoder(categories=[schema.categories[c] for c in cats], handle_unknown="error", sparse_output=False),
                cats,
            )
        )
    if nums:
        transformers.append(("num", GapScaler(), nums))
    prep = ColumnTransformer(transformers, verbose_feature_names_out=False)
    return Pipeline([("prep", prep), ("model", estimator)])


def model_for(family: str, *, params=None, log_target: bool | str = "auto", cv: int = 5, random_state=0, n_jobs=1,
              families=None, scoring="auto", ensemble=1, loo_below=0, blend=0.0, small_ratio=0.0, point="median",
              weights="near-ties", nested_below=0):
    """The estimator (before preprocessing) for a family name or ``auto``."""
    if family == "auto":
        return AutoRegressor(families=families, cv=cv, loo_below=loo_below, scoring=scoring, log_target=log_target,
                             ensemble=ensemble, blend=blend, small_ratio=small_ratio, point=point, weights=weights,
                             random_state=random_state, n_jobs=n_jobs, nested_below=nested_below)
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r} (families: {', '.join(FAMILIES)}, auto)")
    return build(family, params, log_target=bool(log_target is True), random_state=random_state, n_jobs=n_jobs)
