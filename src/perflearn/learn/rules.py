"""Rules of thumb read off a depth-limited decision tree (Kunkel et al.).

A regression tree gives, per leaf, the mean of the target and the runs it covers;
with class thresholds (``classes=[25, 75]`` -> slow / avg / fast as in Kunkel's
figure) a classification tree gives the dominant class and its probability.
One-hot columns of categorical knobs read back as ``knob == value`` / ``knob != value``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, export_text

from perflearn.errors import UsageError

from .features import TrainingData
from .models import BinaryScaler, make_pipeline


@dataclass
class Rule:
    conditions: list[str]
    value: float | None  # regression: mean target in the leaf
    label: str | None  # classification: dominant class
    probability: float | None
    samples: int
    unsplit: str = "no split changes it"  # why a rule without conditions holds in every run

    def text(self, target: str, unit: str = "") -> str:
        # a tree that found no split (or classes that never change) has one rule: "in every run", not "if always"
        cond = f"if {' and '.join(self.conditions)} then" if self.conditions else f"in every run ({self.unsplit}),"
        if self.label is not None:
            return f"{cond} {target} is {self.label} (p={self.probability:.2f}, n={self.samples})"
        return f"{cond} {target} ≈ {self.value:.4g}{(' ' + unit) if unit else ''} (n={self.samples})"


@dataclass
class Rules:
    target: str
    rules: list[Rule]
    tree_text: str
    feature_names: list[str]
    class_names: list[str] | None
    tree: object
    r2_or_accuracy: float  # in-sample fit quality of the small tree

    def text(self, unit: str = "") -> str:
        return "\n".join(r.text(self.target, unit) for r in self.rules)

    def plot(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
        from sklearn.tree import plot_tree

        depth = self.tree.get_depth()
        fig, ax = plt.subplots(figsize=(max(8, 3 * 2 ** min(depth, 5) / 2), 2.2 * (depth + 1)))
        plot_tree(self.tree, feature_names=self.feature_names, class_names=self.class_names, filled=True,
                  rounded=True, impurity=False, proportion=False, precision=_digits(self.tree), fontsize=8, ax=ax)
        ax.set_title(f"rules for {self.target}")
        fig.tight_layout()
        fig.savefig(path, dpi=100, format="png")  # exactly ``path`` (without format, no suffix gets ".png" added)
        plt.close(fig)
        return Path(path)


def class_labels(thresholds: list[float]) -> list[str]:
    edges = [f"{t:g}" for t in thresholds]
    out = [f"<={edges[0]}"]
    out += [f"({a},{b}]" for a, b in zip(edges, edges[1:])]
    out.append(f">{edges[-1]}")
    return out


def check_classes(classes: list[float], y: np.ndarray, target: str) -> list[float]:
    """The class thresholds, sorted; one line (UsageError, ``--classes``) when there are none,
    when one is not a finite number (nan made every run one class, ``<=nan``), when one is
    given twice (an empty class) or when every run falls in one class (nothing to tell apart,
    in-sample accuracy 1.000)."""
    if not classes:
        raise UsageError("no class thresholds (give numbers, e.g. 25,75)", where="--classes")
    thresholds = []
    for t in classes:
        try:
            value = float(t)
        except (TypeError, ValueError):
            raise UsageError(f"class thresholds must be numbers, got {t!r}", where="--classes") from None
        if not np.isfinite(value):
            raise UsageError(f"class thresholds must be finite numbers, got {value:g}", where="--classes")
        thresholds.append(value)
    thresholds.sort()
    twice = [a for a, b in zip(thresholds, thresholds[1:]) if a == b]
    if twice:
        raise UsageError(f"threshold {twice[0]:g} is given twice (its class would be empty)", where="--classes")
    cls = np.searchsorted(thresholds, y, side="left")
    if len(np.unique(cls)) < 2:
        raise UsageError(f"every run of {target!r} ({np.min(y):.4g} to {np.max(y):.4g}) falls in one class "
                         f"({class_labels(thresholds)[int(cls[0])]}); give thresholds within that range",
                         where="--classes")
    return thresholds


def tree_rules(data: TrainingData, max_depth: int = 3, classes: list[float] | None = None,
               min_samples_leaf: int = 1, random_state: int = 0) -> Rules:
    """Fit a tree of depth ``max_depth`` and return its leaves as rules."""
    if max_depth < 1:
        raise UsageError(f"depth must be at least 1, got {max_depth}", where="--depth")
    if min_samples_leaf < 1:  # scikit-learn refuses it naming its own parameter (an internal error here)
        raise UsageError(f"a leaf needs at least 1 run, got {min_samples_leaf}", where="--min-leaf")
    if 2 * min_samples_leaf > len(data.y):  # the tree could not split: "in every run (no split changes it)", misread
        raise UsageError(f"no split of {len(data.y)} runs leaves {min_samples_leaf} on each side: at most "
                         f"{len(data.y) // 2}", where="--min-leaf")
    class_names = None
    y = data.y
    if classes is not None:
        thresholds = check_classes(classes, data.y, data.schema.target)
        class_names = class_labels(thresholds)
        y = np.array([class_names[i] for i in np.searchsorted(thresholds, data.y, side="left")])
        tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_samples_leaf, random_state=random_state)
    else:
        tree = DecisionTreeRegressor(max_depth=max_depth, min_samples_leaf=min_samples_leaf, random_state=random_state)
    pipe = make_pipeline(data.schema, tree)
    # a target in a small unit is split as in a larger one (BinaryScaler), its leaves read back in its own
    scale = BinaryScaler().fit(y).scale_ if classes is None else 1.0
    scaled = y * scale if scale != 1.0 else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(data.X, scaled)
    names = list(pipe.named_steps["prep"].get_feature_names_out())
    fitted = pipe.named_steps["model"]
    _thresholds_in_own_units(pipe, names)
    if scale != 1.0:
        fitted.tree_.value[:] /= scale  # views of the tree's own arrays: its predictions and drawing follow
        fitted.tree_.impurity[:] /= scale**2
    if classes is not None:
        class_names = [str(c) for c in fitted.classes_]
    onehot = _onehot_map(data)
    measured = {c: np.unique(pd.to_numeric(data.X[c], errors="coerce").dropna()) for c in data.schema.numeric}
    rules = _leaves(fitted, names, onehot, class_names, measured)
    stopped_by_min_leaf = fitted.tree_.node_count == 1 and min_samples_leaf > 1 and \
        _splits_without_min_leaf(data.schema, tree, data.X, scaled)
    if stopped_by_min_leaf:
        rules[0].unsplit = f"no split that changes it leaves --min-leaf {min_samples_leaf} runs on each side"
    score = float(pipe.score(data.X, y))
    return Rules(data.schema.target, rules, export_text(fitted, feature_names=names, decimals=3), names,
                 class_names, fitted, score)


def _splits_without_min_leaf(schema, tree, X: pd.DataFrame, y: np.ndarray) -> bool:
    """Whether one split of ``tree``'s kind would change the target were leaves allowed one
    run: then --min-leaf, not the data, is what stopped the tree. Session 57's audit: with
    --min-leaf 28 on 60 runs it read "in every run (no split changes it)", though threads
    changed iops 8x."""
    from sklearn.base import clone

    stump = clone(tree).set_params(max_depth=1, min_samples_leaf=1)
    pipe = make_pipeline(schema, stump)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(X, y)
    return pipe.named_steps["model"].tree_.node_count > 1


def _thresholds_in_own_units(pipe, names: list[str]) -> None:
    """A feature the pipeline scaled up for the tree to split it (``GapScaler``: values 1e-9
    s apart) is read back in its own unit: the thresholds divided, the scaler set to 1, so
    that the pipeline predicts as before (a power of two: exactly) and the rules, the
    drawing and the measured values agree."""
    scaler = pipe.named_steps["prep"].named_transformers_.get("num")
    scale = getattr(scaler, "scale_", None)
    if scale is None or np.all(scale == 1.0):
        return
    by_name = dict(zip(names[len(names) - len(scale):], scale))  # the numeric columns come last
    tree = pipe.named_steps["model"].tree_
    for node in range(tree.node_count):
        if tree.children_left[node] != tree.children_right[node]:  # a split, not a leaf
            tree.threshold[node] /= by_name.get(names[tree.feature[node]], 1.0)
    scaler.scale_ = np.ones_like(scale)


def _onehot_map(data: TrainingData) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """Each one-hot column's knob, category, and every category of that knob."""
    out = {}
    for f in data.schema.categorical:
        for c in data.schema.categories[f]:
            out[f"{f}_{c}"] = (f, c, tuple(data.schema.categories[f]))
    return out


def _leaves(tree, names, onehot, class_names, measured: dict[str, np.ndarray]) -> list[Rule]:
    """One rule per leaf, its path's tests merged per feature (``_Path``); ``measured``:
    each numeric feature's values in the training runs. With classes, a subtree whose
    leaves all name one class is one rule: the tree split where the class does not change
    (its impurity fell), and two rules that differ only in a test and say the same thing
    read as if the test mattered (Apache: ``KeepAlive == 1 and Handle == 0 and InMemory ==
    0`` and ``... InMemory == 1``, both ``>1800``, are ``KeepAlive == 1 and Handle == 0``)."""
    t = tree.tree_
    rules: list[Rule] = []

    def one_class(node: int) -> int | None:
        """The class every leaf under ``node`` names, else None."""
        if t.children_left[node] == -1:
            return int(np.argmax(t.value[node][0]))
        left, right = one_class(t.children_left[node]), one_class(t.children_right[node])
        return left if left is not None and left == right else None

    def walk(node: int, path: _Path) -> None:
        if t.children_left[node] == -1 or (class_names is not None and one_class(node) is not None):
            n = int(t.n_node_samples[node])
            if class_names is not None:
                counts = t.value[node][0]
                i = one_class(node)
                rules.append(Rule(path.conditions(), None, class_names[i], float(counts[i] / counts.sum()), n))
            else:
                rules.append(Rule(path.conditions(), float(t.value[node][0][0]), None, None, n))
            return
        name = names[t.feature[node]]
        if name in onehot:
            knob, cat, categories = onehot[name]
            walk(t.children_left[node], path.isnt(knob, cat, categories))
            walk(t.children_right[node], path.equal(knob, cat))
        else:
            walk(t.children_left[node], path.bound(name, high=float(t.threshold[node])))
            walk(t.children_right[node], path.bound(name, low=float(t.threshold[node])))

    walk(0, _Path(measured=measured))
    return rules


class _Path:
    """The tests on the way to a leaf, merged per feature as a reader would state them: a
    numeric feature tested twice is one interval (``5 < bs <= 40``, not ``bs > 5 and bs <= 40``
    or ``bs > 5 and bs > 20``), a knob's ``==`` makes its ``!=`` redundant, and its ``!=``
    tests are one ``not in`` (or ``==`` the one value they leave). An interval that holds one
    measured value is that value (``KeepAlive == 1``, not ``KeepAlive > 0.5``; ``bs == 4096``): the threshold is the
    midpoint the tree split at, not a setting anyone measured. Features keep the order
    the tree first tests them in."""

    def __init__(self, tests: dict | None = None, measured: dict | None = None):
        self.tests = tests or {}  # feature -> ["range", low, high] or ["knob", equal, {not equal}]
        self.measured = measured or {}

    def bound(self, name: str, low: float | None = None, high: float | None = None) -> "_Path":
        _, lo, hi = self.tests.get(name, ("range", None, None))
        lo = low if low is not None and (lo is None or low > lo) else lo
        hi = high if high is not None and (hi is None or high < hi) else hi
        return _Path({**self.tests, name: ("range", lo, hi)}, self.measured)

    def equal(self, knob: str, value: str) -> "_Path":
        return _Path({**self.tests, knob: ("knob", value, frozenset())}, self.measured)

    def isnt(self, knob: str, value: str, categories: tuple[str, ...]) -> "_Path":
        _, eq, ne = self.tests.get(knob, ("knob", None, frozenset()))
        ne = ne | {value}
        left = [c for c in categories if c not in ne]
        if eq is None and len(left) == 1:  # not every other value is the one left: `pattern == rw`, not
            return self.equal(knob, left[0])  # `pattern not in (read, write)` (session 57's audit)
        return _Path({**self.tests, knob: ("knob", eq, ne)}, self.measured)

    def conditions(self) -> list[str]:
        out = []
        for name, (kind, a, b) in self.tests.items():
            if kind == "range" and len(one := self._inside(name, a, b)) == 1:
                out.append(f"{name} == {_value(one[0])}")
            elif kind == "range":
                low, high = self._bounds(name, a, b)
                out.append(f"{low} {name} {high}" if low and high else f"{name} {high}" if high
                           else f"{name} {_flip(low)}")
            elif a is not None:
                out.append(f"{name} == {a}")
            else:
                out.append(f"{name} != {next(iter(b))}" if len(b) == 1
                           else f"{name} not in ({', '.join(sorted(map(str, b)))})")
        return out

    def _bounds(self, name: str, low: float | None, high: float | None) -> tuple[str, str]:
        """The interval's two sides as text (``"1.5 <"``, ``"<= 3.5"``; empty when open).
        A feature measured at integers only is tested at integers (``2 <= t <= 3``, not
        ``1.5 < t <= 3.5``): the same runs on each side, and the reader's settings. A
        threshold that is itself an integer stays, in full (``bs > 34816``, not ``bs >= 34817``
        or ``bs > 3.482e+04``)."""
        values = self.measured.get(name, np.array([]))
        whole = len(values) > 0 and bool(np.all(np.mod(values, 1) == 0))
        if whole:  # in full: 34816, not 3.482e+04
            lo = "" if low is None else f"{_value(np.floor(low) + 1)} <=" if low % 1 else f"{_value(low)} <"
            hi = "" if high is None else f"<= {_value(np.floor(high))}"
        else:
            lo = "" if low is None else f"{_threshold(low, values)} <"
            hi = "" if high is None else f"<= {_threshold(high, values)}"
        return lo, hi

    def _inside(self, name: str, low: float | None, high: float | None) -> np.ndarray:
        values = self.measured.get(name, np.array([]))
        return values[((values > low) if low is not None else True) & ((values <= high) if high is not None else True)]


def _digits(tree) -> int:
    """Decimals for the drawn tree: 3 of the largest value's significant digits (with 3
    decimals, a target of 2e-08 s drew "value = 0.0" in every box)."""
    values = np.abs(tree.tree_.value[np.isfinite(tree.tree_.value)])
    largest = float(values.max()) if values.size and values.max() > 0 else 1.0
    return int(min(15, max(3, 2 - np.floor(np.log10(largest)))))


def _threshold(t: float, values: np.ndarray) -> str:
    """A split as few digits as put every measured value on its side (at least 4):
    2400.5 rounded to 4 digits read "freq <= 2400" (no run) and "2401 < freq <= 2401"."""
    below = values <= t
    for digits in range(4, 18):
        text = f"{t:.{digits}g}"
        if np.array_equal(values <= float(text), below):
            return text
    return repr(float(t))


def _flip(low: str) -> str:
    """``"2 <="`` as it reads after the name: ``">= 2"``."""
    number, op = low.rsplit(" ", 1)
    return f"{'>=' if op == '<=' else '>'} {number}"


def _value(x: float) -> str:
    """A measured setting as it was given: 4096, not 4096.0 or 4.096e+03."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.6g}"


def rules_frame(rules: Rules) -> pd.DataFrame:
    return pd.DataFrame([{"if": " and ".join(r.conditions) or "always",
                          "then": r.label if r.label is not None else r.value,
                          "p": r.probability, "n": r.samples} for r in rules.rules])
