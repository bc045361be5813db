"""The collector interface: produce metric values for a run.

A collector handles every metric of one source (all perf events share one
``perf stat``; all /proc metrics share one snapshot per file). Its life in a run:
``before`` (just before the workload starts: wrap its argv, take snapshots),
``after`` (just after it exits: second snapshots), ``values`` (parse, compute).
When the spec names a measured phase (``measure_from``), ``mark`` is called as it
begins; sources that can measure a phase start over there.
A value that cannot be had is ``Missing(reason)``, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

from ..launch import RunContext, RunResult


@dataclass
class MetricSpec:
    name: str
    source: str
    unit: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    required: bool = False  # a missing value fails the run


@dataclass(frozen=True)
class Missing:
    """A metric with no value, and why (unsupported, failed run, no match)."""

    reason: str


Value = Union[float, Missing]


class Collector:
    source: ClassVar[str]
    default_unit: ClassVar[str] = ""
    # option -> (accepted types, required)
    OPTIONS: ClassVar[dict[str, tuple[tuple[type, ...], bool]]] = {}

    def __init__(self, metrics: list[MetricSpec]):
        self.metrics = metrics

    @classmethod
    def validate(cls, metric: MetricSpec) -> None:
        """Raise ValueError("key: message") for options that cannot work (known at read time)."""

    def check(self) -> list[str]:
        """Probe the machine before the sweep. Return warnings; raise UnsupportedError if hopeless."""
        return []

    def before(self, run: RunContext) -> None:
        pass

    def mark(self, run: RunContext) -> None:
        """The workload's measured phase begins now (its stdout matched ``measure_from``)."""

    def after(self, run: RunContext) -> None:
        pass

    def workload_exit(self, run: RunContext) -> tuple[int | None, int | None] | None:
        """(exit code, signal) of the workload where this collector wrapped it in a program
        that hides them (perf stat exits 0 whatever its command did); None otherwise."""
        return None

    def workload_wall(self, run: RunContext) -> float | None:
        """Seconds the workload itself ran where this collector wrapped it in a program whose
        own start-up the runner's clock would count (perf stat: about 10 ms); None otherwise."""
        return None

    def values(self, run: RunContext, result: RunResult) -> dict[str, Value]:
        raise NotImplementedError

    def samples(self, run: RunContext) -> list[tuple[str, float, float | None]]:
        """Interval samples this collector took during the run: (name, t, value)."""
        return []


def number(raw: Any, what: str) -> Value:
    """A float from a parsed value, or Missing saying why not."""
    if isinstance(raw, bool) or raw is None:
        return Missing(f"{what} is {raw!r}, not a number")
    try:
        return float(raw)
    except (TypeError, ValueError):
        return Missing(f"{what} is {str(raw)[:40]!r}, not a number")
