"""How fast the machine runs a fixed piece of work while the manager runs: the host's
share of a latency miss.

A virtual machine's host can slow a vCPU without taking it away (a busy hyperthread
sibling, another tenant's cache traffic): steal time stays at zero, the guest's CPU
time per request rises, and the service misses its target at any configuration. On
this project's 2-vCPU VM (session 28) a fixed interpreter loop took either about
420 µs or about 680 µs of CPU time, the slow mode for minutes at a time; intervals in
which most samples were slow missed the target 8 times as often as those in which few
were, even at the maximum configuration. Policies are compared one pass after another,
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
LOOP = 10_000  # iterations: about 0.45 ms of Python, long enough to time by thread CPU time, short enough to be cheap


def fixed_work() -> int:
    s = 0
    for i in range(LOOP):
        s += i * i
    return s


class HostSpeedProbe:
    """CPU microseconds of ``fixed_work`` every ``period_s``; ``take`` gives the median
    since the last take (None when no sample was taken)."""

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

    def take(self) -> float | None:
        with self.lock:
            samples, self.samples = self.samples, []
        return median(samples) if samples else None

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2.0)


def slow_intervals(frames: dict[str, pd.DataFrame]) -> dict[str, float] | None:
    """Per pass, the share (%) of its intervals whose probe ran at least ``SLOW_RATIO``
    times the fastest the comparison saw (its 10th percentile over every pass's intervals).
    None when no pass was probed (the simulator). Slow against the comparison's own
    fastest: a host slow throughout shows no slow interval."""
    probes = {name: (f["host_probe_us"] if "host_probe_us" in f else pd.Series(dtype=float)).dropna()
              for name, f in frames.items()}
    values = np.concatenate([p.to_numpy(dtype=float) for p in probes.values()])
    if not len(values):
        return None
    fast = float(np.quantile(values, 0.1))
    return {name: float((p >= SLOW_RATIO * fast).mean() * 100) if len(p) else float("nan")
            for name, p in probes.items()}
