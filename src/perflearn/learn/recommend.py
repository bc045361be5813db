"""Recommend settings: the best point for a context under an objective, and Kunkel's table.

``recommend`` searches the knob space through fitted models (one per metric
involved): exhaustively when the grid is small, else random sampling followed by
coordinate-wise local search from the best samples. Constraints (``p95<=1.1``)
are checked on their own metric's model; infeasible points rank after feasible
ones, by how far they violate: each overshoot as a share of its bound (of the metric's
spread over the first points scored, for a bound of 0), so that bounds in different
units add up the same in any unit.

``defaults_table`` is the "Default Choice" table of Kunkel et al.: for each
context (e.g. access pattern), the measured value of the setting the model
chooses, of the best single system-wide default, and of the best measured
setting; with absolute and relative loss. The model's choices are cross-fitted:
the model choosing for a context never saw that context's runs (when there are
at least two contexts).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from perflearn.errors import UsageError
from perflearn.store import Dataset

from .features import _category, given_value, training_data
from .model import Model, fit_data
from .space import SearchSpace, plain as _plain

# any metric name a CSV can hold (99p, p95/ms, "lat,p95" quoted as in the CSV): not only identifiers
_CONSTRAINT = re.compile(r'^\s*("(?:[^"]|"")+"|[^\s<>="][^<>=]*?)\s*(<=|>=|<|>)\s*(\S+)\s*$')


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> "Constraint":
        m = _CONSTRAINT.match(text)
        if not m:
            raise UsageError(f"constraint {text!r} is not METRIC<=VALUE (or >=, <, >)", where="--where")
        try:
            value = float(m.group(3))
        except ValueError:
            value = float("nan")
        if not np.isfinite(value):  # "nan" and "inf" are floats, and bound nothing
            raise UsageError(f"constraint {text!r} needs a finite number after {m.group(2)}", where="--where")
        name = m.group(1)
        if name.startswith('"'):
            name = name[1:-1].replace('""', '"')
        return cls(name, m.group(2), value)

    def violation(self, v: np.ndarray, scale: float = 1.0) -> np.ndarray:
        """How far each value is past the bound, in units of ``scale`` (0 when satisfied, and
        on a strict bound: ``on_bound`` tells that one apart)."""
        past = np.maximum(v - self.value, 0.0) if self.op in ("<=", "<") else np.maximum(self.value - v, 0.0)
        return past / scale

    def on_bound(self, v: np.ndarray) -> np.ndarray:
        """Values equal to a strict bound: not past it, yet not meeting it (a violation of 1e-12
        stood for them, and the table showed it)."""
        return (v == self.value) if self.op in ("<", ">") else np.zeros(len(v), dtype=bool)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


@dataclass
class Recommendation:
    point: dict[str, Any]
    predicted: dict[str, float]
    feasible: bool
    method: str  # "exhaustive" | "sampling+local"
    evaluated: int
    top: pd.DataFrame = field(repr=False)
    notes: list[str] = field(default_factory=list)  # what the space kept out, and why


def _score_frame(points: pd.DataFrame, models: dict[str, Model], objective: str, sense: str,
                 constraints: list[Constraint], scales: dict[Constraint, float]) -> pd.DataFrame:
    """``points`` with each model's prediction, their summed violation (each constraint's in
    units of its ``scales`` entry, set here from the first points scored where missing),
    strict bounds met exactly, and the objective as a key to sort ascending."""
    out = points.copy()
    for metric, model in models.items():
        out[metric] = model.predict(points, where="search")
    viol = np.zeros(len(out))
    on_bound = np.zeros(len(out), dtype=bool)
    for c in constraints:
        # power<=2 W and lat<=12 ms summed raw ranked differently with power in mW (session 58's audit)
        if c not in scales:
            spread = float(np.std(out[c.metric])) if len(out) > 1 else 0.0
            scales[c] = abs(c.value) or spread or 1.0
        viol += c.violation(out[c.metric].to_numpy(), scales[c])
        on_bound |= c.on_bound(out[c.metric].to_numpy())
    out["_violation"] = viol
    out["_on_bound"] = on_bound  # ranks after the points that meet every constraint, before those past one
    out["_key"] = out[objective] if sense == "min" else -out[objective]
    return out


def implausible(predicted: dict[str, float], runs: pd.DataFrame) -> list[str]:
    """A prediction not positive for a metric measured positive in every run: the model
    extrapolates there (a linear model past the data predicted -0.71 s, and its gain over
    the median point read +101 %)."""
    out = []
    for metric, value in predicted.items():
        measured = pd.to_numeric(runs[metric], errors="coerce").dropna() if metric in runs else pd.Series(dtype=float)
        if len(measured) and value <= 0 < measured.min():
            out.append(f"the predicted {metric} {value:.4g} is not positive where every run measured more than 0 "
                       f"(least {measured.min():.4g}): the model extrapolates there; measure the point before "
                       "trusting it")
    return out


def _rank(scored: pd.DataFrame) -> pd.DataFrame:
    return scored.sort_values(["_violation", "_on_bound", "_key"], kind="mergesort")


def recommend(
    models: dict[str, Model],
    objective: str,
    sense: str,
    space: SearchSpace | dict[str, list],
    context: dict[str, Any] | None = None,
    constraints: list[Constraint] | None = None,
    *,
    max_exhaustive: int = 50_000,
    samples: int = 2000,
    starts: int = 5,
    seed: int = 0,
    top: int = 5,
) -> Recommendation:
    """The best point of ``space`` for ``context`` by the models' predictions (a dict:
    every combination of its values is a point). ``constraints``: ``Constraint``s or their
    text (``"p95<=25"``)."""
    values = _check_inputs(models, space, context)
    space = space if isinstance(space, SearchSpace) else SearchSpace(values)
    constraints = [Constraint.parse(c) if isinstance(c, str) else c for c in constraints or []]
    # a value given as text, as the CLI reads --context (threads="4" stayed the text "4" in the point)
    numeric = {f for model in models.values() for f in model.schema.numeric}
    context = {k: given_value(v) if isinstance(v, str) and k in numeric else v for k, v in (context or {}).items()}
    if sense not in ("min", "max"):
        raise UsageError(f"objective sense must be min or max, got {sense!r}", where="recommend")
    if top < 1:  # head(-3) would show all but 3 of the points
        raise UsageError(f"show at least 1 point, got {top}", where="--top")
    for metric in [objective, *(c.metric for c in constraints)]:
        if metric not in models:
            raise UsageError(f"no model for metric {metric!r}", where="recommend")
    knobs = [k for k in space.values if k not in context]
    if not knobs:
        raise UsageError("every feature is fixed by the context; nothing to choose", where="--context")
    axes = space.axes(knobs)
    evaluated: set[tuple] = set()  # the distinct points scored (local search scores its start again each step)
    scales: dict[Constraint, float] = {}

    def score(rows: list[tuple]) -> pd.DataFrame:
        """Points given by their axis values, scored and ranked; those outside the space left out."""
        frame = space.frame(axes, rows, context)
        keep = np.flatnonzero(space.allowed(frame))
        evaluated.update(rows[i] for i in keep)
        if not len(keep):
            return pd.DataFrame()
        scored = _score_frame(frame.iloc[keep].reset_index(drop=True), models, objective, sense, constraints, scales)
        scored["_axes"] = [rows[i] for i in keep]
        return _rank(scored)

    if context:  # a bad context value (a word, 1e39) is the user's --context, not a point of the search
        probe = space.frame(axes, [tuple(values[0] for _, values in axes)], context)
        for model in models.values():
            model.schema.frame(probe, where="--context")
    size = int(np.prod([len(values) for _, values in axes], dtype=float))
    if size <= max_exhaustive:
        scored = score(list(itertools.product(*(values for _, values in axes))))
        method = "exhaustive"
    else:
        rng = np.random.default_rng(seed)
        idx = np.column_stack([rng.integers(0, len(values), samples) for _, values in axes])
        # the measured settings too: where the best lies off every path of one knob at a
        # time (an interaction), random points and local search alone can miss it
        scored = score([tuple(values[i] for (_, values), i in zip(axes, r)) for r in idx]
                       + space.measured_rows(axes))
        pool = [scored] if len(scored) else []
        for start in (scored.head(starts)["_axes"] if len(scored) else []):
            current = tuple(start)
            for _ in range(50):
                # every move of one axis from here, scored at once (one axis at a time, a call each, took
                # over 13 minutes on 500 knobs); then every axis's best move that beats staying, taken together
                # where that beats the single best move (a step along every improving axis at once)
                s = score([current, *(current[:j] + (v,) + current[j + 1:]
                                      for j, (_, values) in enumerate(axes) for v in values if v != current[j])])
                if s.empty:
                    break
                pool.append(s.head(top))  # the best few of each step: --top showed 152 where 143 was scored
                ranked = list(s["_axes"])
                if ranked[0] == current or current not in ranked:
                    break  # no move of one axis beats it (or it lies outside the space): a local optimum
                jump = list(current)
                for moved in reversed(ranked[:ranked.index(current)]):  # the best move of each axis wins
                    j = next(j for j, (a, b) in enumerate(zip(moved, current)) if a != b)
                    jump[j] = moved[j]
                both = score([ranked[0], tuple(jump)])
                current = both["_axes"].iloc[0] if len(both) else ranked[0]
                pool.append(both.head(top))
        scored = _rank(pd.concat(pool).drop_duplicates(subset=knobs)) if pool else pd.DataFrame()
        method = "sampling+local"
    if scored.empty:
        raise UsageError("no combination of the knobs' measured values is a configuration the design allows"
                         + (f" for {', '.join(f'{k}={v}' for k, v in context.items())}" if context else ""),
                         where="recommend")
    best = scored.iloc[0]
    point = {k: _plain(best[k]) for k in [*knobs, *context]}
    predicted = {m: float(best[m]) for m in models}
    # how far past its constraints a point is; without constraints a column of zeros, left out
    shown = scored.head(top)
    # a column of zeros left out: without constraints the violation, without a strict one on its bound, on_bound
    shown = shown.drop(columns=["_key", "_axes"] + ([] if constraints else ["_violation"])
                       + ([] if shown["_on_bound"].any() else ["_on_bound"]))
    shown = shown.rename(columns={"_violation": "violation", "_on_bound": "on_strict_bound"}).reset_index(drop=True)
    feasible = bool(best["_violation"] == 0 and not best["_on_bound"])
    return Recommendation(point, predicted, feasible, method, len(evaluated), shown, space.notes)


def _check_inputs(models, space, context) -> dict[str, list]:
    """The Python caller's mistakes, one line each (session 58's audit: a space or context key
    no model takes was searched and shown in the point, ``{"power": lat_model}`` predicted
    power with a latency model, a scalar or empty value list failed deep inside); the
    space's values as lists (each iterable read once: a generator's were used up here)."""
    if not isinstance(models, dict) or not all(isinstance(m, Model) for m in models.values()):
        raise UsageError("models: a dict of metric -> fitted Model (perflearn.learn.fit or load)", where="recommend")
    for metric, model in models.items():
        if model.target != metric:
            raise UsageError(f"models[{metric!r}] predicts {model.target!r}, not {metric!r}", where="recommend")
    takes = {f for model in models.values() for f in model.features}
    values = space.values if isinstance(space, SearchSpace) else space
    if not isinstance(values, dict):
        raise UsageError(f"space: a dict of knob -> list of values, got {type(values).__name__}", where="recommend")
    for what, names in (("space", values), ("context", context or {})):
        unknown = [k for k in names if k not in takes]
        if unknown:
            raise UsageError(f"{what}: {', '.join(map(repr, unknown))} is no feature of the models "
                             f"(features: {', '.join(sorted(takes))})", where="recommend")
    listed = {}
    for k, v in values.items():
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise UsageError(f"space[{k!r}]: a list of values, got {v!r}", where="recommend")
        listed[k] = list(v)
        if not listed[k]:
            raise UsageError(f"space[{k!r}]: no value to search", where="recommend")
    return listed


def runs_with(fixed: dict[str, Any], runs: pd.DataFrame) -> np.ndarray:
    """Which of ``runs`` had every value of ``fixed`` (a column they lack is not checked)."""
    match = np.ones(len(runs), dtype=bool)
    for k, v in fixed.items():
        if k in runs:
            column = runs[k]
            # a categorical column holds text: -c load=10 (read as 10) matched none of its "10"s (session 58's review)
            same = column == v if pd.api.types.is_numeric_dtype(column) else \
                column.astype(str).isin({str(v), shown_value(v)})
            match &= same.to_numpy()
    return match


def never_measured(fixed: dict[str, Any], runs: pd.DataFrame, what: str = "a context") -> str | None:
    """A line when no run of ``runs`` had every value of ``fixed`` (a context, with knobs
    ``recommend -c`` fixed too): the recommendation is a prediction for ``what`` was never
    measured (``decide`` said it; ``recommend`` did not, session 58's audit)."""
    if not fixed or runs.empty or runs_with(fixed, runs).any():
        return None
    shown = ", ".join(f"{k}={shown_value(v)}" for k, v in fixed.items())
    return f"no run had {shown}: {what} never measured"


def context_beyond_settings(point: dict[str, Any], runs: pd.DataFrame, context: list[str],
                            knobs: list[str]) -> list[str]:
    """A line for each numeric ``context`` value of ``point`` outside the range the runs with
    the point's ``knobs`` settings measured: decide recommended bs=4096 for cpu_time=230.76,
    a 1-MiB run's, where every bs=4096 run measured 410-530 (session 60's audit), unsaid.
    Settings measured once have no range (a continuous knob's every value), and a value
    outside every run's range is the schema's to say."""
    settings = {k: point[k] for k in knobs if k in point and k in runs}
    if not settings:
        return []
    alike = runs[runs_with(settings, runs)]
    notes = []
    for c in context:
        if c not in point or c not in alike or not pd.api.types.is_numeric_dtype(alike[c]):
            continue
        measured, value = alike[c].dropna(), float(point[c])
        if len(measured) >= 2 and runs[c].min() <= value <= runs[c].max() \
                and not measured.min() <= value <= measured.max():
            shown = ", ".join(f"{k}={shown_value(v)}" for k, v in settings.items())
            notes.append(f"{c}={value:.6g}: the runs at {shown} measured {c} "
                         f"{measured.min():.4g}..{measured.max():.4g} only; the prediction "
                         "extrapolates to a situation these settings never ran in")
    return notes


def beyond_the_runs(model, point: dict[str, Any], predicted: dict[str, float], runs: pd.DataFrame,
                    used: list[str], context: list[str], constraints: dict | None = None) -> list[str]:
    """Every way a recommended ``point`` (of ``model``'s target, ``predicted``) lies beyond
    the ``runs``, one line each, as recommend and decide both say it: a feature outside the
    trained range (of ``model``, or of a constraint's model in ``constraints``, metric ->
    model: one measured on fewer runs knows a narrower range), settings no run had together,
    a prediction beyond the measured values, a context value the point's settings never ran at."""
    asked = pd.DataFrame([point])
    outside = model.schema.outside(asked[model.features])
    for metric, other in (constraints or {}).items():
        outside += [f"{metric}'s model: {line}" for line in other.schema.outside(asked[other.features])
                    if line not in outside]
    return [*outside, *unseen_pairs(point, runs, used), *implausible(predicted, runs),
            *context_beyond_settings(point, runs, context, [f for f in used if f not in context])]


def shown_value(value) -> str:
    """A value as given: 10, not the 10.0 of a numeric column."""
    return str(int(value)) if isinstance(value, (float, np.floating)) and float(value).is_integer() else str(value)


# -- Kunkel's "Default Choice" table ------------------------------------------------------


class NoSharedDefault(UsageError):
    """No knob setting was measured in every context: there is no system-wide default to
    compare the learned choices with. A property of the data, not of the command: ``decide``
    and ``recommend --table`` say it in one line and keep the rest of their answer (session
    57's audit: decide ended with exit 2 after its fit, its CV error, rules and recommendation
    lost)."""

    REASON = "no knob setting was measured in every context"

    def __init__(self, where: str | None = None):
        super().__init__(f"{self.REASON}; cannot compare system-wide defaults", where=where)

    @classmethod
    def line(cls) -> str:
        """What a command prints in place of the table."""
        return f"learned vs system-wide defaults: not compared ({cls.REASON}: a default is one setting for all)"


@dataclass
class DefaultsTable:
    per_context: pd.DataFrame  # one row per context
    summary: pd.DataFrame  # learned, each default, best measured: mean, relative, loss, best/worst freq
    knobs: list[str]
    context: list[str]
    cross_fitted: bool
    defaults_left_out: int = 0  # defaults measured in every context beyond max_defaults (the worst)
    # categorical context columns: cross-fitted, a model never saw the held-out context's value (all-zero
    # one-hot), so its choice there cannot depend on it
    blind_to: list[str] = field(default_factory=list)

    def blind_note(self) -> str | None:
        """The caveat on the learned choices when a context column is categorical (None when
        none is): ``recommend --table`` and ``decide`` both say it (decide printed its gain over
        the default without it, session 57's audit)."""
        if not self.blind_to:
            return None
        return (f"learned: {', '.join(self.blind_to)} is categorical: the model choosing for a context never saw "
                "its value, so its choice there cannot depend on it (a numeric context is interpolated)")


def defaults_table(
    ds: Dataset,
    target: str,
    sense: str,
    context: list[str] | None = None,
    family: str = "rf",
    *,
    folds: int = 5,
    random_state: int = 0,
    max_defaults: int = 10,
) -> DefaultsTable:
    """Per context: the model's choice vs the best single default vs the best measured (Kunkel)."""
    if sense not in ("min", "max"):
        raise UsageError(f"objective sense must be min or max, got {sense!r}", where="recommend")
    context = list(ds.context if context is None else context)
    for c in context:
        if c not in ds.features:
            raise UsageError(f"unknown context column {c!r} (features: {', '.join(ds.features)})", where="--context-cols")
    knobs = [k for k in ds.features if k not in context]
    if not knobs:
        raise UsageError("every feature is context; no knob to choose", where="--context-cols")
    data = training_data(ds, target, [*knobs, *context])
    rows = data.X.copy()
    rows["_y"] = data.y
    # each distinct context and setting numbered in the values' own order (numbers as numbers: contexts
    # 1, 16, 2, 4, 8 were listed as text); "|"-joined text keys merged a=x|y,b=z with a=x,b=y|z
    rows["_ctx"] = rows.groupby(context, sort=True, dropna=False).ngroup() if context else 0
    rows["_set"] = rows.groupby(knobs, sort=True, dropna=False).ngroup()
    measured = rows.groupby(["_ctx", "_set"])["_y"].mean().unstack("_set")  # contexts x settings
    complete = [s for s in measured.columns if measured[s].notna().all()]
    if not complete:  # known before the cross-fits: no need to fit a model per fold first
        raise NoSharedDefault(where=ds.where)
    better = np.nanmin if sense == "min" else np.nanmax
    best_val = pd.Series(better(measured.to_numpy(), axis=1), index=measured.index)
    best_set = measured.idxmin(axis=1) if sense == "min" else measured.idxmax(axis=1)

    # cross-fitted choices: the model choosing for a context never saw it
    groups = rows["_ctx"].to_numpy()
    n_ctx = len(measured.index)
    choice: dict[str, str] = {}
    splits = (list(GroupKFold(min(folds, n_ctx)).split(rows, groups=groups)) if n_ctx >= 2
              else [(np.arange(len(rows)), np.arange(len(rows)))])
    settings = rows.drop_duplicates("_set").set_index("_set")[knobs]
    for tr, te in splits:
        sub = type(data)(X=data.X.iloc[tr].reset_index(drop=True), y=data.y[tr], schema=data.schema,
                         excluded=0, rows=data.rows.iloc[tr])
        model = fit_data(sub, family, random_state=random_state)
        for ctx in pd.unique(groups[te]):
            avail = measured.loc[ctx].dropna().index
            cand = settings.loc[avail].copy()
            crow = rows[rows["_ctx"] == ctx].iloc[0]
            for c in context:
                cand[c] = crow[c]
            # predictions are checked against the sub-model's schema; categories unseen there cannot be scored
            try:
                pred = model.predict(cand, where="defaults")
            except UsageError:
                pred = model.estimator.predict(_onehot_lenient(model, cand))
            i = int(np.argmin(pred) if sense == "min" else np.argmax(pred))
            choice[ctx] = avail[i]

    learned_val = pd.Series({c: measured.loc[c, choice[c]] for c in measured.index})

    def loss(values: pd.Series) -> pd.Series:
        return (values - best_val) if sense == "min" else (best_val - values)

    def rel(values: pd.Series) -> pd.Series:
        return _ratio(best_val, values) if sense == "min" else _ratio(values, best_val)

    default_means = {s: measured[s].mean() for s in complete}
    order = sorted(complete, key=lambda s: default_means[s], reverse=(sense == "max"))
    best_default = order[0]
    worse = np.nanmax if sense == "min" else np.nanmin
    worst_val = pd.Series(worse(measured.to_numpy(), axis=1), index=measured.index)

    def row(label: str, values: pd.Series) -> dict[str, Any]:
        # how often it was the best, or the worst, of every setting measured in a context (ties count for each)
        return {"choice": label, "mean": values.mean(), "relative": rel(values).mean(), "loss": loss(values).mean(),
                # relative only: np.isclose's default atol of 1e-8 made every value of a target in seconds a tie
                "best_freq": int(np.isclose(values, best_val, rtol=1e-9, atol=0).sum()),
                "worst_freq": int(np.isclose(values, worst_val, rtol=1e-9, atol=0).sum())}

    summary_rows = [row(f"learned ({family})", learned_val)]
    summary_rows += [row("default " + _setting_label(knobs, settings.loc[s]), measured[s]) for s in order[:max_defaults]]
    summary_rows.append(row("best measured", best_val))
    per = []
    for ctx in measured.index:
        crow = rows[rows["_ctx"] == ctx].iloc[0]
        default = measured.loc[ctx, best_default]
        per.append({**{c: _plain(crow[c]) for c in context},
                    "learned": _setting_label(knobs, settings.loc[choice[ctx]]), "learned_value": learned_val[ctx],
                    "default_value": default, "best": _setting_label(knobs, settings.loc[best_set[ctx]]),
                    "best_value": best_val[ctx], "loss_vs_best": loss(learned_val)[ctx] + 0.0,  # + 0.0: no "-0"
                    "relative_to_best": rel(learned_val)[ctx],
                    "gain_vs_default": (default - learned_val[ctx]) * (1 if sense == "min" else -1) + 0.0,
                    "relative_to_default": _ratio(default, learned_val[ctx]) if sense == "min"
                    else _ratio(learned_val[ctx], default)})
    blind = [c for c in context if c in data.schema.categorical] if n_ctx >= 2 else []
    return DefaultsTable(pd.DataFrame(per), pd.DataFrame(summary_rows), knobs, context, n_ctx >= 2,
                         max(0, len(order) - max_defaults), blind)


def _ratio(num, den):
    """num / den where both are positive, else NaN: a ratio of a negative score, or one over a best
    of 0, is no share of anything (the worst default read 9.04 "relative to the best")."""
    if isinstance(num, pd.Series) or isinstance(den, pd.Series):
        return (num / den).where((num > 0) & (den > 0))
    return float(num) / float(den) if num > 0 and den > 0 else float("nan")


def _setting_label(knobs, row) -> str:
    return ",".join(f"{k}={_plain(row[k])}" for k in knobs)


def _onehot_lenient(model: Model, frame: pd.DataFrame) -> np.ndarray:
    """Model input for points whose categories the (cross-fitted) model has not seen: all-zero one-hot."""
    prep = model.pipeline.named_steps["prep"]
    df = frame[model.features].copy()
    for f in model.schema.categorical:
        df[f] = df[f].map(_category)
    enc = prep.named_transformers_.get("onehot")
    if enc is not None:
        enc = enc.set_params(handle_unknown="ignore")
    return np.asarray(prep.transform(df), dtype=float)


def unseen_pairs(point: dict[str, Any], runs: pd.DataFrame, knobs: list[str], least: int = 5) -> list[str]:
    """Pairs of the point's settings no run had together, though each was common (in
    ``least`` runs or more): a combination the system may not allow (Apache's Handle=1 never
    came with InMemory=1 in 192 runs), where a model predicts from neither setting's runs
    and no constraint said so. One line each; the search does not leave them out (a
    sweep may simply not have measured them)."""
    names = [k for k in knobs if k in runs and k in point]
    if len(names) < 2:
        return []
    # which runs had each setting, then every pair's runs in one product (pair by pair in pandas took
    # 70 s on 500 knobs)
    had = np.column_stack([(runs[k] == point[k]).to_numpy(dtype=bool, na_value=False) for k in names]).astype(np.int64)
    counts, together = had.sum(axis=0), had.T @ had
    notes = []
    for a, b in itertools.combinations(range(len(names)), 2):
        if counts[a] >= least and counts[b] >= least and not together[a, b]:
            notes.append(f"{names[a]}={point[names[a]]} with {names[b]}={point[names[b]]}: no run had both "
                         f"({int(counts[a])} had the first, {int(counts[b])} the second); the system may not allow "
                         "it, and the prediction is a guess from runs unlike it")
    return notes
