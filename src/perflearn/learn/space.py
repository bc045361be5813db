"""The space a recommendation searches: each knob's candidate values, and which
combinations of them are configurations at all.

The product of every knob's values holds points no one can run. A spec's design
constraints (``threads <= cores``) rule some out, and the stored experiment keeps
them. Data measured elsewhere often encodes one option of several values as one 0/1
column per value, exactly one of them 1 in every run (DeepPerf's x264: ``ref_1``,
``ref_5``, ``ref_9``). Searched freely, a model recommends ``rc_lookahead_20 =
rc_lookahead_40 = 1``, a setting that does not exist (``perflearn decide`` did, on
x264). Such groups are found in the runs (``one_hot_groups``) and searched as one
option each: which of its columns is 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perflearn.errors import UsageError
from perflearn.experiment.expr import Expression
from perflearn.store import Dataset

from .features import _category, one_hot_groups

Axis = tuple[str | tuple[str, ...], list]  # a knob and its values, or a group and its members


@dataclass
class SearchSpace:
    """Candidate ``values`` per knob; ``groups`` of 0/1 knobs of which exactly one is 1;
    ``rules``, expressions every point must satisfy; ``notes`` say what was kept and why;
    ``measured``, the knob settings the runs had (a search too large to be exhaustive
    starts from them as well as from random points)."""

    values: dict[str, list]
    groups: list[tuple[str, ...]] = field(default_factory=list)
    rules: list[Expression] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measured: pd.DataFrame | None = None
    failed: pd.DataFrame | None = None  # settings (knobs, context) every run of which failed: never recommended
    text: frozenset[str] = frozenset()  # the categorical columns among them (compared as text)

    def axes(self, knobs: list[str]) -> list[Axis]:
        """What the search varies, in ``knobs`` order: a knob over its values, a group
        (all of its knobs searched) over which of its members is 1."""
        grouped = {k: g for g in self.groups if all(m in knobs for m in g) for k in g}
        axes: list[Axis] = []
        for k in knobs:
            g = grouped.get(k)
            if g is None:
                axes.append((k, list(self.values[k])))
            elif k == g[0]:
                axes.append((g, list(g)))
        return axes

    def measured_rows(self, axes: list[Axis]) -> list[tuple]:
        """The measured settings as axis values (a group's: the member that is 1)."""
        if self.measured is None or not all(
                all(m in self.measured for m in name) if isinstance(name, tuple) else name in self.measured
                for name, _ in axes):
            return []
        columns = []
        for name, _ in axes:
            if isinstance(name, tuple):
                ones = self.measured[list(name)].to_numpy(dtype=float).argmax(axis=1)
                columns.append([name[i] for i in ones])
            else:
                columns.append(self.measured[name].tolist())
        allowed = [set(values) for _, values in axes]  # a knob the context narrowed keeps fewer
        return [r for r in dict.fromkeys(zip(*columns)) if all(v in a for v, a in zip(r, allowed))]

    def frame(self, axes: list[Axis], rows: list[tuple], context: dict) -> pd.DataFrame:
        """Knob columns for ``rows`` of axis values, with the ``context`` fixed."""
        columns: dict[str, list] = {}
        for j, (name, _) in enumerate(axes):
            picked = [r[j] for r in rows]
            if isinstance(name, tuple):
                for member in name:
                    one, zero = max(self.values[member]), min(self.values[member])
                    columns[member] = [one if p == member else zero for p in picked]
            else:
                columns[name] = picked
        df = pd.DataFrame(columns, index=range(len(rows)))
        for k, v in context.items():
            df[k] = v
        return df

    def allowed(self, frame: pd.DataFrame) -> np.ndarray:
        """Which points satisfy every rule (one that cannot be evaluated there does not)
        and are not a setting every run of which failed."""
        ok = np.ones(len(frame), dtype=bool)
        if self.rules:
            for i, point in enumerate(frame.to_dict("records")):
                ok[i] = all(_holds(rule, point) for rule in self.rules)
        if self.failed is not None and len(self.failed) and all(c in frame for c in self.failed.columns):
            failed = set(self.failed.itertuples(index=False, name=None))
            keys = _as_keys(frame[list(self.failed.columns)], self.text).itertuples(index=False, name=None)
            ok &= ~np.array([r in failed for r in keys], dtype=bool)
        return ok


def search_space(ds: Dataset, knobs: list[str], context: Mapping[str, object] | None = None,
                 max_values: int = 64, any_combination: bool = False, target: str | None = None,
                 measured: list[str] | tuple[str, ...] = ()) -> SearchSpace:
    """Candidate values per knob (the categories, or the measured numeric values: at most
    ``max_values``, quantile-spaced when there are more), the one-hot groups among
    ``knobs`` and the design's constraints over ``knobs`` and the ``context`` (the
    features a recommendation fixes, and their values: a group with members among them
    is narrowed to what they leave); with ``any_combination``, the values alone. The values
    are those of runs that measured ``target`` and every metric of ``measured`` (the
    constraints' too: each metric's model knows only the runs that measured it)."""
    context = dict(context or {})
    frame = ds.ok() if len(ds.ok()) else ds.frame
    for metric in dict.fromkeys([*([target] if target is not None else []), *measured]):
        if metric in frame and frame[metric].notna().any():
            # a CSV's failed run is an empty target (no status column): its settings are no candidates (a
            # category only failed runs had reached the model, which refused it: "not seen in training")
            frame = frame[frame[metric].notna()]
    values: dict[str, list] = {}
    for k in knobs:
        col = frame[k].dropna()
        if ds.kinds.get(k) == "categorical":
            values[k] = sorted(col.map(_category).unique().tolist())
        else:
            vals = np.unique(col.to_numpy(dtype=float))
            if len(vals) > max_values:  # measured values at the quantiles (interpolated, 37.14 threads was offered)
                vals = np.unique(np.quantile(vals, np.linspace(0, 1, max_values), method="nearest"))
            values[k] = vals.tolist()
        if not values[k]:
            raise UsageError(f"knob {k!r} has no measured value to choose from", where=ds.where)
    # as the search's values: categories as text, numbers as floats
    measured = _as_keys(frame[knobs].dropna().drop_duplicates(), _categorical(ds, knobs))
    space = SearchSpace(values, measured=measured.reset_index(drop=True))
    _failed_settings(space, ds, [*knobs, *(c for c in context if c in ds.frame)], target)
    if any_combination:
        return space
    for g in one_hot_groups(frame, [*knobs, *(k for k in context if k in frame)], chosen=list(knobs)):
        _narrow(space, g, context)
    for source in ds.constraints:
        try:
            rule = Expression(source)
        except ValueError:
            continue  # the runner refused such a spec; an older one is not the search's to judge
        free = sorted(rule.names - set(ds.features))
        unsearched = sorted(rule.names & set(ds.knobs) - set(knobs) - set(context))
        if free or unsearched:
            space.notes.append(f"design constraint {source!r} not checked: the search does not set "
                               f"{', '.join(free or unsearched)}")
            continue
        space.rules.append(rule)
        space.notes.append(f"design constraint {source!r} kept")
    return space


def _failed_settings(space: SearchSpace, ds: Dataset, columns: list[str], target: str | None = None) -> None:
    """Keep the settings of ``columns`` that ran only to fail out of the search: the model
    of the other runs predicted one whose every run failed (killed, out of memory), unsaid.
    With ``target``, a run that left it empty failed too: a CSV has no other way to say so
    (its empty cells were recommended unless a status column said "failed")."""
    frame = ds.frame.dropna(subset=columns)
    if not len(frame) or ("status" not in frame and (target is None or target not in frame)):
        return
    ok = frame["status"].eq("ok") if "status" in frame else pd.Series(True, index=frame.index)
    measured = frame[target].notna() if target is not None and target in frame else ok
    text = _categorical(ds, columns)
    keys = _as_keys(frame[columns], text)
    ran_ok = keys.assign(_ok=(ok & measured).to_numpy()).groupby(columns, sort=True)["_ok"].any()
    failed = ran_ok[~ran_ok]
    if not len(failed):
        return
    space.failed, space.text = failed.index.to_frame(index=False), text
    rows = [row if isinstance(row, tuple) else (row,) for row in failed.index[:3]]
    shown = "; ".join(", ".join(f"{c}={v if c in text else plain(np.float64(v))}" for c, v in zip(columns, row))
                      for row in rows)
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    why = "failed" if (ok == measured).all() else f"failed or left {target} empty"
    space.notes.append(f"left out: {len(failed)} setting(s) every run of which {why} ({shown}{more})")


def plain(value):
    """A numpy scalar as Python's, a whole one as an int (8, not 8.0); others as given."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return int(value) if float(value).is_integer() else float(value)
    return value


def _categorical(ds: Dataset, columns: list[str]) -> frozenset[str]:
    return frozenset(c for c in columns if ds.kinds.get(c) == "categorical")


def _as_keys(frame: pd.DataFrame, text: frozenset[str]) -> pd.DataFrame:
    """``frame`` as the search compares values: the ``text`` columns' categories as text,
    the others' numbers as floats."""
    return pd.DataFrame({c: frame[c].map(_category) if c in text else frame[c].astype(float) for c in frame.columns},
                        index=frame.index)


def _narrow(space: SearchSpace, group: tuple[str, ...], context: dict) -> None:
    """Keep a one-hot group in ``space``: whole, or, where the context sets some of its
    members, what is left of it (the others 0 when the context sets one to 1, else one
    of the rest is 1)."""
    given = [m for m in group if m in context]
    free = [m for m in group if m not in context]
    if not given:
        space.groups.append(group)
        space.notes.append(f"one of {', '.join(group)} is 1, as in every run")
        return
    ones = [m for m in given if _number(context[m]) == 1.0]
    bad = [m for m in given if _number(context[m]) not in (0.0, 1.0)]
    if bad or len(ones) > 1 or (not ones and not free):
        said = ", ".join(f"{m}={context[m]}" for m in given)
        raise UsageError(f"the context sets {said}, but in every run exactly one of {', '.join(group)} is 1 "
                         "(--any-combination searches regardless)", where="--context")
    if ones:
        for m in free:
            space.values[m] = [0.0]
        if free:
            space.notes.append(f"{', '.join(free)} {'is' if len(free) == 1 else 'are'} 0: {ones[0]}=1 by the "
                               f"context, and one of {', '.join(group)} is 1 in every run")
    elif len(free) == 1:
        space.values[free[0]] = [1.0]
        space.notes.append(f"{free[0]} is 1: the context sets the rest of {', '.join(group)} to 0, "
                           "and one of them is 1 in every run")
    else:
        space.groups.append(tuple(free))
        space.notes.append(f"one of {', '.join(free)} is 1: the context sets {', '.join(given)} to 0, "
                           f"and one of {', '.join(group)} is 1 in every run")


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _holds(rule: Expression, point: dict) -> bool:
    try:
        verdict = rule(point)
        return isinstance(verdict, (bool, np.bool_)) and bool(verdict)
    except (TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError):
        return False
