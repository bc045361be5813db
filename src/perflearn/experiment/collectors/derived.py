"""Metrics computed from other metrics (and knob values) by an expression."""

from __future__ import annotations

import math

from ..expr import Expression
from .base import Collector, Missing


class Derived(Collector):
    source = "derived"
    OPTIONS = {"expr": ((str,), True)}

    @classmethod
    def validate(cls, metric):
        try:
            metric.options["_expression"] = Expression(metric.options["expr"])
        except ValueError as exc:
            raise ValueError(f"expr: {exc}") from None

    def values(self, run, result):
        return {}  # computed by ``evaluate`` once every other metric is known

    @staticmethod
    def evaluate(metric, known: dict) -> float | Missing:
        expression: Expression = metric.options["_expression"]
        for name in expression.names:
            if isinstance(known.get(name), Missing):
                return Missing(f"{name} is missing")
        try:
            value = expression(known)
        except ZeroDivisionError:
            return Missing(f"division by zero in {expression.source!r}")
        except (TypeError, ValueError, OverflowError) as exc:
            return Missing(f"{expression.source!r}: {exc}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return Missing(f"{expression.source!r} gave {value!r}, not a finite number")
        return float(value)
