"""CPU frequency through cpufreq's userspace governor, where the machine has it.

The governor and speed of every CPU touched are saved on first use and put back by
``restore``. Virtual machines and many containers have no cpufreq at all; then
``CpuFreq`` raises UnsupportedError naming what is missing, and callers fall back
(the manager uses the CFS quota as its speed knob instead).
"""

from __future__ import annotations

from pathlib import Path

from perflearn.errors import UnsupportedError

SYSFS = Path("/sys/devices/system/cpu")


class CpuFreq:
    def __init__(self, cpus: list[int], root: Path = SYSFS):
        self.dirs = {cpu: root / f"cpu{cpu}" / "cpufreq" for cpu in cpus}
        missing = [str(d) for d in self.dirs.values() if not d.is_dir()]
        if missing:
            raise UnsupportedError(f"no cpufreq on this machine ({missing[0]} does not exist)")
        first = next(iter(self.dirs.values()))
        governors = _read(first / "scaling_available_governors").split()
        if "userspace" not in governors:
            raise UnsupportedError(f"cpufreq has no userspace governor here (available: {' '.join(governors) or 'none'})")
        self.frequencies_khz = _frequencies(first)
        self._saved: dict[int, str] = {}

    @property
    def max_khz(self) -> int:
        return self.frequencies_khz[-1]

    def nearest_khz(self, fraction: float) -> int:
        """The available frequency closest to ``fraction`` of the maximum."""
        return min(self.frequencies_khz, key=lambda f: abs(f - fraction * self.max_khz))

    def set_khz(self, khz: int, cpus: list[int] | None = None) -> None:
        for cpu in cpus if cpus is not None else list(self.dirs):
            d = self.dirs[cpu]
            try:
                if cpu not in self._saved:  # first touch: remember the governor, then take the CPU over
                    self._saved[cpu] = _read(d / "scaling_governor")
                    (d / "scaling_governor").write_text("userspace")
                (d / "scaling_setspeed").write_text(str(int(khz)))
            except OSError as exc:
                raise UnsupportedError(f"cpu{cpu}: cannot set {khz} kHz ({exc.strerror})") from None

    def governors(self) -> dict[int, str]:
        """Each CPU's governor now."""
        return {cpu: _read(d / "scaling_governor") for cpu, d in self.dirs.items()}

    def restore(self) -> None:
        self.put_back(self._saved)

    def put_back(self, governors: dict[int, str]) -> None:
        """Each CPU's governor as given (from ``governors``, maybe another process's); what this
        one saved is then forgotten."""
        for cpu, governor in governors.items():
            try:
                if cpu in self.dirs and governor:
                    (self.dirs[cpu] / "scaling_governor").write_text(governor)
            except OSError:
                pass  # restoring is best effort: the run's outcome is already recorded
        self._saved.clear()


def _frequencies(d: Path) -> list[int]:
    listed = _read(d / "scaling_available_frequencies").split()
    if listed:
        return sorted(int(f) for f in listed)
    low, high = int(_read(d / "cpuinfo_min_freq") or 0), int(_read(d / "cpuinfo_max_freq") or 0)
    if not high:
        raise UnsupportedError(f"cpufreq lists no frequencies in {d}")
    step = max(100_000, (high - low) // 16)  # intel_pstate lists none: 100 MHz steps or 17 levels
    return sorted({*range(low, high, step), high})


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
