"""Knob domains: the values a knob may take, enumerated or sampled by a design."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


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

    def levels(self) -> list[Any]:
        """Every value, in order. Only for finite domains."""
        if self.kind == "values":
            return list(self.values)
        if self.kind == "range":
            if self.step is None:
                raise ValueError("a range without a step has no finite list of values")
            count = int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
            return [self._cast(self.low + i * self.step) for i in range(count)]
        # log_range: low * base**k up to high
        out, value = [], float(self.low)
        while value <= self.high * (1 + 1e-12):
            out.append(self._cast(value))
            value *= self.base
        return out

    def from_unit(self, u: float) -> Any:
        """Map u in [0, 1) to a value: the quantile of this domain (LHS, random)."""
        u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
        if self.finite:
            levels = self.levels()
            return levels[int(u * len(levels))]
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
