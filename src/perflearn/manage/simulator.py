"""A simulated latency-critical server, to compare policies reproducibly at any scale.

Requests arrive as a Poisson stream at the load of the interval and are served
first-come first-served by ``cores`` servers, each at ``mu_max * level`` requests/s
with exponential service times (an M/M/c queue). The 95th/99th percentile of the
response time comes from the M/M/c response-time distribution (Erlang C waiting,
then service); overload is carried across intervals as a backlog that drains at the
spare rate, each request waiting for the queue it found. A base network delay and
multiplicative noise make it look measured.
``calibrate`` fits ``mu_max`` and the base delay to a load sweep of the real service.
A ``SlowHost`` makes some intervals run on a slower host, as a virtual machine's do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq

from .config import Configuration


@lru_cache(maxsize=4096)  # a quantile's root search asks the same (c, a) at every step
def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with offered load a = λ/μ < c."""
    term, total = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c / (1 - a / c)
    return last / (total + last)


def response_tail(t: float, c: int, lam: float, mu: float) -> float:
    """P(response time > t) in an M/M/c queue (Erlang C waiting, then exponential service)."""
    if t <= 0:
        return 1.0
    if lam <= 0:
        return math.exp(-mu * t)
    wait = erlang_c(c, lam / mu)
    theta = c * mu - lam
    if abs(theta - mu) < 1e-9 * mu:
        waited = math.exp(-mu * t) * (1 + mu * t)
    else:
        waited = (mu * math.exp(-theta * t) - theta * math.exp(-mu * t)) / (mu - theta)
    return (1 - wait) * math.exp(-mu * t) + wait * waited


def response_quantile(q: float, c: int, lam: float, mu: float) -> float:
    """q-quantile of the M/M/c response time (seconds); inf when the queue is unstable."""
    if lam <= 0:
        return -math.log(1 - q) / mu
    if lam / mu >= c:
        return math.inf
    high = 1.0 / mu
    while response_tail(high, c, lam, mu) > 1 - q:
        high *= 2
    return brentq(lambda t: response_tail(t, c, lam, mu) - (1 - q), 0.0, high)


# This project's 2-vCPU VM, 57 live rounds (sessions 30-41; bench/manage_slow_host.py): a
# slow interval (host-speed probe 1.3x its fastest or more) followed a slow one with a
# lag-1 correlation of about 0.3 whatever the share of slow intervals (6-88 % a round).
# At the maximum configuration (static, settled, 8-30k req/s) a slow interval's CPU time
# per request was 1.09-1.10 times a fast one's, its p95 1.13-1.26 times (median) and more
# spread: the standard deviation of log p95 0.32-0.43 against 0.18-0.21, so it missed
# the target at loads the maximum carries easily (4-9 % of intervals against 0.1-0.6 %).
# The probe itself ran 1.6x slower.
SLOW_PERSISTENCE = 0.3
SLOW_CPU = 1.10
SLOW_LATENCY = 1.10  # the median of the extra factor on p95, beyond the CPU time's
SLOW_SPREAD = 0.32  # its log standard deviation: sqrt(0.37^2 - 0.19^2), the medians over those loads
PROBE_FAST_US, PROBE_SLOW_RATIO = 370.0, 1.6


@dataclass
class SlowHost:
    """A host that runs slow ``share`` of the intervals, each interval drawn from a
    two-state Markov chain with that stationary share and lag-1 correlation
    ``persistence``. On a slow one the service needs ``cpu`` times the CPU time per
    request, and its percentiles are multiplied by a lognormal factor of median
    ``latency`` and log spread ``spread``: latency no configuration buys back, as
    measured. The host-speed probe reads it as the manager's does (``hostspeed.py``).
    Defaults: as measured here."""

    share: float
    persistence: float = SLOW_PERSISTENCE
    cpu: float = SLOW_CPU
    latency: float = SLOW_LATENCY
    spread: float = SLOW_SPREAD
    probe_us: float = PROBE_FAST_US
    probe_ratio: float = PROBE_SLOW_RATIO

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1 or not 0 <= self.persistence < 1:
            raise ValueError(f"a slow host's share in [0, 1] and persistence in [0, 1), got {self.share}, "
                             f"{self.persistence}")

    def next_slow(self, slow: bool | None, draw: float) -> bool:
        """Whether the next interval is slow, given this one's (None: the first interval)."""
        if slow is None:
            return draw < self.share
        return draw < self.persistence * slow + (1 - self.persistence) * self.share


@dataclass
class ServerModel:
    mu_max: float = 40_000.0  # requests/s one core serves at level 1
    base_s: float = 50e-6  # network and stack delay, seconds
    noise: float = 0.05  # relative noise of a measured percentile
    seed: int = 0
    host: SlowHost | None = None  # None: the host always runs at full speed
    backlog: float = field(default=0.0, init=False)  # requests queued beyond what the model's steady state holds
    slow: bool | None = field(default=None, init=False)  # the host in the last interval served (None: none yet)

    def __post_init__(self) -> None:
        self.reset()

    def capacity(self, config: Configuration) -> float:
        return config.cores * self.mu_max * config.level / self._cpu()

    def _cpu(self) -> float:
        return self.host.cpu if self.slow and self.host else 1.0

    def step(self, config: Configuration, rps: float, dt: float) -> dict[str, float]:
        """Serve one interval; returns rps (arrivals), served, p95, p99 (seconds), utilisation."""
        return self.step_segments([(config, dt)], rps)

    def step_segments(self, segments: list[tuple[Configuration, float]], rps: float) -> dict[str, float]:
        """Serve one interval whose configuration changed inside it: ``segments`` are
        (configuration, seconds) in order. Its percentiles are over every request of the
        interval, each served under the configuration in force when it arrived."""
        self._draw_host()
        parts = []  # (arrivals, cores, steady rate, mu, first and last wait ahead) per piece of a segment
        served = busy = 0.0
        for config, dt in segments:
            capacity, mu = self.capacity(config), self.mu_max * config.level / self._cpu()
            before, self.backlog = self.backlog, max(0.0, self.backlog + (rps - capacity) * dt)
            done = rps * dt + before - self.backlog  # what arrived and what was queued, less what is left
            served += done
            busy += min(dt, done / capacity)
            parts += [(rps * seconds, config.cores, min(rps, capacity * 0.999), mu, first / capacity, last / capacity)
                      for seconds, first, last in _queued_ahead(before, rps, capacity, dt)]
        length = sum(dt for _, dt in segments)
        # a sniffer counts requests as they arrive on the wire: the offered load, served or not
        out = {"rps": rps, "served": served / length, "utilisation": busy / length}
        probe, spike = self._host_readings()
        for q, name in ((0.95, "p95"), (0.99, "p99")):
            value = _mixture_quantile(q, parts) + self.base_s
            out[name] = value * float(self._rng.lognormal(0.0, self.noise)) * spike
        return {**out, **probe}

    def _draw_host(self) -> None:
        """The host of the interval about to be served (its own random stream: without a
        host every other number is as it was)."""
        if self.host is not None:
            self.slow = self.host.next_slow(self.slow, float(self._host_rng.random()))

    def _host_readings(self) -> tuple[dict[str, float], float]:
        """The served interval's probe readings (median and fastest, as
        ``HostSpeedProbe.take``) and the factor its host put on latency; nothing and 1
        without a ``host``."""
        if self.host is None:
            return {}, 1.0
        fastest = self.host.probe_us * float(self._host_rng.lognormal(0.0, 0.02))
        median = fastest * (self.host.probe_ratio if self.slow else 1.05) * float(self._host_rng.lognormal(0.0, 0.05))
        spike = float(self._host_rng.lognormal(np.log(self.host.latency), self.host.spread)) if self.slow else 1.0
        return {"host_probe_us": max(median, fastest), "host_probe_min_us": fastest}, spike

    def tick_rate(self, rps: float, tick_s: float) -> float:
        """The arrival rate a sniffer counts in a tick of ``tick_s``: Poisson noise on the load
        (its own random stream, so ticks never change what the intervals measure)."""
        return float(self._tick_rng.poisson(rps * tick_s)) / tick_s

    def reset(self) -> None:
        self.backlog = 0.0
        self.slow = None
        self._host_rng = np.random.default_rng([self.seed, 2])
        self._rng = np.random.default_rng(self.seed)
        self._tick_rng = np.random.default_rng([self.seed, 1])


def _queued_ahead(backlog: float, rps: float, capacity: float, dt: float) -> list[tuple[float, float, float]]:
    """(seconds of the segment, requests queued ahead of its first and last arrival): the
    queue (fluid) grows or drains at rps - capacity from ``backlog``, linearly, until it is
    empty. An arrival waits for the queue as it found it; before session 57 each waited for
    the queue left at the end (none when it had drained by then, so an interval after a
    saturated one read as met)."""
    if backlog <= 0 and rps <= capacity:
        return [(dt, 0.0, 0.0)]
    queued = dt if rps >= capacity else min(dt, backlog / (capacity - rps))
    pieces = [(queued, backlog, max(0.0, backlog + (rps - capacity) * queued))]
    return pieces + ([(dt - queued, 0.0, 0.0)] if dt > queued else [])


def _tail_integral(x: float, c: int, lam: float, mu: float) -> float:
    """The integral of ``response_tail`` from 0 to x (x < 0: x, the tail being 1 there), in
    closed form: an arrival's mean tail over a range of waits is a difference of two."""
    if x <= 0:
        return x
    served = (1 - math.exp(-mu * x)) / mu  # the integral of exp(-mu u)
    if lam <= 0:
        return served
    wait = erlang_c(c, lam / mu)
    theta = c * mu - lam
    if abs(theta - mu) < 1e-9 * mu:  # waited = exp(-mu u) (1 + mu u)
        waited = served + (1 - math.exp(-mu * x) * (1 + mu * x)) / mu
    else:  # waited = (mu exp(-theta u) - theta exp(-mu u)) / (mu - theta)
        waited = (mu * (1 - math.exp(-theta * x)) / theta - theta * served) / (mu - theta)
    return (1 - wait) * served + wait * waited


def _piece_tail(t: float, c: int, lam: float, mu: float, first: float, last: float) -> float:
    """P(response > t) for arrivals whose wait ahead runs linearly from ``first`` to ``last``:
    the mean of the M/M/c tail shifted by each wait."""
    low, high = min(first, last), max(first, last)
    if high - low < 1e-12:
        return response_tail(t - low, c, lam, mu)
    return (_tail_integral(t - low, c, lam, mu) - _tail_integral(t - high, c, lam, mu)) / (high - low)


def _mixture_quantile(q: float, parts: list[tuple[float, int, float, float, float, float]]) -> float:
    """q-quantile of the response time over pieces (arrivals, cores, rate, mu, first and
    last wait ahead)."""
    if len(parts) == 1 and parts[0][4] == parts[0][5]:  # one configuration, one wait, all interval: M/M/c
        _, cores, lam, mu, wait, _ = parts[0]
        return response_quantile(q, cores, lam, mu) + wait
    total = sum(p[0] for p in parts) or 1.0

    def excess(t: float) -> float:
        return sum(n * _piece_tail(t, cores, lam, mu, first, last) for n, cores, lam, mu, first, last in parts) / total \
            - (1 - q)

    high = max(response_quantile(q, cores, lam, mu) + max(first, last) for _, cores, lam, mu, first, last in parts)
    while excess(high) > 0:
        high *= 2
    return brentq(excess, 0.0, high)


def calibrate(rps: list[float], p95_s: list[float], cores: int) -> ServerModel:
    """Fit mu_max and the base delay of an M/M/c model to a load sweep at full speed."""
    from scipy.optimize import least_squares

    rps, p95 = np.asarray(rps, float), np.asarray(p95_s, float)
    if len(rps) < 3:
        raise ValueError("need at least three load levels to calibrate")

    def residual(params):
        mu, base = params
        predicted = np.array([response_quantile(0.95, cores, min(r, 0.999 * cores * mu), mu) + base for r in rps])
        return np.log(predicted) - np.log(p95)

    start = [max(rps) / cores * 1.2, float(min(p95)) / 2]
    fit = least_squares(residual, start, bounds=([max(rps) / cores * 1.001, 0.0], [np.inf, float(max(p95))]))
    return ServerModel(mu_max=float(fit.x[0]), base_s=float(fit.x[1]))


def steps_profile(max_rps: float, step_s: float, fraction: float = 0.2, cycles: int = 1,
                  floor: float | None = None) -> list[tuple[float, float]]:
    """The seed's load: 0 -> 100 -> 0 % of max_rps in ``fraction`` steps, each held ``step_s``.
    Returns (duration_s, rps) segments; 0 % is taken as ``floor`` of max_rps, by default a
    light load of a quarter step (perflearn-load's own steps offer nothing: ``floor=0``)."""
    floor = fraction / 4 if floor is None else floor
    levels = [round(i * fraction, 6) for i in range(int(round(1 / fraction)) + 1)]
    up_down = levels + levels[-2::-1]
    segments = [(step_s, max(level, floor) * max_rps) for level in up_down]
    return segments * cycles


def ladder_profile(max_rps: float, step_s: float, fraction: float = 0.1, top: float = 1.1) -> list[tuple[float, float]]:
    """A profile's load: ``fraction`` -> ``top`` of max_rps in ``fraction`` steps, each held
    ``step_s``: every load the manager's traces visit (the steps', the diurnal's at a
    tenth's resolution, Heimdall's buckets), and one past the maximum."""
    return [(step_s, i * fraction * max_rps) for i in range(1, int(round(top / fraction)) + 1)]


def diurnal_profile(max_rps: float, period_s: float, interval_s: float, low: float = 0.1) -> list[tuple[float, float]]:
    """A day compressed into ``period_s``: a smooth trough and peak (low .. 100 % of max_rps)."""
    steps = int(period_s / interval_s)
    return [(interval_s, max_rps * (low + (1 - low) * 0.5 * (1 - math.cos(2 * math.pi * i / steps))))
            for i in range(steps)]


TRACES = ("steps", "diurnal", "ladder")


def trace_segments(trace: str, max_rps: float, step_s: float, interval_s: float) -> list[tuple[float, float]]:
    """(duration, rps) segments of a trace by name (``TRACES``): each is 11 or 12 steps long."""
    if trace == "steps":
        return steps_profile(max_rps, step_s)
    if trace == "ladder":
        return ladder_profile(max_rps, step_s)
    return diurnal_profile(max_rps, 12 * step_s, interval_s)


def per_interval(profile: list[tuple[float, float]], interval_s: float) -> list[float]:
    """The rate offered in each whole interval of a (duration, rps) trace, at its midpoint:
    a live trace's intervals, whose steps need not last a whole number of them."""
    ends = np.cumsum([duration for duration, _ in profile])
    count = int(ends[-1] / interval_s + 1e-9) if len(ends) else 0
    at = np.searchsorted(ends, (np.arange(count) + 0.5) * interval_s, side="right")
    return [profile[i][1] for i in at]


def expand(profile: list[tuple[float, float]], interval_s: float) -> list[float]:
    """Load per control interval from (duration, rps) segments."""
    out = []
    for duration, rps in profile:
        out += [rps] * max(1, int(round(duration / interval_s)))
    return out
