"""The kneedle method (Satopää et al., ICDCS-W 2011) for any curve.

Heimdall sets its QoS target at the knee of tail latency vs load; NESCAT picks
the number of clusters at the elbow of k-means inertia vs k. Both are the same
question: where does a curve bend most.

Kneedle, offline: normalise x and y to [0, 1]; measure how far each point lies
from the straight line joining the ends (on the side the curve bends to); the knee
is the local maximum of that difference that is followed by a drop below the
threshold ``max - S * mean(step of x)``. ``S`` (sensitivity) trades early
detection against robustness; 1 is the authors' default.

    from perflearn.learn.knee import find_knee
    k = find_knee(load, p95)          # convex increasing: the load where latency takes off
    k.x, k.y, k.index
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perflearn.errors import UsageError


@dataclass(frozen=True)
class Knee:
    # position among the distinct x values, sorted, of the points with finite x and y (repeats of an x are one
    # point): not a row of the input (session 57's audit: documented as one). Callers (load_knee,
    # knee_before_jump) index the distinct loads with it.
    index: int
    x: float
    y: float
    curve: str  # "concave" | "convex"
    direction: str  # "increasing" | "decreasing"
    strength: float  # the normalised difference at the knee, in (0, 1]


def _detect(xn: np.ndarray, yn: np.ndarray) -> tuple[str, str]:
    direction = "increasing" if yn[-1] >= yn[0] else "decreasing"
    chord = xn if direction == "increasing" else 1 - xn
    above = float(np.trapezoid(yn - chord, xn)) if hasattr(np, "trapezoid") else float(np.trapz(yn - chord, xn))
    return ("concave" if above > 0 else "convex"), direction


def difference_curve(x, y, curve: str = "auto", direction: str = "auto"):
    """Normalised x, and the kneedle difference curve (larger = more bent), plus the shape used."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xn = (x - x.min()) / np.ptp(x)
    yn = (y - y.min()) / np.ptp(y)
    c, d = _detect(xn, yn)
    curve = c if curve == "auto" else curve
    direction = d if direction == "auto" else direction
    if direction == "increasing":
        diff = yn - xn if curve == "concave" else xn - yn
    else:
        diff = yn - (1 - xn) if curve == "concave" else (1 - xn) - yn
    return xn, diff, curve, direction


def find_knee(x, y, *, curve: str = "auto", direction: str = "auto", sensitivity: float = 1.0,
              where: str = "curve") -> Knee | None:
    """The knee (or elbow) of y(x), or None when the curve does not bend.

    ``curve``: ``concave``, ``convex`` or ``auto`` (from which side of the chord the
    curve lies on); ``direction``: ``increasing``, ``decreasing`` or ``auto``.
    Points are sorted by x; repeated x values are averaged.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise UsageError(f"x and y differ in length ({len(x)} vs {len(y)})", where=where)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if curve not in ("auto", "concave", "convex"):
        raise UsageError(f"curve must be concave, convex or auto, got {curve!r}", where=where)
    if direction not in ("auto", "increasing", "decreasing"):
        raise UsageError(f"direction must be increasing, decreasing or auto, got {direction!r}", where=where)
    if not sensitivity >= 0:  # a negative one took the first local maximum, however slight
        raise UsageError(f"sensitivity must be 0 or more (kneedle's S), got {sensitivity:g}", where=where)
    ux, inv = np.unique(x, return_inverse=True)
    uy = np.bincount(inv, weights=y) / np.bincount(inv)
    if len(ux) < 3:
        raise UsageError(f"a knee needs at least 3 distinct x values, got {len(ux)}", where=where)
    if np.ptp(uy) == 0:
        return None
    xn, diff, curve, direction = difference_curve(ux, uy, curve, direction)
    threshold_step = sensitivity * float(np.mean(np.diff(xn)))
    # local maxima of the difference curve, in x order; the first one confirmed by a drop wins
    candidates = [i for i in range(1, len(diff) - 1) if diff[i] >= diff[i - 1] and diff[i] > diff[i + 1]]
    for i in candidates:
        if diff[i] <= 0:
            continue
        threshold = diff[i] - threshold_step
        later = diff[i + 1:]
        # stop at a higher local maximum: that one is the more prominent knee
        for j, v in enumerate(later, start=i + 1):
            if v > diff[i]:
                break
            if v < threshold:
                return Knee(i, float(ux[i]), float(uy[i]), curve, direction, float(diff[i]))
    return None


def _median_curve(load, latency) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct loads and the median latency at each (NaN dropped): the median of
    repeats, as ``perflearn knee`` takes them (the mean here put one sweep's knee at 125.4
    where the CLI said 121.7; one repeat's tail spike moves a mean)."""
    x = np.asarray(load, dtype=float).ravel()
    y = np.asarray(latency, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    ux, inv = np.unique(x[ok], return_inverse=True)
    order = np.lexsort((y[ok], inv))  # by load, then latency: each load's median from its sorted run
    counts = np.bincount(inv, minlength=len(ux))
    start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ys = y[ok][order]
    return ux, (ys[start + (counts - 1) // 2] + ys[start + counts // 2]) / 2


def load_knee(load, latency, *, where: str = "curve") -> Knee | None:
    """The knee of a load-latency curve, as a QoS target is set from it (Heimdall 4.1.3).

    Measured curves are not the convex, increasing shape kneedle assumes: at low load
    latency often *falls* with load (idle CPUs wake up slowly, interrupts are coalesced),
    and repetitions are noisy. So the curve is taken from its lowest latency on and
    replaced by its monotone (isotonic) fit before kneedle looks for the knee; the knee's
    latency is the fitted one there. Returns None when the latency never turns up.
    """
    from sklearn.isotonic import IsotonicRegression

    ux, uy = _median_curve(load, latency)
    if len(ux) < 3:
        raise UsageError(f"a knee needs at least 3 distinct loads, got {len(ux)}", where=where)
    start = int(np.argmin(uy))
    kept = np.flatnonzero(~_noisy(uy))  # a latency that comes back down is no saturation: out of the fit
    kept = kept[kept >= start]
    ux, uy = ux[kept], uy[kept]
    if len(ux) < 3:
        return None  # the lowest latency is at (or next to) the highest load: no knee measured
    fitted = IsotonicRegression(increasing=True).fit_transform(ux, uy)
    knee = find_knee(ux, fitted, curve="convex", direction="increasing", where=where)
    if knee is None:
        return None
    return Knee(int(kept[knee.index]), knee.x, knee.y, knee.curve, knee.direction, knee.strength)


def _noisy(uy: np.ndarray) -> np.ndarray:
    """Loads (after the lowest latency) whose latency is ``JUMP`` times the last load's kept
    or more, and that a later load's latency comes back down from by as much: a noisy load
    (a slow host in its repeats), not saturation. In the isotonic fit one such point
    became a plateau up to the loads past it: 900 µs at 14 000 req/s amid 100 µs up to
    30 000 pooled 14 000-30 000 at 189 µs, and kneedle put the knee at 12 000, not 30 000."""
    noisy = np.zeros(len(uy), dtype=bool)
    kept = None
    for i in range(int(np.argmin(uy)), len(uy)):
        if kept is not None and uy[kept] > 0 and i + 1 < len(uy) and uy[i] >= JUMP * uy[kept] \
                and uy[i + 1:].min() * JUMP <= uy[i]:
            noisy[i] = True
        else:
            kept = i
    return noisy


def noisy_loads(load, latency) -> list[str]:
    """What ``load_knee`` left out as noisy, one sentence each."""
    ux, uy = _median_curve(load, latency)
    return [f"load {ux[i]:g} left out of the knee: its latency {uy[i]:g} comes back down at the loads after it "
            "(a noisy load, not saturation)" for i in np.flatnonzero(_noisy(uy))]


JUMP = 3.0  # latency this many times the previous load's: saturation began there


def _first_jump(ux: np.ndarray, uy: np.ndarray, upto: int) -> int | None:
    """Index of the first load, after the lowest latency and at or below ``upto``, from
    which latency stays ``JUMP`` times the previous load's or more up to ``upto`` (None
    when there is none). Saturation does not end as the load grows: a jump that latency
    comes back down from is a noisy load, not saturation. Live (session 41), two of three
    runs at 20 000 req/s met a slow host, their median 11.6 times the 5 000 point's, and
    40 000 came back to 110 µs: counted as a jump, it moved the knee to 5 000 req/s."""
    start = int(np.argmin(uy))  # as load_knee: the curve from its lowest latency on
    for i in range(start + 1, upto + 1):
        if uy[i - 1] > 0 and uy[i:upto + 1].min() / uy[i - 1] >= JUMP:
            return i
    return None


def knee_doubts(load, latency, knee: Knee) -> list[str]:
    """Why a load knee may be a poor QoS anchor, one sentence each (empty when none): a
    jump of latency by ``JUMP`` or more between two consecutive loads at or below it, that
    lasts up to it.

    Kneedle finds the point of largest curvature; on a sweep that runs into
    saturation with loads far apart, that point can lie in saturation, past the jump
    (measured here: a knee at 140k req/s and 8.6 ms, after 0.63 ms at 100k and 7.6 ms
    at 120k), and the target set from it is no QoS at all. (Kneedle never
    picks the last load, so a knee always has a measured load above it.)
    """
    ux, uy = _median_curve(load, latency)
    k = int(np.searchsorted(ux, knee.x))
    i = _first_jump(ux, uy, k)
    if i is None:
        return []
    where = "to the knee" if i == k else f"below the knee ({ux[k]:g})"
    return [f"latency jumps {uy[i] / uy[i - 1]:.1f}x from load {ux[i - 1]:g} to {ux[i]:g}, {where}: the knee "
            f"may already be saturated; measure loads between {ux[i - 1]:g} and {ux[i]:g}, or take the load "
            f"before the jump (--before-jump)"]


def knee_before_jump(load, latency, knee: Knee) -> Knee:
    """The knee moved to the last load before a saturation jump at or below it (itself
    when there is none). Heimdall sets the maximum load at 95 % of the knee's because
    "the latency is unstable at 100 %": a knee already past the jump puts that maximum
    in saturation, where a service at its best configuration has no headroom left; the
    last load before the jump is where latency starts to take off in a sweep too coarse
    to show the bend."""
    ux, uy = _median_curve(load, latency)
    k = int(np.searchsorted(ux, knee.x))
    i = _first_jump(ux, uy, k)
    if i is None:
        return knee
    return Knee(i - 1, float(ux[i - 1]), float(uy[i - 1]), knee.curve, knee.direction, knee.strength)
