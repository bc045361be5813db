"""From measured runs to a decision in one call (what `make demo` prints after a sweep).

    from perflearn.learn.decide import decide
    d = decide(dataset, "runtime_s", sense="min")
    print("\\n".join(d.lines()))

Fits a model (``auto`` by default), reports its cross-validated error, the rules of
a depth-3 tree, the recommended settings with their predicted value, and the gain
over the best system-wide default (Kunkel's table) when the data has context
columns, else over the best and median measured point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perflearn.errors import UsageError
from perflearn.store import Dataset

from .features import given_value, training_data
from .model import Model, fit_data
from .recommend import (DefaultsTable, NoSharedDefault, Recommendation, beyond_the_runs, defaults_table,
                        never_measured, recommend, runs_with, shown_value)
from .rules import Rules, tree_rules
from .space import search_space


@dataclass
class Decision:
    target: str
    sense: str
    model: Model
    rules: Rules
    recommendation: Recommendation
    defaults: DefaultsTable | None
    measured_best: float
    measured_median: float
    context: dict = field(default_factory=dict)  # the context recommended for
    taken: list[str] = field(default_factory=list)  # its columns not given: the most common, taken for the user
    tied: int = 0  # contexts measured as often as the one taken (a tie is broken by order, and said)
    warnings: list[str] = field(default_factory=list)  # the recommended point lies beyond the runs
    table_family: str = ""  # the model family of the defaults table's learned choices, where not the model's
    with_given: bool = True  # the context taken is the most common with what was given (some run had that)
    defaults_skipped: str = ""  # why there is no defaults table though the data has context columns
    median: bool = False  # a tie among the values of one numeric context: the median one was taken

    def lines(self) -> list[str]:
        m = self.model
        cv = m.cv
        out = [
            f"model of {self.target}: {m.chosen} on {m.n_train} runs "
            f"({m.n_excluded} left out); {cv.get('folds')}-fold CV MRE {cv.get('mre', float('nan')):.2f}%, "
            f"R² {cv.get('r2', float('nan')):.3f}"
            # auto's choice was scored on these very folds, as fit says (12 folds: 22.4 %; evaluate's 28.9 %)
            + (" (optimistic: auto chose on these folds; `perflearn evaluate` refits the choice in each split)"
               if cv.get("candidates") else ""),
            f"rules ({'in-sample R²'} {self.rules.r2_or_accuracy:.2f}):",
            *("  " + r.text(self.target) for r in self.rules.rules),
        ]
        rec = self.recommendation
        point = ", ".join(f"{k}={v}" for k, v in rec.point.items() if k not in self.context)
        pred = rec.predicted[self.target]
        where = ""
        if self.context:
            chosen = ("the most common context" if self.tied <= 1 else
                      f"the {'lower ' * (self.tied % 2 == 0)}median of {self.tied} contexts measured as often"
                      if self.median else
                      f"the first of {self.tied} contexts measured as often")
            given = [f"{k}={shown_value(v)}" for k, v in self.context.items() if k not in self.taken]
            if given and self.taken:
                chosen = f"{', '.join(self.taken)}: {chosen}" + \
                    (f" with {', '.join(given)}" if self.with_given else f" of all runs (no run had {', '.join(given)})")
            where = " for " + ", ".join(f"{k}={shown_value(v)}" for k, v in self.context.items()) + (
                f" ({chosen}; --context NAME=VALUE for another)" if self.taken else "")
        out.append(f"recommended ({'minimise' if self.sense == 'min' else 'maximise'} {self.target}){where}: {point} "
                   f"-> predicted {pred:.4g}")
        out.extend(f"  search: {note}" for note in rec.notes)
        if self.defaults is not None:
            s = self.defaults.summary.set_index("choice")
            learned = s.iloc[0]
            default = s[s.index.str.startswith("default ")].iloc[0]
            gain = (default["mean"] - learned["mean"]) * (1 if self.sense == "min" else -1)
            by = f" (a {'random forest' if self.table_family == 'rf' else self.table_family}'s, cross-fitted by context)" \
                if self.table_family else ""
            out.append(f"learned choices per context{by} vs best single default ({default.name[8:]}): "
                       f"mean {learned['mean']:.4g} vs {default['mean']:.4g}, gain {_gain(gain, default['mean'])}, "
                       f"loss to best measured {learned['loss']:.4g}")
            if self.defaults.blind_note():  # as recommend --table says it
                out.append(f"  {self.defaults.blind_note()}")
        elif self.defaults_skipped:
            out.append(self.defaults_skipped)
        else:
            sign = 1 if self.sense == "min" else -1
            out.append(f"measured: best {self.measured_best:.4g}, median {self.measured_median:.4g}; predicted gain "
                       f"over the median point {_gain(sign * (self.measured_median - pred), self.measured_median)}")
        return out


def decide(ds: Dataset, target: str, sense: str = "min", family: str = "auto", context: dict | None = None,
           random_state: int = 0, any_combination: bool = False) -> Decision:
    """``any_combination``: search every combination of the knobs' values (``space.search_space``).
    ``context``: NAME -> value, a value given as text read as the CLI reads ``--context``."""
    if sense not in ("min", "max"):  # before the fit, which can take minutes (it was refused after it)
        raise UsageError(f"objective sense must be min or max, got {sense!r}", where="sense")
    fixed = _given_context(context or {}, ds)
    data = training_data(ds, target)
    model = fit_data(data, family, random_state=random_state, experiment=ds.experiment)
    rules = tree_rules(data, max_depth=3)
    taken = [c for c in ds.context if c not in fixed]
    tied, median = 0, False
    match = runs_with(fixed, data.X)
    # a context no run had: the recommendation is a prediction for a situation never measured, said
    never = never_measured(fixed, data.X)
    unmeasured = [never + (f" ({', '.join(taken)}: the most common of all runs)" if taken else "")] if never else []
    if taken:  # recommend for the most common context (with what was given; of a tie the first, or one numeric
        # context's median, and say so)
        sizes = data.X[match if match.any() else slice(None)].groupby(taken).size()
        top = sizes.idxmax()
        tied = int((sizes == sizes.max()).sum())
        if tied > 1 and len(taken) == 1 and ds.kinds.get(taken[0]) != "categorical":
            # a measured counter (cpu_time) is every run's own: "the first" was the lowest, a 1-MiB run's, paired
            # with settings that never ran near it (session 60's audit); the middle one is the typical situation
            level = sizes[sizes == sizes.max()].index.to_numpy()
            top, median = level[(len(level) - 1) // 2], True
        fixed.update(zip(taken, top if isinstance(top, tuple) else (top,)))
    space = search_space(ds, [f for f in model.features if f not in fixed], fixed,
                         any_combination=any_combination, target=target)  # as recommend: empty-target settings out
    rec = recommend({target: model}, target, sense, space, fixed, seed=random_state)
    # the point beyond the runs (a context not measured, settings never together): said, as recommend says it
    used = [f for f in model.features if f in rec.point]
    warnings = [*unmeasured, *beyond_the_runs(model, rec.point, rec.predicted, ds.ok(), used, ds.context)]
    # auto for every context's cross-fit would refit its whole search per context: the table's choices are a forest's
    table_family = "rf" if family == "auto" else family
    table, skipped = _defaults(ds, target, sense, table_family, random_state)
    means = data.rows.groupby("point_id")[target].mean().to_numpy()
    best = float(np.min(means) if sense == "min" else np.max(means))
    return Decision(target, sense, model, rules, rec, table, best, float(np.median(means)), fixed, taken, tied,
                    warnings, table_family if family == "auto" else "", bool(match.any()), skipped, median)


def _defaults(ds: Dataset, target: str, sense: str, family: str, random_state: int) -> tuple[DefaultsTable | None, str]:
    """Kunkel's table where the data has context columns, else None; and, when it cannot be
    made, the line that says why (no setting measured in every context: decide ended with
    exit 2 there, its model, rules and recommendation lost, session 57's audit)."""
    if not ds.context:
        return None, ""
    try:
        return defaults_table(ds, target, sense, family=family, random_state=random_state), ""
    except NoSharedDefault as exc:
        return None, exc.line()


def _given_context(context: dict, ds: Dataset) -> dict:
    """The context given, each name a context column of ``ds`` (refused before any fit), each
    value given as text read as the CLI reads ``--context hole=4``: ``{"hole": "4"}`` matched
    no run of the numeric hole and was warned "a context never measured" (session 57's audit)."""
    for k in context:
        if k not in ds.context:
            raise UsageError(f"{k!r} is no context column (context: {', '.join(ds.context) or 'none'})", where="--context")
    return {k: given_value(v) if isinstance(v, str) else v for k, v in context.items()}


def _gain(gain: float, reference: float) -> str:
    """A gain and its share of ``reference``, one sign for both (a loss is negative in
    both), and no "-0" where nothing was gained."""
    gain += 0.0  # -0.0 + 0.0 is 0.0
    if not reference or not np.isfinite(reference):  # no share of 0 (it printed "+nan%")
        return f"{gain:.4g}"
    share = gain / abs(reference) * 100
    return f"{gain:.4g} ({share:+.1f}%)" if round(share, 1) else f"{gain:.4g} (0.0%)"
