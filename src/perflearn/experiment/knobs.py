"""Knob domains: the values a knob may take, enumerated or sampled by a design."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any


MAX_LEVELS = 1_000_000  # values of one knob: more is a step too small, not a sweep


@dataclass(frozen=True)
class Domain:
    """Values a knob may take.

    ``kind`` is ``values`` (explicit list), ``range`` (linear, with an optional step),
    or ``log_range`` (geometric, base ``base``). ``categorical`` marks values that
    have no order (core ids in NESCAT are one-hot encoded, not ordered).
    """

    kind: str
    values: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    base: float = 2.0
    integer: bool = False
    categorical: bool = False

    @property
    def finite(self) -> bool:
        """True when every value can be listed (a factorial design needs it)."""
        return self.kind == "values" or self.step is not None or self.kind == "log_range"

    def count(self) -> int:
        """How many values a finite domain has, without listing them (a step of 1e-9
        over [1, 1e9] must be refused, not listed)."""
        if self.kind == "values":
            return len(self.values)
        if self.kind == "range":
            if self.step is None:
                raise ValueError("a range without a step has no finite list of values")
            return int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        # a difference of logs, not the log of a ratio: 1e308 / 1e-308 overflows to inf
        estimate = int((math.log(self.high) - math.log(self.low)) / math.log(self.base)) + 1  # low * base**k
        return estimate if estimate > 10_000 else len(self._geometric())

    def _geometric(self) -> list[float]:
        # low * base * base ... up to high, multiplied as always (stored points keep their digits)
        out, value = [], float(self.low)
        # capped at the largest float: with high near it the tolerance overflowed to inf and
        # inf <= inf never ended the loop
        limit = min(self.high * (1 + 1e-12), sys.float_info.max)
        while value <= limit:
            out.append(value)
            value *= self.base
        return out

    def nth(self, i: int) -> Any:
        """The i-th value (0-based) of a finite domain."""
        if self.kind == "values":
            return self.values[i]
        if self.kind == "range":
            return self._cast(self.low + i * self.step)
        return self._cast(self._geometric()[i])

    def levels(self) -> list[Any]:
        """Every value, in order. Only for finite domains."""
        if self.kind == "log_range":
            return [self._cast(v) for v in self._geometric()]
        return [self.nth(i) for i in range(self.count())]

    def from_unit(self, u: float) -> Any:
        """Map u in [0, 1) to a value: the quantile of this domain (LHS, random)."""
        u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
        if self.finite:
            return self.nth(int(u * self.count()))
        if self.kind == "range":
            return self._cast(self.low + u * (self.high - self.low))
        return self._cast(math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low))))

    def contains(self, value: Any) -> bool:
        if self.kind == "values":
            return value in self.values
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if not (self.low - 1e-12 <= value <= self.high + 1e-12):
            return False
        if self.finite:
            return any(math.isclose(value, level, rel_tol=1e-9, abs_tol=1e-12) for level in self.levels())
        return True

    def _cast(self, value: float) -> Any:
        if self.integer:
            return int(round(value))
        return round(value, 12)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Knob:
    """A named parameter with a domain and an actuator that applies its value."""

    name: str
    domain: Domain
    actuator: str = "placeholder"  # see experiment.actuators.ACTUATORS
    options: dict[str, Any] = field(default_factory=dict)  # actuator settings (target, var, key, ...)
    role: str = "knob"  # or "context": describes the situation rather than a choice
    default: Any = None
    unit: str = ""

    @property
    def categorical(self) -> bool:
        return self.domain.categorical
