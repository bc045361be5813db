"""Power: measured with RAPL where the machine has it, else a documented model.

The model (labelled "modelled" wherever it is reported): a static part the node always
draws, plus per active core an idle part and a dynamic part that grows with the cube
of the speed level (dynamic power ~ f·V², with V roughly proportional to f) and with
utilisation. Defaults are of a small server socket; they can be set per machine
(`power_model`: a preset or "static,idle,dynamic" watts).
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


# The seed's platform (Heimdall, Figure 1.1): on its Jetson TX1, all cores at maximum
# frequency draw 30 % of peak power at 10 % load. Peak 6 W for the 3-core cluster; the
# 30 % that is not dynamic at 10 % load is split evenly between the rail's static power
# and per-core idle power (the seed does not say how it divides).
_TX1_PEAK_W, _TX1_CORES = 6.0, 3
_TX1_DYNAMIC = 0.7 / 0.9 * _TX1_PEAK_W
_TX1_REST = _TX1_PEAK_W - _TX1_DYNAMIC

PRESETS = {
    "server": PowerModel(label="modelled (server)"),  # named as the others are: quoted with the numbers
    "tx1": PowerModel(static_w=_TX1_REST / 2, core_idle_w=_TX1_REST / 2 / _TX1_CORES,
                      core_dynamic_w=_TX1_DYNAMIC / _TX1_CORES, label="modelled (tx1)"),
}


def power_model(spec: str) -> PowerModel:
    """A preset name, or "static,idle,dynamic" watts (per core for idle and dynamic)."""
    if spec in PRESETS:
        return PRESETS[spec]
    parts = spec.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    # at most a megawatt each: 1e308 printed inf kJ
    if len(values) != 3 or not all(0 <= v <= 1e6 for v in values) or values[1] + values[2] <= 0:  # NaN too
        raise ValueError(f"expected one of {', '.join(PRESETS)} or static,idle,dynamic watts "
                         f"(from 0 to 1e6 each, idle + dynamic above 0: a core that costs nothing leaves "
                         f"nothing to save; e.g. 20,1.5,6), got {spec!r}")
    return PowerModel(static_w=values[0], core_idle_w=values[1], core_dynamic_w=values[2],
                      label=f"modelled ({values[0]:g},{values[1]:g},{values[2]:g} W)")


class Rapl:
    """Package energy from the powercap interface (Intel RAPL), where it exists."""

    label = "measured (RAPL)"

    def __init__(self) -> None:
        self.files = sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"))
        if not self.files or not all(os.access(f, os.R_OK) for f in self.files):
            raise FileNotFoundError("no readable RAPL energy counters under /sys/class/powercap")
        # where each package's counter wraps to 0 (a 32-bit µJ counter wraps every few minutes at 100 W)
        self.ranges = [_read_int(os.path.join(os.path.dirname(f), "max_energy_range_uj")) for f in self.files]

    def read(self) -> list[int]:
        """Each package's counter now, µJ."""
        return [_read_int(f) or 0 for f in self.files]

    def joules_between(self, before: list[int], after: list[int]) -> float:
        """Energy from one ``read`` to a later one, over a counter's wrap."""
        total = 0
        for a, b, wrap in zip(before, after, self.ranges):
            total += b - a if b >= a else b + (wrap or 0) + 1 - a
        return total / 1e6

    def joules(self) -> float:
        return sum(self.read()) / 1e6


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def rapl_or_none() -> Rapl | None:
    try:
        return Rapl()
    except FileNotFoundError:
        return None
