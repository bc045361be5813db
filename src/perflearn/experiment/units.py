"""Parsing of durations given in specs and on the command line ("500ms", "2s", 1.5)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$")
_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


MAX_DURATION_S = 365 * 86400.0


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string with a unit. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30, '500ms' or '2m', got {value!r}")
    seconds = None
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value!r}")
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            seconds = float(match.group(1)) * _SCALE[match.group(2)]
    if seconds is None:
        raise ValueError(f"expected a duration such as 30, '500ms' or '2m', got {value!r}")
    if not seconds <= MAX_DURATION_S:  # NaN, inf, 1e400: sleep and select overflow at run time
        raise ValueError(f"a duration of at most a year, got {value!r}")
    return seconds
