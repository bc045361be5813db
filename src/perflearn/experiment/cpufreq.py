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
        self.root = root
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

    def restore(self) -> None:
        """Each CPU it took over back to the governor it had (best effort: the run's outcome is
        already recorded)."""
        put_back_governors({cpu: governor for cpu, governor in self._saved.items() if governor}, self.root)
        self._saved.clear()

    def forget(self) -> None:
        """The governors it saved are put back by another (a machine setting's original)."""
        self._saved.clear()


def all_governors(root: Path = SYSFS) -> dict[int, str]:
    """Every CPU's cpufreq governor, where it has cpufreq: the machine's setting, whichever
    CPUs one sweep or manager takes over (kept whole, so that any of them finds another's)."""
    found = {}
    for d in root.glob("cpu[0-9]*/cpufreq"):
        governor = _read(d / "scaling_governor")
        if governor and d.parent.name[3:].isdigit():
            found[int(d.parent.name[3:])] = governor
    return dict(sorted(found.items()))


def put_back_governors(governors: dict[int, str], root: Path = SYSFS) -> None:
    """Each CPU's governor as given (best effort: a CPU gone offline is skipped)."""
    for cpu, governor in governors.items():
        try:
            (root / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(governor)
        except OSError:
            pass


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
