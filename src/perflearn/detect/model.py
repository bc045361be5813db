"""Interference detection: which interference (or none) a window shows, and the slowdown
it causes, with tree ensembles (NiMC), out-of-bag scores and feature importance.

The classifier is a scikit-learn Pipeline — keep the signals that describe the rest of
the node (features.node_signal), impute, drop constant features, keep the features an
extremely randomised forest finds at least median-important (fitted on training folds
only), then an extremely randomised forest with bootstrap (for its out-of-bag score) —
so that cross-validation never sees test data while selecting features. The slowdown
regressor, a random forest, sees every feature: how much a workload slows is its own
matter as much as the interference's.

What was measured on the data set of examples/detect (bench/detect.md has the numbers):
univariate ANOVA selection let heavy-tailed skew/kurtosis of a few ticks take the places
of the signals that matter (macro-F1 0.95 -> 0.63); the workload's raw signals and
unattributed node counts (PSI io/cpu, softirqs, disk and network totals) make an unseen
workload's own I/O look like an injector's; a random forest, gradient boosting
(HistGradientBoosting) and unweighted classes all generalised worse to unseen
workloads than extremely randomised trees with balanced class weights.
"""

from __future__ import annotations

import json
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from perflearn.errors import UsageError

from .features import node_columns, node_signal

HEALTHY = "none"
SMOOTH = 3  # a verdict averages the class probabilities of this many latest windows
MODELS, META = "models.joblib", "detector.json"  # a detector directory's two files


class NodeSignals(TransformerMixin, BaseEstimator):
    """Keep the feature columns (``signal:stat``) whose signal ``keep`` accepts
    (features.node_signal by default); all of them when it accepts none."""

    def __init__(self, keep=None):
        self.keep = keep

    def fit(self, X, y=None):
        if not hasattr(X, "columns"):
            raise TypeError("NodeSignals needs a DataFrame of named features (signal:stat)")
        self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        self.n_features_in_ = len(X.columns)
        self.columns_ = node_columns(X.columns, self.keep or node_signal)
        return self

    def transform(self, X):
        check_is_fitted(self, "columns_")
        return X.reindex(columns=self.columns_)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "columns_")
        return np.asarray(self.columns_, dtype=object)


def classifier(trees: int = 300, seed: int = 0):
    from sklearn.ensemble import ExtraTreesClassifier
    from sklearn.feature_selection import SelectFromModel, VarianceThreshold
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline

    screen = ExtraTreesClassifier(n_estimators=100, class_weight="balanced", n_jobs=2, random_state=seed)
    return Pipeline([
        ("signals", NodeSignals()),
        ("impute", SimpleImputer(strategy="median", keep_empty_features=True)),
        ("variance", VarianceThreshold()),
        ("select", SelectFromModel(screen, threshold="median")),
        ("forest", ExtraTreesClassifier(n_estimators=trees, bootstrap=True, oob_score=True, class_weight="balanced",
                                        n_jobs=2, random_state=seed)),
    ])


def regressor(trees: int = 300, seed: int = 0):
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline

    return Pipeline([
        ("impute", SimpleImputer(strategy="median", keep_empty_features=True)),
        ("forest", RandomForestRegressor(n_estimators=trees, oob_score=True, n_jobs=2, random_state=seed)),
    ])


def _quiet(function):
    """Silence scikit-learn's note that a feature is constant within a training fold:
    VarianceThreshold drops the globally constant ones; the rest carry no harm."""

    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Features .* are constant", category=UserWarning)
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="sklearn")
            warnings.filterwarnings("ignore", message="Some inputs do not have OOB scores", category=UserWarning)
            warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)  # in the report
            return function(*args, **kwargs)

    wrapper.__name__, wrapper.__doc__ = function.__name__, function.__doc__
    return wrapper


@dataclass
class TrainingSet:
    """Windows with their labels: X (features), y (interference kind), the run each
    window came from, the groups to hold out, each run's measured slowdown, and each
    window's place in its run (None: rows of a run are in time order)."""

    X: pd.DataFrame
    y: pd.Series
    run: pd.Series
    groups: dict[str, pd.Series] = field(default_factory=dict)
    slowdown: pd.Series | None = None
    window: pd.Series | None = None


def training_set(windows: pd.DataFrame, runs: pd.DataFrame, label: str, group_columns: list[str],
                 time_metric: str | None, knobs: list[str] | None = None) -> TrainingSet:
    """Join window features to run labels (``runs``: run_id, status, knob columns, metrics).
    ``knobs``: the knob columns of ``runs``, when known (a store knows; an exported file does not)."""
    for column in [label, *group_columns]:
        if column not in runs:
            if knobs is not None:
                raise UsageError(f"no knob {column!r} in the experiment (knobs: {', '.join(knobs) or 'none'})")
            columns = [c for c in runs.columns if c not in ("run_id", "point_id", "rep", "status")]
            raise UsageError(f"no knob {column!r} among the runs' columns ({', '.join(map(str, columns)) or 'none'})")
    joined = windows.merge(runs, on="run_id", how="inner")
    joined = joined[joined["status"] == "ok"]
    if joined.empty:
        raise UsageError("no windows of ok runs to learn from (too few samples per run, or no sampling?)")
    features = [c for c in windows.columns if ":" in c]
    # median imputation then constant-feature removal would leave the classifier nothing
    seen = NodeSignals().fit(joined[features]).transform(joined[features])
    if not (seen.nunique() > 1).any():
        raise UsageError("no sampled signal varies across the windows (every value missing or constant): "
                         "nothing to learn from")
    slowdown = None
    if time_metric:
        if time_metric not in runs:
            raise UsageError(f"no metric {time_metric!r} in the experiment")
        if not pd.api.types.is_numeric_dtype(runs[time_metric]) or pd.api.types.is_bool_dtype(runs[time_metric]):
            example = runs[time_metric].dropna()
            example = f" (e.g. {example.iloc[0]!r})" if len(example) else ""
            raise UsageError(f"--time-metric {time_metric!r} is not a number{example}: give a runtime metric")
        healthy = runs[(runs[label].astype(str) == HEALTHY) & (runs["status"] == "ok")]
        if healthy.empty:
            raise UsageError(f"no healthy ({label} = {HEALTHY!r}) runs to measure slowdown against")
        if group_columns:  # the same workload and input, run without interference
            base = healthy.groupby(group_columns)[time_metric].median().rename("_base")
            joined = joined.join(base, on=group_columns)
        else:
            joined["_base"] = healthy[time_metric].median()
        slowdown = (joined[time_metric] / joined["_base"]).rename("slowdown")
        # a healthy runtime of 0 (or below) gives no ratio: missing, not inf
        slowdown = slowdown.where(np.isfinite(slowdown) & (joined["_base"] > 0))
    return TrainingSet(
        X=joined[features].reset_index(drop=True),
        y=joined[label].astype(str).reset_index(drop=True),
        run=joined["run_id"].reset_index(drop=True),
        groups={c: joined[c].astype(str).reset_index(drop=True) for c in group_columns},
        slowdown=None if slowdown is None else slowdown.reset_index(drop=True),
        window=joined["window"].reset_index(drop=True) if "window" in joined else None,
    )


def rates(y_true, y_pred) -> dict[str, float]:
    """False-alarm rate (healthy called interference) and miss rate (interference called healthy)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    healthy = y_true == HEALTHY
    return {
        "false_alarm": float((y_pred[healthy] != HEALTHY).mean()) if healthy.any() else float("nan"),
        "miss": float((y_pred[~healthy] == HEALTHY).mean()) if (~healthy).any() else float("nan"),
    }


def _macro_f1(y_true, y_pred) -> float:
    """Macro-F1 over the classes that occur in ``y_true``."""
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, labels=sorted(set(y_true)), average="macro", zero_division=0))


def classification_report(y_true, y_pred, labels: list[str]) -> dict:
    from sklearn.metrics import confusion_matrix, f1_score

    per_class = f1_score(y_true, y_pred, labels=labels, average=None, zero_division=0)
    return {
        "macro_f1": float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        "per_class_f1": {c: float(v) for c, v in zip(labels, per_class)},
        **rates(y_true, y_pred),
        "confusion": {"labels": labels, "matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist()},
        "windows": int(len(y_true)),
    }


def smooth_proba(proba: pd.DataFrame, run: pd.Series, window: pd.Series | None = None,
                 windows: int = SMOOTH) -> pd.DataFrame:
    """Each window's class probabilities averaged with those of up to ``windows - 1``
    earlier windows of the same run: the verdict a live watch gives, from the past only."""
    position = np.arange(len(proba))
    when = position if window is None else np.asarray(window)
    order = np.lexsort((when, np.asarray(run)))  # by run, then time
    ordered = pd.DataFrame(proba.to_numpy(dtype=float)[order], columns=proba.columns)
    rolled = ordered.groupby(np.asarray(run)[order], sort=False).rolling(windows, min_periods=1).mean()
    out = np.empty((len(proba), proba.shape[1]))
    out[order] = rolled.reset_index(level=0, drop=True).sort_index().to_numpy()
    return pd.DataFrame(out, index=proba.index, columns=proba.columns)


@_quiet
def evaluate(data: TrainingSet, trees: int = 300, folds: int = 5, seed: int = 0, smooth: int = SMOOTH,
             model=None, progress: Callable[[str], None] | None = None) -> dict:
    """Stratified k-fold (grouped by run: a run's windows never straddle train and test),
    then leave-one-group-out for every group column (unseen workloads, unseen inputs).

    Each evaluation is reported per window and, with ``smooth`` > 1, as ``<name> (N windows)``:
    the verdict averaged over the window and the ``smooth - 1`` before it in the same run,
    as `perflearn detect watch` gives it. A held-out group's own macro-F1 is in ``per_group``.
    ``model``: another classifier (a scikit-learn estimator with predict_proba) to compare.
    ``progress`` is told (one line) as each evaluation starts: on a real data set each
    takes minutes."""
    from sklearn.model_selection import LeaveOneGroupOut, StratifiedGroupKFold, cross_val_predict

    labels = sorted(data.y.unique())
    if len(labels) < 2:  # as fit: a report of one class (macro-F1 1.0) would say nothing
        raise UsageError(f"need at least two classes (healthy and one interference) to evaluate a detector; "
                         f"every window is {labels[0]!r}" if labels else "no windows to evaluate")
    windows = data.y.value_counts()
    if windows.min() < 2 or data.run.nunique() < folds:
        raise UsageError(f"too few runs to evaluate with {folds} folds ({data.run.nunique()} runs)")
    if windows.max() < folds:
        raise UsageError(f"too few windows to evaluate with {folds} folds: at most {windows.max()} a class")
    model = classifier(trees, seed) if model is None else model
    report: dict = {}
    held_out = [name for name, groups in data.groups.items() if groups.nunique() >= 2]
    slowdown = bool(data.slowdown is not None and data.slowdown.notna().any())
    steps = 1 + len(held_out) + slowdown
    done = 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(f"evaluating ({done}/{steps}): {what}, {len(data.y)} windows of {data.run.nunique()} runs")

    def add(name: str, groups: pd.Series, cv, per_group: bool = False) -> None:
        proba = cross_val_predict(model, data.X, data.y, groups=groups, cv=cv, method="predict_proba")
        proba = pd.DataFrame(proba, columns=labels)  # cross_val_predict orders columns as sorted labels
        verdicts = {name: proba.idxmax(axis=1)}
        if smooth > 1:
            verdicts[f"{name} ({smooth} windows)"] = smooth_proba(proba, data.run, data.window, smooth).idxmax(axis=1)
        for key, predicted in verdicts.items():
            report[key] = classification_report(data.y, predicted, labels)
            if per_group:
                report[key]["per_group"] = {str(g): _macro_f1(data.y[groups == g], predicted[groups == g])
                                            for g in sorted(groups.unique())}

    step(f"{folds}-fold cross-validation")
    add("kfold", data.run, StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed))
    if windows.min() < folds:  # such a class cannot be in every test fold: its F1 rests on fewer folds
        report["kfold"]["note"] = (f"class {windows.idxmin()!r} has {windows.min()} windows, fewer than the "
                                   f"{folds} folds: some folds test without it")
    for name in held_out:
        step(f"leave one {name} out ({data.groups[name].nunique()} folds)")
        add(f"leave_one_{name}_out", data.groups[name], LeaveOneGroupOut(), per_group=True)
    if slowdown:
        step(f"slowdown regressor, {folds}-fold")
        report["slowdown"] = _evaluate_slowdown(data, trees, folds, seed)
    return report


def _evaluate_slowdown(data: TrainingSet, trees: int, folds: int, seed: int) -> dict:
    from sklearn.model_selection import GroupKFold, cross_val_predict

    keep = data.slowdown.notna()
    X, y, run = data.X[keep], data.slowdown[keep], data.run[keep]
    predicted = cross_val_predict(regressor(trees, seed), X, y, groups=run, cv=GroupKFold(n_splits=folds))
    per_run = pd.DataFrame({"run": run, "actual": y, "predicted": predicted}).groupby("run").mean()
    ape = (per_run["predicted"] - per_run["actual"]).abs() / per_run["actual"]
    return {"mape": float(ape.mean() * 100), "median_ape": float(ape.median() * 100), "runs": int(len(per_run))}


@dataclass
class Detector:
    """A fitted detector: classifier (+ slowdown regressor) and how its features were made."""

    classifier: object
    regressor: object | None
    features: list[str]
    interval: float
    window: int
    classes: list[str]
    info: dict = field(default_factory=dict)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        """Probability of each class (columns) for each window (rows)."""
        X = X.reindex(columns=self.features)
        return pd.DataFrame(self.classifier.predict_proba(X), columns=list(self.classifier.classes_), index=X.index)

    def predict_slowdown(self, X: pd.DataFrame) -> np.ndarray | None:
        return None if self.regressor is None else self.regressor.predict(X.reindex(columns=self.features))

    def predict(self, X: pd.DataFrame) -> pd.DataFrame:
        proba = self.predict_proba(X)
        out = pd.DataFrame({"verdict": proba.idxmax(axis=1).to_numpy(), "probability": proba.max(axis=1).to_numpy()})
        if self.regressor is not None:
            out["slowdown"] = self.predict_slowdown(X)
        return out

    def importance(self, top: int = 15) -> pd.DataFrame:
        pipeline = self.classifier
        kept = np.array(self.features)
        if "signals" in pipeline.named_steps:
            kept = np.asarray(pipeline.named_steps["signals"].columns_)
        kept = kept[pipeline.named_steps["variance"].get_support()]
        kept = kept[pipeline.named_steps["select"].get_support()]
        forest = pipeline.named_steps["forest"]
        frame = pd.DataFrame({"feature": kept, "importance": forest.feature_importances_})
        return frame.sort_values("importance", ascending=False).head(top).reset_index(drop=True)

    def save(self, directory: str | Path) -> Path:
        import sklearn

        from perflearn.learn.artifact import write_artifact

        meta = {"features": self.features, "interval": self.interval, "window": self.window, "classes": self.classes,
                "info": self.info, "versions": {"sklearn": sklearn.__version__, "python": platform.python_version()}}
        return write_artifact(directory, {MODELS: {"classifier": self.classifier, "regressor": self.regressor}}, META, meta,
                              "detector")

    @staticmethod
    def check_destination(directory: str | Path) -> Path:
        """``directory`` if ``save`` can write there (new, empty or a detector's); else one line."""
        from perflearn.learn.artifact import check_destination

        return check_destination(directory, [MODELS, META], "detector")

    @classmethod
    def load(cls, directory: str | Path) -> "Detector":
        import joblib
        import sklearn

        directory = Path(directory)
        try:
            meta = json.loads((directory / META).read_text())
        except (OSError, json.JSONDecodeError):
            raise UsageError("not a detector directory (no readable detector.json)", where=str(directory)) from None
        missing = [k for k in ("versions", "info") if not isinstance(meta, dict) or not isinstance(meta.get(k), dict)]
        if missing or "sklearn" not in meta["versions"]:
            raise UsageError(f"not a detector directory (detector.json lacks {(missing or ['versions.sklearn'])[0]})",
                             where=str(directory))
        if meta["versions"]["sklearn"] != sklearn.__version__:
            raise UsageError(f"trained with scikit-learn {meta['versions']['sklearn']}, this is {sklearn.__version__}; "
                             "fit it again", where=str(directory))
        meta_ok = (isinstance(meta.get("features"), list) and isinstance(meta.get("classes"), list)
                   and isinstance(meta.get("interval"), (int, float)) and meta["interval"] > 0
                   and isinstance(meta.get("window"), int) and meta["window"] >= 1)
        if not meta_ok:  # hand-edited or of another program: every field is used below
            raise UsageError("not a detector directory (detector.json lacks features, classes, a positive interval "
                             "or a window)", where=str(directory))
        from perflearn.learn.artifact import check_files

        check_files(directory, meta, META)
        try:
            models = joblib.load(directory / MODELS)
        except OSError as exc:
            raise UsageError(f"models.joblib cannot be read: {exc.strerror or exc}", where=str(directory)) from None
        except Exception as exc:  # unpickling fails in many ways (ValueError, EOFError, UnpicklingError, ...)
            raise UsageError(f"models.joblib is damaged or not a detector's ({type(exc).__name__}); fit it again",
                             where=str(directory)) from None
        if not isinstance(models, dict) or not hasattr(models.get("classifier"), "predict_proba"):
            raise UsageError("models.joblib holds no detector's classifier; fit it again", where=str(directory))
        return cls(models["classifier"], models.get("regressor"), meta["features"], meta["interval"], meta["window"],
                   meta["classes"], meta["info"])


@_quiet
def fit(data: TrainingSet, interval: float, window: int, trees: int = 300, seed: int = 0) -> Detector:
    if data.y.nunique() < 2:
        raise UsageError("need at least two classes (healthy and one interference) to fit a detector")
    model = classifier(trees, seed).fit(data.X, data.y)
    reg = None
    if data.slowdown is not None and data.slowdown.notna().sum() >= 10:
        keep = data.slowdown.notna()
        reg = regressor(trees, seed).fit(data.X[keep], data.slowdown[keep])
    info = {"oob_score": float(model.named_steps["forest"].oob_score_), "windows": int(len(data.y)),
            "runs": int(data.run.nunique())}
    if reg is not None:
        info["slowdown_oob_r2"] = float(reg.named_steps["forest"].oob_score_)
    return Detector(model, reg, list(data.X.columns), interval, window, sorted(data.y.unique()), info)
