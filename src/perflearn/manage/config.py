"""Configurations a manager chooses among: a number of cores and a speed level.

The level is the CPU frequency where the machine has cpufreq (userspace governor);
where it does not, the CFS quota per core stands in for it (level 0.5 = each core
runs half the time), as on this project's CI machines. Either way a level is a
fraction of the maximum speed, in (0, 1].
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


MAX_CONFIGURATIONS = 4096  # 64 x 64; heimdall keeps configurations x configurations tables


@dataclass(frozen=True, order=True)
class Configuration:
    cores: int
    level: float  # fraction of the maximum speed (frequency or CFS quota per core)

    def __str__(self) -> str:
        return f"{self.cores}c@{self.level:g}"

    def no_faster_than(self, other: "Configuration") -> bool:
        """No more speed and no more capacity (cores x speed) than ``other``: an M/M/c queue
        with slower servers and no more total rate is never faster."""
        return self.level <= other.level and self.cores * self.level <= other.cores * other.level


@dataclass(frozen=True)
class ConfigSpace:
    cores: tuple[int, ...]
    levels: tuple[float, ...]

    @classmethod
    def make(cls, max_cores: int, levels: int | list[float]) -> "ConfigSpace":
        if max_cores < 1:
            raise ValueError(f"need at least one core, got {max_cores}")
        if isinstance(levels, int):
            if levels < 1:
                raise ValueError(f"need at least one speed level, got {levels}")
            if levels > 1000:  # the levels are rounded to 4 digits: more would repeat
                raise ValueError(f"at most 1000 speed levels, got {levels}")
            levels = [round((i + 1) / levels, 4) for i in range(levels)]
        if not levels or min(levels) <= 0 or max(levels) > 1:
            raise ValueError("speed levels are fractions of the maximum, in (0, 1]")
        if max_cores * len(levels) > MAX_CONFIGURATIONS:
            raise ValueError(f"{max_cores} cores x {len(levels)} levels is {max_cores * len(levels)} configurations, "
                             f"more than {MAX_CONFIGURATIONS} (policies compare every pair of them)")
        return cls(tuple(range(1, max_cores + 1)), tuple(sorted(levels)))

    def __iter__(self):
        return (Configuration(c, l) for c, l in itertools.product(self.cores, self.levels))

    def __len__(self) -> int:
        return len(self.cores) * len(self.levels)

    @property
    def maximum(self) -> Configuration:
        return Configuration(max(self.cores), max(self.levels))

    @property
    def minimum(self) -> Configuration:
        return Configuration(min(self.cores), min(self.levels))

    def clamp(self, cores: int, level: float) -> Configuration:
        cores = min(max(cores, min(self.cores)), max(self.cores))
        level = min(self.levels, key=lambda l: abs(l - level))
        return Configuration(cores, level)
