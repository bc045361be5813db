"""Collectors: one module per source of metrics, all behind the interface of ``base``."""

from __future__ import annotations

from .base import Collector, MetricSpec, Missing, Value
from .builtin import ExitStatus, WallTime
from .derived import Derived
from .perf import PerfStat
from .procfs import ProcDelta
from .rusage import Rusage
from .text import JsonPath, Regex
from .wire import Wire

SOURCES: dict[str, type[Collector]] = {
    cls.source: cls for cls in (WallTime, ExitStatus, Regex, JsonPath, PerfStat, ProcDelta, Rusage, Wire, Derived)
}


def build(metrics: list[MetricSpec]) -> list[Collector]:
    """One collector per source used, in a stable order (derived last)."""
    by_source: dict[str, list[MetricSpec]] = {}
    for metric in metrics:
        by_source.setdefault(metric.source, []).append(metric)
    order = sorted(by_source, key=lambda s: (s == "derived", list(SOURCES).index(s)))
    return [SOURCES[source](by_source[source]) for source in order]


__all__ = ["Collector", "MetricSpec", "Missing", "Value", "SOURCES", "build"]
