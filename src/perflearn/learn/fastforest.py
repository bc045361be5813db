"""Compiled prediction for fitted scikit-learn regression forests (numba), exact to scikit-learn.

A forest is flattened once into a few arrays (feature, threshold, children, value per
node; cached per forest object) and walked by a small numba kernel: trees outer, rows
inner, eight rows walked in step so that their dependent loads overlap (a walk is a
chain of dependent loads, and each step picks the child without a branch); row chunks go
to at most two threads (the kernel releases the GIL).

Exactness: scikit-learn compares ``float32(x) <= threshold`` with a float64 threshold.
For a float32 ``x`` that is the same test as ``x <= t32`` where ``t32`` is the largest
float32 not above the threshold, which the kernel uses. Leaf values are summed in tree
order and divided by the number of trees, as ``RandomForestRegressor.predict`` does, so
the mean is bitwise the same. The spread (std across trees) uses Welford's update.

Import this module lazily (numba's import costs ~0.5-1 s); kernels compile on first call
(1-3 s) and are cached on disk (``__pycache__`` beside this file, or numba's user cache
when that is read-only); a later process loads them in ~0.3 s. When numba is absent or cannot
compile, or the input is not plain (NaN or inf, sparse, multi-output), the functions here
return None and the caller takes its own path.
"""

from __future__ import annotations

import os
import warnings
import weakref
from dataclasses import dataclass

import numpy as np

# two threads pay off above this many (row, tree) walks (and only when both cores are free)
THREADS_FROM = 200_000


@dataclass(frozen=True)
class Flat:
    """A forest as flat node arrays; leaves loop onto themselves."""

    feature: np.ndarray  # int32, split column (0 at leaves)
    threshold: np.ndarray  # float32, largest float32 <= the split threshold (+inf at leaves)
    child: np.ndarray  # int32, 2 per node: left, right (a leaf's are itself)
    value: np.ndarray  # float64, node value (used at leaves)
    root: np.ndarray  # int32, first node of each tree
    n_features: int


_FLAT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_POOL = None  # (pid, executor): a forked child makes its own
_FAILED: str | None = None  # why the compiled path cannot run here
_WARNED = False

try:
    import numba
except ImportError:
    numba = None
    _FAILED = "numba is not installed"
except Exception as exc:  # e.g. a numba built against another numpy
    numba = None
    _FAILED = f"numba does not import ({type(exc).__name__}: {exc})"


def unavailable() -> str | None:
    """Why the compiled path cannot run here, or None when it can."""
    return _FAILED


def flatten(forest) -> Flat | None:
    """The flat arrays of a fitted single-output forest (cached per forest object), or None."""
    trees = getattr(forest, "estimators_", None)
    if not trees or getattr(forest, "n_outputs_", 1) != 1:
        return None
    hit = _FLAT.get(forest)
    if hit is not None and hit[0] is trees:
        return hit[1]
    feats, thrs, kids, vals, roots = [], [], [], [], []
    off = 0
    for est in trees:
        t = est.tree_
        n = t.node_count
        leaf = t.children_left < 0
        idx = np.arange(n)
        roots.append(off)
        feats.append(np.where(leaf, 0, t.feature))
        thrs.append(np.where(leaf, np.inf, t.threshold))
        kids.append(np.stack([np.where(leaf, idx, t.children_left), np.where(leaf, idx, t.children_right)], 1) + off)
        vals.append(t.value[:, 0, 0])
        off += n
    thr64 = np.concatenate(thrs)
    thr32 = thr64.astype(np.float32)
    up = thr32.astype(np.float64) > thr64  # rounded up: step down to the float32 below
    thr32[up] = np.nextafter(thr32[up], np.float32(-np.inf))
    flat = Flat(
        feature=np.concatenate(feats).astype(np.int32),
        threshold=thr32,
        child=np.ascontiguousarray(np.concatenate(kids), dtype=np.int32).ravel(),
        value=np.ascontiguousarray(np.concatenate(vals), dtype=np.float64),
        root=np.asarray(roots, dtype=np.int32),
        n_features=int(forest.n_features_in_),
    )
    _FLAT[forest] = (trees, flat)
    return flat


def predict(forest, X, threads: int | None = None) -> np.ndarray | None:
    """``forest.predict(X)``, bitwise; None when the compiled path does not apply."""
    got = _run(forest, X, "mean", threads)
    return None if got is None else got[0]


def mean_std(forest, X, threads: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(mean, std across trees) per row; the mean bitwise ``forest.predict(X)``. None when not applicable."""
    return _run(forest, X, "moments", threads)


def members(forest, X, threads: int | None = None) -> np.ndarray | None:
    """Per-tree predictions, shape (n_trees, n_rows), exactly as each tree predicts; or None."""
    got = _run(forest, X, "members", threads)
    return None if got is None else got[0]


def _run(forest, X, mode: str, threads: int | None):
    if _FAILED is not None:
        _warn_once()
        return None
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        return None
    flat = flatten(forest)
    if flat is None or X.shape[1] != flat.n_features:
        return None
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    if not np.isfinite(X32).all():  # NaN: scikit-learn routes it per node; inf: it refuses. Leave both to it.
        return None
    n, n_trees = X32.shape[0], len(flat.root)
    args = (X32, flat.feature, flat.threshold, flat.child, flat.value, flat.root)
    if mode == "members":
        outs = (np.empty((n_trees, n)),)
    elif mode == "moments":
        outs = (np.zeros(n), np.zeros(n), np.zeros(n))  # sum, running mean, M2
    else:
        outs = (np.zeros(n),)
    kernel = {"mean": _mean, "moments": _moments, "members": _members}[mode]
    workers = threads if threads is not None else (2 if n * n_trees >= THREADS_FROM else 1)
    workers = max(1, min(workers, 2, os.cpu_count() or 1, n))
    try:
        if workers == 1:
            kernel(*args, 0, n, *outs)
        else:
            bounds = np.linspace(0, n, workers + 1).astype(int)
            list(_pool().map(lambda b: kernel(*args, int(b[0]), int(b[1]), *outs), zip(bounds[:-1], bounds[1:])))
    except Exception as exc:  # a numba/LLVM failure at first call: say so once, then use the slow path
        _give_up(exc)
        return None
    if mode == "members":
        return outs
    if mode == "moments":
        return outs[0] / n_trees, np.sqrt(outs[2] / n_trees)
    return (outs[0] / n_trees,)


def _give_up(exc: BaseException) -> None:
    global _FAILED
    first = str(exc).splitlines()[0] if str(exc) else ""
    _FAILED = f"numba failed ({type(exc).__name__}: {first})"
    _warn_once()


def _warn_once() -> None:
    global _WARNED
    if not _WARNED:
        _WARNED = True
        warnings.warn(f"perflearn: {_FAILED}; forests predict through scikit-learn's trees (slower)",
                      RuntimeWarning, stacklevel=4)


def _pool():
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        from concurrent.futures import ThreadPoolExecutor

        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="perflearn-forest"))
    return _POOL[1]


# -- kernels (module level, so numba can cache them on disk) ------------------------------

if numba is not None:
    _jit = numba.njit(nogil=True, cache=True)
    _inline = numba.njit(nogil=True, cache=True, inline="always")
else:  # never called: _run returns None first

    def _jit(f):
        return f

    _inline = _jit


@_inline
def _step(X, i, a, feature, threshold, child):
    # right when not (x <= t); a leaf (t = +inf, both children itself) stays put
    return child[2 * a + (X[i, feature[a]] > threshold[a])]


@_inline
def _walk(X, i, root, feature, threshold, child):
    a = root
    while True:
        b = _step(X, i, a, feature, threshold, child)
        if b == a:
            return a
        a = b


@_inline
def _walk8(X, i, root, feature, threshold, child):
    """Leaves of rows i..i+7, walked in step so that their memory loads overlap
    (8 measured best here: 4 is ~40% slower, 16 runs out of registers)."""
    a = b = c = d = e = f = g = h = root
    while True:
        a2 = _step(X, i, a, feature, threshold, child)
        b2 = _step(X, i + 1, b, feature, threshold, child)
        c2 = _step(X, i + 2, c, feature, threshold, child)
        d2 = _step(X, i + 3, d, feature, threshold, child)
        e2 = _step(X, i + 4, e, feature, threshold, child)
        f2 = _step(X, i + 5, f, feature, threshold, child)
        g2 = _step(X, i + 6, g, feature, threshold, child)
        h2 = _step(X, i + 7, h, feature, threshold, child)
        if a2 == a and b2 == b and c2 == c and d2 == d and e2 == e and f2 == f and g2 == g and h2 == h:
            return a, b, c, d, e, f, g, h
        a, b, c, d, e, f, g, h = a2, b2, c2, d2, e2, f2, g2, h2


@_jit
def _mean(X, feature, threshold, child, value, root, lo, hi, out):
    """out[i] += value of each tree's leaf, trees in order (rows lo..hi-1)."""
    for t in range(root.shape[0]):
        r = root[t]
        i = lo
        while i + 8 <= hi:
            leaves = _walk8(X, i, r, feature, threshold, child)
            for j in range(8):
                out[i + j] += value[leaves[j]]
            i += 8
        while i < hi:
            out[i] += value[_walk(X, i, r, feature, threshold, child)]
            i += 1


@_inline
def _welford(k, v, i, s, m, m2):
    s[i] += v
    delta = v - m[i]
    m[i] += delta / k
    m2[i] += delta * (v - m[i])


@_jit
def _moments(X, feature, threshold, child, value, root, lo, hi, s, m, m2):
    """Sum (in tree order), running mean and sum of squared deviations of the trees' values."""
    for t in range(root.shape[0]):
        r = root[t]
        k = t + 1.0
        i = lo
        while i + 8 <= hi:
            leaves = _walk8(X, i, r, feature, threshold, child)
            for j in range(8):
                _welford(k, value[leaves[j]], i + j, s, m, m2)
            i += 8
        while i < hi:
            _welford(k, value[_walk(X, i, r, feature, threshold, child)], i, s, m, m2)
            i += 1


@_jit
def _members(X, feature, threshold, child, value, root, lo, hi, out):
    """out[t, i] = value of tree t's leaf for row i."""
    for t in range(root.shape[0]):
        r = root[t]
        i = lo
        while i + 8 <= hi:
            leaves = _walk8(X, i, r, feature, threshold, child)
            for j in range(8):
                out[t, i + j] = value[leaves[j]]
            i += 8
        while i < hi:
            out[t, i] = value[_walk(X, i, r, feature, threshold, child)]
            i += 1
