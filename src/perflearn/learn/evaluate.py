"""How good is a model: k-fold and repeated random splits, OOB, learning curves, figures.

Every split fits the whole procedure again on its training part (``auto``
included: its choice of family is nested inside the split), so the error is
that of the procedure on unseen runs.

Per-sample data (``--per-sample``: several rows per run) is split by run: every
split keeps all rows of a run on one side (GroupKFold / GroupShuffleSplit), and
``auto``'s own choice inside a split does the same, because the intervals of one
run are alike and splitting them would score the model on near-copies of its
training rows (optimistic). For the same reason the repeats of a configuration (and
all samples of its runs) stay on one side: the error is that on configurations the
model has not seen.

Learning curves follow Kunkel et al.: the *inverse* k-fold trains on one fold and
tests on the other k-1, so the training size is n/k; the fraction curve (Heimdall)
trains on a random fraction and tests on the rest.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, GroupShuffleSplit, KFold, ShuffleSplit

from perflearn.errors import UsageError

from .features import TrainingData
from .metrics import METRICS, QUANTILE_METRICS, all_metrics
from .models import (FAMILIES, KNN_NEIGHBORS, AutoRegressor, check_families, check_params, make_pipeline, model_for,
                     quantile_leaf, resolve_log_target)
from .uncertainty import band_calibration


def _pipeline(data: TrainingData, family: str, params=None, log_target: bool | str = "auto", cv: int = 5,
              random_state=0, n_jobs: int = 1, families=None):
    log_target = resolve_log_target(log_target, data.y, data.schema.target, family)
    from .models import AUTO_BLEND, AUTO_ENSEMBLE, AUTO_LOO_BELOW, AUTO_POINT, AUTO_SMALL_RATIO, AUTO_WEIGHTS

    est = model_for(family, params=params, log_target=log_target, cv=cv, random_state=random_state, n_jobs=n_jobs,
                    families=families, ensemble=AUTO_ENSEMBLE, loo_below=AUTO_LOO_BELOW, blend=AUTO_BLEND,
                    small_ratio=AUTO_SMALL_RATIO, point=AUTO_POINT, weights=AUTO_WEIGHTS)
    return make_pipeline(data.schema, est)


def run_groups(data: TrainingData) -> np.ndarray | None:
    """What cross-validation keeps on one side of a split, per row: the configuration
    when one has several rows (repeats, or the samples of its runs), else the run when
    one has several rows (per-sample data), else None (every row its own).

    A repeat of a configuration in the training part scores the model on a near-copy of
    a row it has seen: leave-one-run-out over 12 configurations x 2 repeats gave 30.2 %
    MRE where leaving each configuration out gave 33.1 % (session 45)."""
    rows = getattr(data, "rows", None)
    columns = getattr(rows, "columns", ())
    ids = None
    for unit in ("point_id", "run_id"):
        if unit in columns:
            ids = rows[unit].to_numpy()
            if len(ids) == len(data.y) and len(pd.unique(ids)) < len(ids):
                break
    else:
        ids = np.arange(len(data.y))
    groups = _with_equal_features(ids, data.X)
    return groups if len(pd.unique(groups)) < len(groups) else None


def _with_equal_features(ids: np.ndarray, X: pd.DataFrame) -> np.ndarray:
    """``ids`` merged where rows have equal features: configurations that differ only in
    knobs the model was not given are one configuration to it, and one on each side of a
    split scored a repeat (a fit on 3 of Apache's 8 options: 9.8 % MRE, against 23.6 % from
    a CSV of those 3 columns, session 46's review)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    id_codes, id_count = pd.factorize(ids)[0], len(pd.unique(ids))
    x_codes = pd.factorize(pd.util.hash_pandas_object(X.reset_index(drop=True), index=False))[0]
    # a bipartite graph: ids on one side, feature rows on the other, an edge per row
    edges = coo_matrix((np.ones(len(ids)), (id_codes, id_count + x_codes)),
                       shape=(id_count + x_codes.max() + 1,) * 2)
    _, labels = connected_components(edges, directed=False)
    return labels[id_codes]


def group_unit(data: TrainingData) -> str:
    """What one group of :func:`run_groups` is, for messages: "run" (the samples of one
    run), "configuration" (its repeats, or the runs of one configuration), or with context
    features "configuration-context pair" (a group holds one configuration at one load: its
    runs at other loads are in the training folds, which "configuration" hid; session 61's
    audit read "59 configurations" of 7)."""
    rows = getattr(data, "rows", None)
    groups = run_groups(data)
    runs = len(pd.unique(rows["run_id"])) if rows is not None and "run_id" in rows.columns else len(data.y)
    if groups is None or len(pd.unique(groups)) >= runs:
        return "run"
    return "configuration-context pair" if data.schema.context else "configuration"


def fit_params(pipe, groups) -> dict[str, Any]:
    """Fit parameters routing the training rows' groups to ``auto`` (its inner CV then splits by run)."""
    if groups is not None and isinstance(pipe.named_steps["model"], AutoRegressor):
        return {"model__groups": groups}
    return {}


def _fit_predict(pipe, X_tr, y_tr, X_te, groups=None, *, family: str = "auto", params=None):
    check_neighbors(family, params, len(y_tr), "runs a split trains on")
    units = len(y_tr) if groups is None else len(pd.unique(groups))
    if family == "auto" and units < 2:  # it said "--family: ... AutoRegressor needs at least 2 samples"
        raise UsageError(f"a split trains on {units} {'run' if groups is None else 'configuration'}; auto chooses by "
                         "cross-validation, which needs 2 or more: more folds (-k), or --family", where="--folds")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe.fit(X_tr, y_tr, **fit_params(pipe, groups))
            return np.asarray(pipe.predict(X_te), dtype=float)
    except ValueError as exc:  # a bad --param value (scikit-learn's reason), as fit says it
        raise UsageError(f"cannot fit {family}: {str(exc).splitlines()[0]}",
                         where="--param" if params else "--family") from None


def check_neighbors(family: str, params, n_train: int, what: str) -> None:
    """knn cannot ask for more neighbours than the ``n_train`` training rows (``what``: of the data, of a
    split); scikit-learn says so only when predicting, and without saying where."""
    k = (params or {}).get("n_neighbors", KNN_NEIGHBORS)
    if family == "knn" and isinstance(k, int) and k > n_train:
        raise UsageError(f"knn's n_neighbors={k} exceeds the {n_train} {what}; "
                         f"use --param n_neighbors={max(1, n_train)} or fewer", where="--param")


def check_family(family: str, params=None, families=None) -> None:
    """--family, --param and --families, each refused in one line naming it."""
    if family != "auto" and family not in FAMILIES:
        raise UsageError(f"unknown model family {family!r} (families: {', '.join(FAMILIES)}, auto)", where="--family")
    try:
        check_params(family, params)
    except ValueError as exc:
        raise UsageError(str(exc), where="--param") from None
    try:
        check_families(family, families)
    except ValueError as exc:
        raise UsageError(str(exc), where="--families") from None


def _inner_cv(n_train: int, cv: int) -> int:
    return max(2, min(cv, n_train))


@dataclass
class EvalResult:
    """Per-split scores and the pooled out-of-sample predictions of one evaluation."""

    family: str
    scheme: str
    splits: pd.DataFrame  # one row per split: split, n_train, n_test, mre, mape, rmse, r2 (and coverage, pinball)
    y_true: np.ndarray  # pooled test targets (first repeat of k-fold: every run once; every random split)
    y_pred: np.ndarray
    split_of: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int))  # the split of each pooled value
    row_of: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int))  # its row of the training data
    oob: dict[str, float] = field(default_factory=dict)
    chosen: list[str] = field(default_factory=list)  # auto: family chosen in each split
    n_runs: int = 0  # the groups the splits keep together (runs or configurations; 0: every row its own)
    unit: str = "run"  # what a group is (group_unit)

    @property
    def grouped(self) -> bool:
        """True when the splits keep groups of rows together (run_groups)."""
        return self.n_runs > 0

    def summary(self) -> dict[str, dict[str, float]]:
        # MAPE is NaN on a split with a zero target (undefined): so is its mean, rather than the mean of the others
        return {m: {"mean": float(self.splits[m].mean(skipna=m != "mape")),
                    "std": float(self.splits[m].std(ddof=1, skipna=m != "mape")) if len(self.splits) > 1 else float("nan")}
                for m in [*METRICS, *(q for q in QUANTILE_METRICS if q in self.splits)]}


def evaluate(
    data: TrainingData,
    family: str = "auto",
    *,
    scheme: str = "kfold",
    folds: int = 5,
    repeats: int = 1,
    test_size: float = 0.25,
    params=None,
    log_target: bool | str = "auto",
    cv: int = 5,
    random_state: int = 0,
    n_jobs: int = 1,
    families=None,
    by_run: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    where: str | None = None,
) -> EvalResult:
    """Score ``family`` by k-fold (``repeats`` times) or ``repeats`` random train/test splits.

    With ``by_run`` and per-sample data (several rows per run, :func:`run_groups`),
    folds and test sets are made of whole runs, and ``folds`` counts runs.
    ``progress(done, total, chosen)`` is told after each split (``chosen``: auto's pick). ``where``
    names the data in an error (the CSV file, the experiment), as fit's do."""
    check_family(family, params, families)
    resolve_log_target(log_target, data.y, where or data.schema.target)
    quantile = (params or {}).get("quantile")
    if repeats < 1:  # max(1, repeats) below would run once and the title say "x0"
        raise UsageError(f"repeats must be at least 1, got {repeats}", where="--repeats")
    n = len(data.y)
    params = quantile_leaf(family, params, n)  # as fit's, so that the pooled figures are its CV's
    X, y = data.X, data.y
    groups = run_groups(data) if by_run else None
    units = n if groups is None else len(pd.unique(groups))
    unit = group_unit(data)
    what = "usable runs" if groups is None else f"{unit}s (folds are by {unit})"
    if scheme == "kfold":
        if folds < 2:
            raise UsageError(f"k-fold needs at least 2 folds, got {folds}", where="--folds")
        if units < folds:  # with 1, no --folds helps: 2 is the least
            advice = f"lower --folds to {units} or fewer" if units >= 2 else "cross-validation needs at least 2"
            raise UsageError(f"{units} {what} are fewer than the {folds} folds; {advice}", where=where or data.schema.target)
        if groups is None:
            splitters = [KFold(folds, shuffle=True, random_state=random_state + r) for r in range(max(1, repeats))]
        else:
            splitters = [GroupKFold(folds, shuffle=True, random_state=random_state + r) for r in range(max(1, repeats))]
    elif scheme == "random":
        if not 0 < test_size < 1:
            raise UsageError(f"test size must be a fraction in (0, 1), got {test_size}", where="--test-size")
        n_test = int(np.ceil(test_size * units))
        if n_test < 1 or units - n_test < 2:
            raise UsageError(f"{units} {what} are too few for a {test_size:g} test split",
                              where=where or data.schema.target)
        if groups is None:
            splitters = [ShuffleSplit(max(1, repeats), test_size=test_size, random_state=random_state)]
        else:
            splitters = [GroupShuffleSplit(max(1, repeats), test_size=test_size, random_state=random_state)]
    else:
        raise UsageError(f"unknown scheme {scheme!r} (kfold, random)", where="--scheme")
    rows = []
    pooled_true, pooled_pred, pooled_split, pooled_row = [], [], [], []
    chosen = []
    split_no = 0
    total = sum(s.get_n_splits(X, groups=groups) for s in splitters)
    for r, splitter in enumerate(splitters):
        for tr, te in splitter.split(X, groups=groups):
            g_tr = None if groups is None else groups[tr]
            inner = _inner_cv(len(tr) if g_tr is None else len(pd.unique(g_tr)), cv)
            pipe = _pipeline(data, family, params, log_target, inner, random_state, n_jobs, families)
            pred = _fit_predict(pipe, X.iloc[tr], y[tr], X.iloc[te], g_tr, family=family, params=params)
            model = pipe.named_steps["model"]
            if isinstance(model, AutoRegressor):
                chosen.append(model.best_family_ + (" log" if model.best_log_target_ else ""))
            scores = all_metrics(y[te], pred, quantile)
            rows.append({"split": split_no, "repeat": r, "n_train": len(tr), "n_test": len(te), **scores})
            if r == 0:
                pooled_split.append(np.full(len(te), split_no))
                pooled_row.append(np.asarray(te))
            split_no += 1
            if progress is not None:
                progress(split_no, total, chosen[-1] if isinstance(model, AutoRegressor) else family)
            if r == 0:
                pooled_true.append(y[te])
                pooled_pred.append(pred)
    oob = {}
    # a quantile forest's point is not the mean the OOB score judges; and where a configuration has
    # several rows, its others are in the very trees that leave one out: 0.89 R² beside a grouped CV's 0.27
    # and trees without a bootstrap (--param bootstrap=False) leave no run out of any tree
    if family == "rf" and n >= 5 and quantile is None and groups is None and (params or {}).get("bootstrap", True):
        oob = oob_score(data, params=params, log_target=log_target, random_state=random_state, n_jobs=n_jobs)
    return EvalResult(
        family=family,
        scheme=scheme,
        splits=pd.DataFrame(rows),
        y_true=np.concatenate(pooled_true),
        y_pred=np.concatenate(pooled_pred),
        split_of=np.concatenate(pooled_split),
        row_of=np.concatenate(pooled_row),
        oob=oob,
        chosen=chosen,
        n_runs=0 if groups is None else units,
        unit=unit,
    )


def oob_score(data: TrainingData, params=None, log_target: bool | str = "auto", random_state=0, n_jobs=1) -> dict[str, float]:
    """Out-of-bag R² and MRE of a random forest over all of ``data`` (NiMC)."""
    p = dict(params or {})
    p["oob_score"] = True
    p.setdefault("n_estimators", 100)
    pipe = _pipeline(data, "rf", p, log_target, 5, random_state, n_jobs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(data.X, data.y)
    est = pipe.named_steps["model"]
    targets = []  # the target transforms around the forest (a log, the trees' scale), outermost first
    while hasattr(est, "regressor_"):
        targets.append(est)
        est = est.regressor_
    oob_pred = np.asarray(est.oob_prediction_, dtype=float).ravel()
    for ttr in reversed(targets):
        oob_pred = ttr.transformer_.inverse_transform(oob_pred.reshape(-1, 1)).ravel()
    ok = np.isfinite(oob_pred)
    return {"r2": METRICS["r2"](data.y[ok], oob_pred[ok]), "mre": METRICS["mre"](data.y[ok], oob_pred[ok])}


def cross_validate_pipeline(data: TrainingData, family: str, *, params=None, log_target=False, folds=5,
                            random_state=0, n_jobs=1) -> dict[str, Any]:
    """Pooled out-of-fold metrics of one fixed family (stored in a model artifact); by run for per-sample data."""
    groups = run_groups(data)
    units = len(data.y) if groups is None else len(pd.unique(groups))
    res = evaluate(data, family, scheme="kfold", folds=max(2, min(folds, units)), params=params,
                   log_target=log_target, random_state=random_state, n_jobs=n_jobs)
    quantile = (params or {}).get("quantile")
    out: dict[str, Any] = {"folds": int(res.splits.shape[0]), **all_metrics(res.y_true, res.y_pred, quantile),
                           "band": band_calibration(res.y_true, res.y_pred, quantile,
                                                    units=res.n_runs if res.grouped else None)}
    if res.grouped:
        out["folds_by"] = res.unit
        out["units"] = res.n_runs  # how many of folds_by (configurations, when runs repeat one): it read "runs"
    if res.oob:
        out["oob"] = res.oob
    return out


def learning_curve(
    data: TrainingData,
    family: str = "auto",
    *,
    ks: list[int] | None = None,
    fractions: list[float] | None = None,
    repeats: int = 3,
    params=None,
    log_target: bool | str = "auto",
    cv: int = 5,
    random_state: int = 0,
    n_jobs: int = 1,
    families=None,
    by_run: bool = True,
    progress=None,
) -> pd.DataFrame:
    """Error by training size (per-sample data with ``by_run``: folds and sizes count whole runs).

    With ``ks`` (default 2..10, capped by the data): inverse k-fold, train on one
    fold, test on the other k-1, every fold in turn. With ``fractions``: ``repeats``
    random splits training on that fraction. One row per size: ``mode, k/fraction,
    n_train, mre_mean, mre_std, r2_mean, r2_std, rmse_mean``. ``progress(done, total,
    size)`` is told as each size ends (with ``auto``, each is many fits: a curve ran 29
    minutes without a word).
    """
    check_family(family, params, families)
    X, y = data.X, data.y
    groups = run_groups(data) if by_run else None
    n = len(y) if groups is None else len(pd.unique(groups))  # units: rows, or runs
    units = "runs" if groups is None else f"{group_unit(data)}s"  # 37 runs of 14 configurations read "14 runs"

    def inner_cv(tr):
        return _inner_cv(len(tr) if groups is None else len(pd.unique(groups[tr])), cv)

    def g(idx):
        return None if groups is None else groups[idx]

    rows = []
    if fractions is None:
        if ks is None:
            ks = [k for k in range(2, 11) if n // k >= 3]
            if not ks:  # else an empty curve
                raise UsageError(f"{n} {units} are too few for an inverse k-fold learning curve (it needs 6: 3 per fold)",
                                 where="--curve inverse-kfold")
        for k in ks:
            if k < 2 or n // k < 2:
                raise UsageError(f"inverse {k}-fold leaves fewer than 2 training {units} of {n}", where="ks")
            scores = []
            sizes = []
            for rep in range(max(1, repeats) if k > 2 else 1):
                splitter = (KFold(k, shuffle=True, random_state=random_state + rep) if groups is None
                            else GroupKFold(k, shuffle=True, random_state=random_state + rep))
                for te, tr in splitter.split(X, groups=groups):  # swapped: train on 1 fold
                    pipe = _pipeline(data, family, params, log_target, inner_cv(tr), random_state, n_jobs, families)
                    pred = _fit_predict(pipe, X.iloc[tr], y[tr], X.iloc[te], g(tr), family=family, params=params)
                    scores.append(all_metrics(y[te], pred))
                    sizes.append(len(tr))
            rows.append(_curve_row("inverse-kfold", k, sizes, scores))
            if progress is not None:
                progress(len(rows), len(ks), f"k = {k}")
    else:
        for f in fractions:
            # where: the CLI has no --fractions; `--curve fraction` trains on 10..90%
            if not 0 < f < 1:
                raise UsageError(f"training fraction must be in (0, 1), got {f}", where="--curve fraction")
            n_train = int(round(f * n))
            if n_train < 2 or n - n_train < 1:
                raise UsageError(f"{n} {units} are too few for this learning curve: training on {f:.0%} of them leaves "
                                 f"{n_train} to train on and {n - n_train} to test on (need 2 and 1)",
                                 where="--curve fraction")
            scores, sizes = [], []
            splitter = (ShuffleSplit(max(1, repeats), train_size=n_train, test_size=n - n_train, random_state=random_state)
                        if groups is None else
                        GroupShuffleSplit(max(1, repeats), train_size=n_train, test_size=n - n_train,
                                          random_state=random_state))
            for tr, te in splitter.split(X, groups=groups):
                pipe = _pipeline(data, family, params, log_target, inner_cv(tr), random_state, n_jobs, families)
                pred = _fit_predict(pipe, X.iloc[tr], y[tr], X.iloc[te], g(tr), family=family, params=params)
                scores.append(all_metrics(y[te], pred))
                sizes.append(len(tr))
            rows.append(_curve_row("fraction", f, sizes, scores))
            if progress is not None:
                progress(len(rows), len(fractions), f"{f:.0%}")
    return pd.DataFrame(rows)


def _curve_row(mode, size, sizes, scores):
    s = pd.DataFrame(scores)
    return {
        "mode": mode,
        "size": size,
        "n_train": float(np.mean(sizes)),
        "mre_mean": float(s["mre"].mean()),
        "mre_std": float(s["mre"].std(ddof=1)) if len(s) > 1 else 0.0,
        "r2_mean": float(s["r2"].mean()),
        "r2_std": float(s["r2"].std(ddof=1)) if len(s) > 1 else 0.0,
        "rmse_mean": float(s["rmse"].mean()),
    }


# -- figures ----------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _few_ticks(ax) -> None:
    """At most five ticks a measured axis: 10000 .. 80000 in eight ticks ran together on a 5-inch figure."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.yaxis.set_major_locator(MaxNLocator(5))


def plot_pred_vs_actual(y_true, y_pred, path: str | Path, title: str = "") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(y_true, y_pred, s=12, alpha=0.7)
    lo = float(min(np.min(y_true), np.min(y_pred)))
    hi = float(max(np.max(y_true), np.max(y_pred)))
    ax.plot([lo, hi], [lo, hi], color="k", lw=1)
    _few_ticks(ax)
    ax.set_xlabel("measured")
    ax.set_ylabel("predicted (out of sample)")
    ax.set_title(title or "predicted vs measured")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def residuals(y_true, y_pred) -> tuple[np.ndarray, str]:
    """Each prediction's error and its axis label: relative (%), or, where a measured value
    is 0 (no relative error), predicted - measured for every run (the runs at 0 were left
    out of the figure, unsaid)."""
    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    if (y_true == 0).any():
        return y_pred - y_true, f"predicted - measured ({int((y_true == 0).sum())} measured 0)"
    return (y_pred - y_true) / y_true * 100, "relative error of prediction (%)"


def plot_residuals(y_true, y_pred, path: str | Path, title: str = "") -> Path:
    plt = _plt()
    values, label = residuals(y_true, y_pred)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(np.asarray(y_true), values, s=12, alpha=0.7)
    ax.axhline(0, color="k", lw=1)
    _few_ticks(ax)
    ax.set_xlabel("measured")
    ax.set_ylabel(label)
    ax.set_title(title or "residuals")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def plot_learning_curve(curve: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    # a bar of ± one std reached below 0 % (session 57's audit), an error no model makes: cut at 0
    below = np.minimum(curve["mre_std"].to_numpy(dtype=float), curve["mre_mean"].to_numpy(dtype=float))
    ax.errorbar(curve["n_train"], curve["mre_mean"], yerr=[below, curve["mre_std"].to_numpy(dtype=float)],
                marker="o", capsize=3)
    ax.set_xlabel("training runs")
    ax.set_ylabel("MRE (%) on the rest")
    ax.set_title(title or "learning curve")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def html_page(title: str, images: list[Path], tables: list[str], path: str | Path) -> Path:
    """A self-contained HTML page: the PNGs inlined (base64) after the given HTML tables."""
    import base64
    import html

    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style>",
             f"<h1>{html.escape(title)}</h1>", *tables]
    for img in images:
        b64 = base64.b64encode(Path(img).read_bytes()).decode()
        parts.append(f"<figure><img src='data:image/png;base64,{b64}'><figcaption>{html.escape(Path(img).stem)}</figcaption></figure>")
    Path(path).write_text("\n".join(parts) + "\n")
    return Path(path)
