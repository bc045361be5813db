"""How fast the machine runs a fixed piece of work while the manager runs: the host's
share of a latency miss.

A virtual machine's host can slow a vCPU without taking it away (a busy hyperthread
sibling, another tenant's cache traffic): steal time stays at zero, the guest's CPU
time per request rises, and the service misses its target at any configuration. On
this project's 2-vCPU VM (session 28) a fixed interpreter loop took either about
400 µs or about 670 µs of CPU time, the slow mode in phases of many minutes; at the
maximum configuration, intervals on a slow host missed the target 4 times as often as
those on a fast one (25.2 against 6.4 %, six static passes). Policies are compared one pass after another,
so a pass that met a slow host is not comparable with one that did not: the probe lets
the manager say so.

The probe is a thread of the manager (on the harness's CPUs when the service has its
own): every ``period_s`` it times a fixed loop by its own CPU time, so being scheduled
out does not count, only running slowly does. About 0.45 ms each 0.2 s: 0.2 % of a CPU.
"""

from __future__ import annotations

import threading
import time
from statistics import median

import numpy as np
import pandas as pd

SLOW_RATIO = 1.3  # between the two modes measured (1.6x apart): an interval this much slower than the fastest seen is slow
SLOW_SPREAD = 25.0  # passes whose shares of slow intervals are this many points apart met different hosts
LOOP = 10_000  # iterations: about 0.45 ms of Python, long enough to time by thread CPU time, short enough to be cheap


def fixed_work() -> int:
    s = 0
    for i in range(LOOP):
        s += i * i
    return s


class HostSpeedProbe:
    """CPU microseconds of ``fixed_work`` every ``period_s``; ``take`` gives the median
    and the minimum since the last take (None when no sample was taken)."""

    def __init__(self, period_s: float = 0.2):
        self.period = period_s
        self.samples: list[float] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="perflearn-hostspeed", daemon=True)

    def start(self) -> HostSpeedProbe:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopping.wait(self.period):
            start = time.thread_time_ns()
            fixed_work()
            took = (time.thread_time_ns() - start) / 1e3
            with self.lock:
                self.samples.append(took)

    def take(self) -> tuple[float, float] | None:
        with self.lock:
            samples, self.samples = self.samples, []
        return (median(samples), min(samples)) if samples else None

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2.0)


def slow_flags(frames: dict[str, pd.DataFrame]) -> dict[str, pd.Series] | None:
    """Per pass, per interval: 1.0 when its probe's median ran at least ``SLOW_RATIO``
    times the fastest the machine ran the work, 0.0 when not, NaN without a probe
    sample; None when no pass was probed (the simulator). The fastest is the 10th
    percentile of the intervals' minima over every pass: a slow host still runs some
    samples fast (a quarter of them in session 28's slow phases), so it is found even
    in a comparison that met a slow host throughout, unless no sample ever ran fast."""
    def column(frame: pd.DataFrame, name: str) -> pd.Series:
        return frame[name] if name in frame else pd.Series(np.nan, index=frame.index)

    minima = np.concatenate([column(f, "host_probe_min_us").dropna().to_numpy(dtype=float) for f in frames.values()])
    if not len(minima):
        return None
    fastest = float(np.quantile(minima, 0.1))
    medians = {name: column(f, "host_probe_us") for name, f in frames.items()}
    return {name: (m >= SLOW_RATIO * fastest).astype(float).where(m.notna()) for name, m in medians.items()}


def slow_intervals(frames: dict[str, pd.DataFrame]) -> dict[str, float] | None:
    """Per pass, the share (%) of its probed intervals that ran on a slow host (``slow_flags``)."""
    flags = slow_flags(frames)
    return None if flags is None else {name: float(f.mean() * 100) for name, f in flags.items()}  # NaN: no sample


def hosts_differ(shares: dict[str, float]) -> tuple[str, str] | None:
    """(slowest, fastest) of passes whose slow-host shares are ``SLOW_SPREAD`` points or
    more apart: their QoS compares hosts, not policies. None when they are comparable, or
    fewer than two passes have a share (a pass without probe samples has NaN)."""
    shares = {name: share for name, share in shares.items() if not np.isnan(share)}
    if len(shares) < 2:
        return None
    slowest, fastest = max(shares, key=shares.get), min(shares, key=shares.get)
    return (slowest, fastest) if shares[slowest] - shares[fastest] >= SLOW_SPREAD else None
