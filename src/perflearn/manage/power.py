"""Power: measured with RAPL where the machine has it, else a documented model.

The model (labelled "modelled" wherever it is reported): a static part the node always
draws, plus per active core an idle part and a dynamic part that grows with the cube
of the speed level (dynamic power ~ f·V², with V roughly proportional to f) and with
utilisation. Defaults are of a small server socket; they can be set per machine.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from .config import Configuration


@dataclass(frozen=True)
class PowerModel:
    static_w: float = 20.0
    core_idle_w: float = 1.5
    core_dynamic_w: float = 6.0
    exponent: float = 3.0
    label: str = "modelled"

    def watts(self, config: Configuration, utilisation: float) -> float:
        utilisation = min(max(utilisation, 0.0), 1.0)
        per_core = self.core_idle_w + self.core_dynamic_w * config.level**self.exponent * utilisation
        return self.static_w + config.cores * per_core


class Rapl:
    """Package energy from the powercap interface (Intel RAPL), where it exists."""

    label = "measured (RAPL)"

    def __init__(self) -> None:
        self.files = sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"))
        if not self.files or not all(os.access(f, os.R_OK) for f in self.files):
            raise FileNotFoundError("no readable RAPL energy counters under /sys/class/powercap")

    def joules(self) -> float:
        return sum(int(open(f).read()) for f in self.files) / 1e6


def rapl_or_none() -> Rapl | None:
    try:
        return Rapl()
    except FileNotFoundError:
        return None
