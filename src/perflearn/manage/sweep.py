"""Profiling the way the manager runs: the training data of Heimdall's model."""

from __future__ import annotations

import numpy as np

from .config import Configuration
from .policy import Policy


class Sweep(Policy):
    """Profiling, not QoS: the service's latency over the configurations at every load
    it carries, measured the way the manager will run it (one long-lived service, the
    live wire stream, configurations switched at interval boundaries) as the training
    data of Heimdall's model (``perflearn manage -p sweep --trace ladder``).

    At each load (a tenth of the maximum, as Heimdall's buckets) it starts at the
    fastest configuration and steps through the others, fastest first, each held
    ``hold`` intervals. It skips the configurations that cannot carry the load (its
    demand in busy full-speed CPUs, measured at this load, over ``headroom`` of their
    capacity: a queue that only grows teaches nothing but a backlog) and every
    configuration no faster (no more speed, no more capacity) than one that missed the
    target at this load. A configuration missed when two of its settled intervals
    (run through the interval before too) missed, or one by more than twice the
    target; a miss is drained at the maximum for ``drain`` intervals. One interval over
    the target is no verdict: live, the maximum itself measured 511 and 578 µs in two
    intervals against 197 µs at 60 % load, then 90-130 µs for 45 s. The maximum is never
    skipped: its misses are the machine's, and there is nothing faster to run. When
    every configuration left has run, it goes round again. Why: Heimdall's forest
    profiled in 5-s runs of a fresh memcached forecast the managed service 1.1-1.4x
    too fast at the top load and 1.25-1.7x too slow at 20-60 % (bench/manage.md,
    session 22)."""

    name = "sweep"

    def __init__(self, *args, hold: int = 3, drain: int = 1, headroom: float = 0.95, **kwargs):
        super().__init__(*args, **kwargs)
        if hold < 1 or drain < 0 or not 0 < headroom <= 1:
            raise ValueError(f"sweep: hold >= 1, drain >= 0 and headroom in (0, 1], got {hold}, {drain}, {headroom}")
        self.hold, self.drain, self.headroom = hold, drain, headroom
        self.order = sorted(self.space, key=lambda c: (c.cores * c.level, c.level), reverse=True)  # fastest first
        self.bucket: int | None = None
        self.queue: list[Configuration] = []
        self.current: Configuration | None = None  # the configuration under measurement
        self.left = 0  # its intervals still to run
        self.strikes = 0  # its settled intervals over the target
        self.draining = 0
        self.missed: list[Configuration] = []  # at this load
        self.demand: list[float] = []  # busy full-speed CPUs at this load, from unsaturated intervals that met the target

    def _bucket(self, rps: float) -> int:
        return int(round(max(0.0, rps) / self.max_rps * 10))

    def decide(self, obs):
        bucket = self._bucket(obs.rps)
        if bucket != self.bucket:  # a new load: start again from the fastest
            self.bucket, self.queue, self.missed, self.demand = bucket, [], [], []
            self.current, self.left, self.draining = None, 0, 0
        else:
            if (obs.config == self.current and self.current != self.space.maximum and obs.settled
                    and not self.draining and obs.p95 > self.target):
                self.strikes += 1
                if self.strikes >= 2 or obs.p95 > 2 * self.target:
                    self.missed.append(obs.config)
                    self.left, self.draining = 0, self.drain
                    self.remark = (f"sweep: {obs.config} missed at {obs.rps:.0f} req/s: configurations no faster "
                                   "are skipped at this load")
            if obs.utilisation < 0.98 and obs.p95 <= self.target:
                self.demand.append(obs.busy)
        if self.draining:
            self.draining -= 1
            return self.space.maximum
        if self.left:
            self.left -= 1
            return self.current
        for _ in range(2):  # the rest of this round, else a new round
            while self.queue:
                config = self.queue.pop(0)
                if self._feasible(config):
                    self.current, self.left, self.strikes = config, self.hold - 1, 0
                    return config
            self.queue = list(self.order)
        self.current = None  # nothing left to measure at this load
        return self.space.maximum

    def _feasible(self, config: Configuration) -> bool:
        demand = float(np.median(self.demand)) if self.demand else 0.0
        if demand > self.headroom * config.cores * config.level:
            return False
        return not any(config.no_faster_than(m) for m in self.missed)
