"""A fitted performance model (PM): pipeline + feature schema + provenance, saved as a directory.

Directory layout (``perflearn fit --out DIR``)::

    DIR/model.json     format version, target, feature schema, family, parameters,
                       training-data hash, CV scores, library versions
    DIR/pipeline.joblib  the fitted scikit-learn Pipeline

Loading checks the format version and the scikit-learn / numpy major.minor
versions the pipeline was pickled with, and fails with one line when they differ.
"""

from __future__ import annotations

import json
import platform
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import sklearn
from sklearn.pipeline import Pipeline

from perflearn.errors import UsageError
from perflearn.store import Dataset

from .artifact import check_destination, check_files, write_artifact
from .features import FeatureSchema, TrainingData, training_data
from .uncertainty import band_calibration
from .models import (AUTO_BLEND, AUTO_ENSEMBLE, AUTO_LOO_BELOW, AUTO_MAX_WIDTH, AUTO_NESTED_BELOW, AUTO_POINT,
                     AUTO_SMALL_RATIO, AUTO_WEIGHTS, POINTS, WEIGHTS, AutoRegressor, make_pipeline, model_for,
                     quantile_leaf, resolve_log_target)

FORMAT = "perflearn-model/1"
PIPELINE, META = "pipeline.joblib", "model.json"  # a model directory's two files


def versions() -> dict[str, str]:
    import scipy

    from perflearn import __version__

    return {
        "perflearn": __version__,
        "python": platform.python_version(),
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
        "joblib": joblib.__version__,
        "quantile-forest": _version_of("quantile-forest"),
    }


def _version_of(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "none"


def _major_minor(v: str) -> tuple[int, ...]:
    parts = []
    for p in v.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


PERMUTED_ROWS = 200_000  # rows predicted at once in permutation importance


@dataclass
class Model:
    """A fitted pipeline and what it knows about its inputs."""

    FILES = (PIPELINE, META)  # what ``save`` writes (not a field: unannotated)

    pipeline: Pipeline
    schema: FeatureSchema
    family: str  # auto: the best single candidate; an ensemble's members are in cv["members"] (``chosen``)
    params: dict[str, Any]
    log_target: bool
    data_hash: str
    n_train: int
    n_excluded: int
    experiment: str = ""
    excluded_why: str = ""  # the left-out runs by cause (features.left_out_why)
    cv: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=versions)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def target(self) -> str:
        return self.schema.target

    @property
    def chosen(self) -> str:
        """What predicts: the family (log target said), or ``auto``'s ensemble and its weights."""
        members = self.cv.get("members") or []
        if len(members) > 1:
            mean = "geometric mean" if self.cv.get("combine") == "geometric" else "mean"
            return f"ensemble ({mean}): " + "; ".join(f"{w:.2f}×{m}" for m, w in members)
        return self.family + (" (log target)" if self.log_target else "")

    @property
    def quantile(self) -> float | None:
        """The quantile of the target this model predicts (``perflearn fit --quantile``), else None."""
        q = self.params.get("quantile")
        return None if q is None else float(q)

    @property
    def features(self) -> list[str]:
        return self.schema.features

    @property
    def estimator(self):
        """The fitted estimator after preprocessing (AutoRegressor resolved to its choice)."""
        est = self.pipeline.named_steps["model"]
        return est.best_estimator_ if isinstance(est, AutoRegressor) else est

    def transform(self, points: pd.DataFrame, where: str = "points") -> np.ndarray:
        """Check ``points`` against the schema and return the numeric model input."""
        frame = self.schema.frame(points, where=where)
        return np.asarray(self.pipeline.named_steps["prep"].transform(frame), dtype=float)

    def points(self, points, where: str = "points") -> pd.DataFrame:
        """``points`` as a frame: a DataFrame; one point as a dict or a Series; a dict of
        value lists; a list of dicts; rows of values in the model's feature order (a list or
        an array). A list or Series failed inside with "no attribute 'columns'" (session 58)."""
        if isinstance(points, pd.DataFrame):
            return points
        if isinstance(points, pd.Series):
            return points.to_frame().T.infer_objects()
        if isinstance(points, dict):
            lists = [isinstance(v, (list, tuple, np.ndarray, pd.Series)) for v in points.values()]
            return pd.DataFrame(points) if lists and all(lists) else pd.DataFrame([points])
        if isinstance(points, (list, tuple, np.ndarray)):
            rows = list(points)
            if rows and all(isinstance(r, dict) for r in rows):
                return pd.DataFrame(rows)
            widths = {len(r) if isinstance(r, (list, tuple, np.ndarray)) else -1 for r in rows}
            if widths == {len(self.features)}:
                return pd.DataFrame([list(r) for r in rows], columns=self.features)
            raise UsageError(f"rows of {len(self.features)} values each ({', '.join(self.features)}), "
                             f"got {points!r:.80}", where=where)
        raise UsageError(f"a DataFrame, a dict (one point) or a list of points, got {type(points).__name__}",
                         where=where)

    def predict(self, points: pd.DataFrame | dict, where: str = "points") -> np.ndarray:
        """Predicted target for each row of ``points`` (a frame, one point as a dict, ...: ``points``)."""
        from .uncertainty import fast_predict

        points = self.points(points, where)
        X = self.transform(points, where)
        with _quiet():
            return fast_predict(self.estimator, X)

    def predict_dist(self, points: pd.DataFrame | dict, where: str = "points") -> pd.DataFrame:
        """Prediction with an uncertainty: columns ``pred, std, lo, hi`` (lo/hi ~ 90% band).

        Forests: spread across trees; Gaussian processes: posterior std; other
        families: the relative error measured by cross-validation at fit time. lo/hi
        span at least the fit's out-of-fold residuals (``cv["band"]``), so that they
        cover about 90 % of new values where the family's own spread is too narrow.
        """
        from .uncertainty import predict_spread

        points = self.points(points, where)
        X = self.transform(points, where)
        with _quiet():
            pred, std, lo, hi = predict_spread(self.estimator, X, rel_error=self.cv.get("mre"),
                                            band=self.cv.get("band"))
        return pd.DataFrame({"pred": pred, "std": std, "lo": lo, "hi": hi}, index=points.index)

    def importance(self, X: pd.DataFrame | None = None, y: np.ndarray | None = None) -> dict[str, float]:
        """Importance of each feature (one-hot columns summed back into their knob), summing to 1.

        Trees and forests: impurity decrease (NiMC); other families: permutation
        importance on ``X, y`` (needed then).
        """
        names = self.feature_names_out()
        core = _core(self.estimator)
        raw = getattr(core, "feature_importances_", None)
        if raw is None:
            if X is None or y is None:
                return {}
            return self._permutation_importance(X, np.asarray(y, dtype=float))
        owner = {}
        for f in self.features:
            if self.schema.kinds[f] == "categorical":
                for c in self.schema.categories.get(f, []):
                    owner[f"{f}_{c}"] = f
            else:
                owner[f] = f
        out = {f: 0.0 for f in self.features}
        for name, v in zip(names, raw):
            out[owner.get(name, name)] += float(v)
        total = sum(out.values())
        return {k: (v / total if total > 0 else 0.0) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def _permutation_importance(self, X: pd.DataFrame, y: np.ndarray, repeats: int = 5) -> dict[str, float]:
        """Mean increase of absolute error when one feature's column is shuffled (knob level)."""
        rng = np.random.default_rng(0)
        base = float(np.mean(np.abs(self.predict(X) - y)))
        # the shuffled copies are predicted together, as many features at once as PERMUTED_ROWS
        # allow: a predict call per copy took 93 s of a 100-s fit of 30 runs x 200 knobs
        per = max(1, PERMUTED_ROWS // max(1, len(X) * repeats))
        out = {}
        for at in range(0, len(self.features), per):
            group = self.features[at:at + per]
            copies = []
            for f in group:
                for _ in range(repeats):
                    Xp = X.copy()
                    Xp[f] = rng.permutation(Xp[f].to_numpy())
                    copies.append(Xp)
            errors = np.abs(self.predict(pd.concat(copies, ignore_index=True)) - np.tile(y, len(copies)))
            losses = errors.reshape(len(group), repeats, len(X)).mean(axis=2) - base
            for f, loss in zip(group, losses):
                out[f] = max(0.0, float(loss.mean()))
        total = sum(out.values())
        return {k: (v / total if total > 0 else 0.0) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def feature_names_out(self) -> list[str]:
        return list(self.pipeline.named_steps["prep"].get_feature_names_out())

    # -- persistence ---------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "experiment": self.experiment,
            "schema": self.schema.to_dict(),
            "family": self.family,  # auto: its best single candidate; what predicts is "predicts"
            "predicts": self.chosen,  # an ensemble's members and weights (a 5-member ensemble read "gbm")
            "params": _jsonable(self.params),
            "log_target": self.log_target,
            "data_hash": self.data_hash,
            "n_train": self.n_train,
            "n_excluded": self.n_excluded,
            "excluded_why": self.excluded_why,
            "cv": _jsonable(self.cv),
            "versions": self.versions,
            "created": self.created,
        }

    def save(self, path: str | Path) -> Path:
        return write_artifact(path, {PIPELINE: self.pipeline}, META, self.meta())

    @staticmethod
    def check_destination(path: str | Path) -> Path:
        """``path`` if ``save`` can write there (new, empty or a model's); else one line."""
        return check_destination(path, list(Model.FILES))

    @classmethod
    def load(cls, path: str | Path) -> "Model":
        path = Path(path)
        meta_file = path / "model.json"
        if not meta_file.is_file():
            raise UsageError("not a perflearn model directory (no model.json)", where=str(path))
        try:
            meta = json.loads(meta_file.read_text())
        except json.JSONDecodeError as exc:
            raise UsageError(f"model.json is not valid JSON ({exc.msg}, line {exc.lineno})", where=str(meta_file)) from None
        if not isinstance(meta, dict):
            raise UsageError("not a valid perflearn model (model.json is not an object)", where=str(path))
        if meta.get("format") != FORMAT:
            raise UsageError(f"model format {meta.get('format')!r} is not {FORMAT!r}; refit it", where=str(path))
        saved = meta.get("versions", {})
        here = versions()
        # a quantile forest's pickle is quantile-forest's classes: its version matters as scikit-learn's does
        params = meta.get("params")
        quantile = isinstance(params, dict) and params.get("quantile") is not None
        libs = ("scikit-learn", "numpy") + (("quantile-forest",) if quantile else ())
        for lib in libs:
            if lib in saved and _major_minor(saved[lib]) != _major_minor(here[lib]):
                raise UsageError(
                    f"model was saved with {lib} {saved[lib]}, this is {here[lib]}; refit it with `perflearn fit`",
                    where=str(path),
                )
        check_files(path, meta, META)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pipeline = joblib.load(path / "pipeline.joblib")
        except FileNotFoundError:
            raise UsageError("pipeline.joblib is missing", where=str(path)) from None
        except Exception as exc:  # a corrupt or foreign pickle
            raise UsageError(f"cannot load pipeline.joblib ({type(exc).__name__}: {exc})", where=str(path)) from None
        if not isinstance(pipeline, Pipeline):
            raise UsageError("pipeline.joblib does not hold a scikit-learn Pipeline", where=str(path))
        try:
            lacking = _lacking(meta)
            if lacking:  # valid JSON without what predicting reads: one line, not a KeyError later
                raise UsageError(f"not a valid perflearn model (model.json lacks {lacking})", where=str(path))
            schema = FeatureSchema.from_dict(meta["schema"])
            takes = getattr(pipeline, "feature_names_in_", None)
            if takes is not None and list(takes) != list(schema.features):  # two fits' files, mixed
                raise UsageError(f"model.json and pipeline.joblib disagree: the schema names "
                                 f"{', '.join(schema.features)}, the pipeline takes {', '.join(map(str, takes))}; "
                                 "refit it", where=str(path))
            return cls(
                pipeline=pipeline,
                schema=schema,
                family=meta["family"],
                params=meta.get("params", {}),
                log_target=bool(meta.get("log_target", False)),
                data_hash=meta.get("data_hash", ""),
                n_train=int(meta.get("n_train", 0)),
                n_excluded=int(meta.get("n_excluded", 0)),
                excluded_why=str(meta.get("excluded_why", "")),
                experiment=meta.get("experiment", ""),
                cv=meta.get("cv", {}),
                versions=saved,
                created=meta.get("created", ""),
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # e.g. a range not [lo, hi]
            raise UsageError(f"not a valid perflearn model (model.json: {type(exc).__name__}: {exc})",
                             where=str(path)) from None

    def check_dataset(self, ds: Dataset, where: str | None = None) -> None:
        """Fail with one line when ``ds`` has other knobs than this model was trained on."""
        missing = [f for f in self.features if f not in ds.features]
        if missing:
            # a signal measured in each run (a --per-sample fit's --context-cols) is no knob to set: it was called
            # a knob, and -c for it was "unknown feature"
            measured = [f for f in missing if f in ds.metrics]
            why = (f": {', '.join(measured)} {'is' if len(measured) == 1 else 'are'} measured here, not set; a model "
                   "that predicts from a measurement cannot choose settings (fit one on the knobs and context, -f)"
                   if measured else " (not a column here: another experiment's, or a signal sampled in each run that "
                   "a --per-sample fit took, which no setting chooses)")
            raise UsageError(
                f"model was trained on features {', '.join(self.features)}; this data lacks {', '.join(missing)}"
                + why, where=where or ds.where,
            )


def _lacking(meta: dict[str, Any]) -> str | None:
    """The first key of model.json a model needs that is missing or of the wrong type, dotted."""
    if not isinstance(meta.get("family"), str):
        return "family"
    schema = meta.get("schema")
    if not isinstance(schema, dict):
        return "schema"
    for key, kind in (("target", str), ("features", list), ("kinds", dict)):
        if not isinstance(schema.get(key), kind):
            return f"schema.{key}"
    for f in schema["features"]:
        if schema["kinds"].get(f) not in ("numeric", "categorical"):
            return f"schema.kinds.{f}"
        if schema["kinds"][f] == "categorical" and not isinstance(schema.get("categories", {}).get(f), list):
            return f"schema.categories.{f}"
    # what predict reads besides: each was a KeyError or ValueError at predict, an internal error (session 56)
    one_hot = schema.get("one_hot", [])
    if not (isinstance(one_hot, list) and all(isinstance(g, list) and set(g) <= set(schema["features"])
                                              for g in one_hot)):
        return "schema.one_hot (groups of the schema's features)"
    context = schema.get("context", [])
    if not (isinstance(context, list) and set(context) <= set(schema["features"])):
        return "schema.context (some of the schema's features)"
    params = meta.get("params", {})
    if not isinstance(params, dict):
        return "params"
    q = params.get("quantile")
    if q is not None and not (isinstance(q, (int, float)) and 0 < q < 1):
        return "params.quantile (a fraction in (0, 1))"
    cv = meta.get("cv", {})
    if not isinstance(cv, dict):
        return "cv"
    band = cv.get("band")
    if band is not None and not (isinstance(band, dict) and band.get("scale") in ("log", "absolute")
                                 and all(isinstance(band.get(k), (int, float)) for k in ("lo", "hi"))):
        return "cv.band (scale, lo, hi)"
    return None


@contextmanager
def _quiet():
    """No numpy or scikit-learn warning reaches the terminal while predicting (a value beyond
    float32, which overflowed in the trees' cast, is refused before: FeatureSchema.frame)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _core(est):
    """The innermost fitted regressor (through target transforms and pipelines)."""
    from sklearn.compose import TransformedTargetRegressor

    while True:
        if isinstance(est, TransformedTargetRegressor):
            est = est.regressor_
        elif isinstance(est, Pipeline):
            est = est.steps[-1][1]
        else:
            return est


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def fit(
    ds: Dataset,
    target: str,
    features: list[str] | None = None,
    family: str = "auto",
    *,
    params: dict[str, Any] | None = None,
    log_target: bool | str = "auto",
    cv: int | None = None,
    random_state: int | None = 0,
    n_jobs: int = 1,
    families: list[str] | None = None,
    ensemble: int | None = None,
    loo_below: int | None = None,
    blend: float | None = None,
    small_ratio: float | None = None,
    point: str | None = None,
    weights: str | None = None,
) -> Model:
    """Fit a performance model of ``target`` from ``features`` (default: all knobs and context).

    ``family`` is one of ``FAMILIES`` or ``auto`` (family, hyperparameters and log
    target chosen by ``cv``-fold cross-validation on this data only). With an
    explicit family, ``log_target="auto"`` means log when every value is > 0 and
    they span two orders of magnitude or more. ``point`` (auto only): ``auto``,
    ``median`` or ``relative``; ``weights`` (auto only): ``auto``, ``near-ties`` or
    ``inverse`` (see :class:`~perflearn.learn.models.AutoRegressor`).
    """
    data = training_data(ds, target, features)
    return fit_data(data, family, params=params, log_target=log_target, cv=cv, random_state=random_state,
                    n_jobs=n_jobs, families=families, ensemble=ensemble, loo_below=loo_below,
                    blend=blend, small_ratio=small_ratio, point=point, weights=weights,
                    experiment=ds.experiment, where=ds.where)


def fit_data(
    data: TrainingData,
    family: str = "auto",
    *,
    params=None,
    log_target: bool | str = "auto",
    cv: int | None = None,
    random_state=0,
    n_jobs: int = 1,
    families=None,
    ensemble: int | None = None,
    loo_below: int | None = None,
    blend: float | None = None,
    small_ratio: float | None = None,
    point: str | None = None,
    weights: str | None = None,
    experiment: str = "",
    nested_below: int | None = None,
    where: str = "",
) -> Model:
    from .evaluate import check_family, check_neighbors, fit_params, group_unit, run_groups

    where = where or experiment or "data"  # errors name the file (runs.csv), not its stem
    check_family(family, params, families)
    y = data.y
    log_target = resolve_log_target(log_target, y, where, family)
    n = len(y)
    # per-sample data (several rows per run): cross-validation keeps each run's rows in one fold
    groups = run_groups(data)
    runs = n if groups is None else len(pd.unique(groups))
    point = AUTO_POINT if point is None else point
    if point not in POINTS:
        raise UsageError(f"point must be one of {', '.join(POINTS)}, got {point!r}", where="--point")
    weights = AUTO_WEIGHTS if weights is None else weights
    if weights not in WEIGHTS:
        raise UsageError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}", where="--weights")
    if cv is None:  # 5, or one fold per run (configuration, when grouped) when there are fewer
        cv = max(2, min(5, runs))
    elif loo_below is None:  # the user's folds: auto's leave-one-out on few runs replaced --cv 3 by 25 folds, unsaid
        loo_below = 0
    if cv < 2:
        raise UsageError(f"cross-validation needs at least 2 folds, got {cv}", where="--cv")
    if ensemble is not None and ensemble < 1:  # 0 or less was ignored
        raise UsageError(f"an ensemble has at least 1 pick, got {ensemble}", where="--ensemble")
    if ensemble is not None:  # the user's own picks: not auto's averages, which came first and ignored it
        if weights == "inverse":
            raise UsageError("--ensemble picks members by their out-of-fold predictions, --weights inverse averages "
                             "every candidate: give one", where="--ensemble")
        weights, blend = "near-ties", 0.0 if blend is None else blend
    if groups is not None and runs < 2:
        unit = group_unit(data)
        raise UsageError(f"the {n} rows come from {runs} {unit}; cross-validation by {unit} needs at least 2",
                         where=where)
    if runs < cv:  # folds are made of whole runs or configurations (--cv 30 on 12 ran 12 folds, unsaid)
        what = "usable runs" if groups is None else f"{group_unit(data)}s (folds are by {group_unit(data)})"
        raise UsageError(f"{runs} {what} are fewer than the {cv} cross-validation folds; lower --cv", where=where)
    if groups is None:  # the CV's smallest training fold bounds k, not all the runs (advice of 10 then failed at 8)
        check_neighbors(family, params, n - -(-n // cv), "runs a cross-validation fold trains on")
    else:
        check_neighbors(family, params, n, "runs to train on")
    params = quantile_leaf(family, params, n)
    try:
        estimator = model_for(family, params=params, log_target=log_target, cv=cv, random_state=random_state,
                              n_jobs=n_jobs, families=families,
                              ensemble=AUTO_ENSEMBLE if ensemble is None else ensemble,
                              loo_below=AUTO_LOO_BELOW if loo_below is None else loo_below,
                              blend=AUTO_BLEND if blend is None else blend,
                              small_ratio=AUTO_SMALL_RATIO if small_ratio is None else small_ratio,
                              point=point, weights=weights,
                              nested_below=AUTO_NESTED_BELOW if nested_below is None else nested_below)
        pipeline = make_pipeline(data.schema, estimator)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipeline.fit(data.X, y, **fit_params(pipeline, groups))
    except ValueError as exc:
        raise UsageError(f"cannot fit {family}: {str(exc).splitlines()[0]}", where=where) from None
    est = pipeline.named_steps["model"]
    cvinfo: dict[str, Any]
    if isinstance(est, AutoRegressor):
        chosen_family, chosen_params, chosen_log = est.best_family_, est.best_params_, est.best_log_target_
        from .metrics import all_metrics

        cvinfo = {"folds": est.n_splits_, **all_metrics(y, est.oof_predictions_),
                  "band": band_calibration(y, est.honest_oof_, units=runs),
                  "selected_by": est.scoring_, "members": est.members_, "candidates": est.cv_results_,
                  "point": est.point_, "weights": est.weights_, "combine": est.combine_}
        if getattr(est, "bounds_", None) is not None:
            cvinfo["bounds"] = list(est.bounds_)
        if cvinfo["band"] is not None and getattr(est, "nested_", False):  # calibrated on nested out-of-fold errors
            cvinfo["band"]["nested"] = True
        if getattr(est, "raw_set_aside_", False):  # raw-target candidates tried, then not clearly better
            cvinfo["raw_set_aside"] = True
        if getattr(est, "left_out_", None):
            cvinfo["left_out"] = {"candidates": est.left_out_, "width": int(est.n_features_in_),
                                  "max_width": AUTO_MAX_WIDTH}
        if groups is not None:
            cvinfo.update(folds_by=group_unit(data), units=runs)
    else:
        chosen_family, chosen_params, chosen_log = family, dict(params or {}), bool(log_target)
        from .evaluate import cross_validate_pipeline

        cvinfo = cross_validate_pipeline(data, family, params=params, log_target=bool(log_target), folds=cv,
                                         random_state=random_state, n_jobs=n_jobs)
    model = Model(
        pipeline=pipeline,
        schema=data.schema,
        family=chosen_family,
        params=dict(chosen_params),
        log_target=bool(chosen_log),
        data_hash=data.hash(),
        n_train=n,
        n_excluded=data.excluded,
        excluded_why=data.excluded_why,
        experiment=experiment,
        cv=cvinfo,
    )
    model.cv["importance"] = model.importance(data.X, y)
    return model


def load(path: str | Path) -> Model:
    return Model.load(path)
