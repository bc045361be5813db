"""The interface every policy implements: an interval's ``Observation`` in, a configuration out."""

from __future__ import annotations

from dataclasses import dataclass

from .config import ConfigSpace, Configuration


@dataclass
class Observation:
    t: float
    rps: float
    p95: float  # seconds
    p99: float
    config: Configuration
    utilisation: float
    power_w: float
    settled: bool = False  # its configuration ran through the interval before too (the loop knows)
    host_probe_us: float | None = None  # how slow the host ran fixed work meanwhile (live only; hostspeed.py)
    # ms the CFS quota held the service back in the interval, where the speed level is that quota (live without
    # cpufreq); None where it is not measured or the speed is a frequency (the simulator: None)
    throttled_ms: float | None = None

    @property
    def busy(self) -> float:
        """Full-speed CPUs the service kept busy: its utilisation of what the configuration allows."""
        return self.utilisation * self.config.cores * self.config.level


class Policy:
    name = "policy"
    learning_iterations = 0  # passes over the trace the policy learns from before the evaluated one

    def __init__(self, space: ConfigSpace, target_s: float, max_rps: float, interval_s: float = 1.0):
        self.space, self.target, self.max_rps, self.interval = space, target_s, max_rps, interval_s
        self.predicted: float | None = None  # the policy's own latency forecast, if it makes one
        self.remark = ""  # why the last decision was unusual, for the interval's note (the loop clears it)

    reacts = False  # whether ``react`` can change the configuration inside an interval

    def _remark(self, text: str) -> None:
        """Add ``text`` to this interval's note, after what is there already."""
        self.remark = f"{self.remark}; {text}" if self.remark else text

    def decide(self, obs: Observation) -> Configuration:
        raise NotImplementedError

    def react(self, rps: float, tick_s: float, config: Configuration) -> Configuration | None:
        """A tick inside the interval: the arrival rate of the last ``tick_s`` seconds.
        A new configuration to apply now, or None. The baselines act only at their own
        periods, as their papers describe."""
        return None
