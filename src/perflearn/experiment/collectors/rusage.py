"""Resource usage of the workload (and the children it waited for), from wait4()."""

from __future__ import annotations

from .base import Collector, Missing

# field -> (struct_rusage attribute, unit)
FIELDS = {
    "user": ("ru_utime", "s"),
    "sys": ("ru_stime", "s"),
    "maxrss": ("ru_maxrss", "KiB"),
    "minflt": ("ru_minflt", "count"),
    "majflt": ("ru_majflt", "count"),
    "nvcsw": ("ru_nvcsw", "count"),
    "nivcsw": ("ru_nivcsw", "count"),
    "inblock": ("ru_inblock", "count"),
    "oublock": ("ru_oublock", "count"),
}


class Rusage(Collector):
    source = "rusage"
    OPTIONS = {"field": ((str,), True)}

    @classmethod
    def validate(cls, metric):
        if metric.options["field"] not in FIELDS:
            raise ValueError(f"field: unknown rusage field {metric.options['field']!r} (one of {', '.join(FIELDS)})")
        if not metric.unit:
            metric.unit = FIELDS[metric.options["field"]][1]

    runner_peak_kib: float | None = None

    def before(self, run):
        self.runner_peak_kib = _own_peak_kib()

    def values(self, run, result):
        out = {}
        for metric in self.metrics:
            if result.rusage is None:
                out[metric.name] = Missing("no resource usage: the workload was not waited for")
                continue
            value = float(getattr(result.rusage, FIELDS[metric.options["field"]][0]))
            if metric.options["field"] == "maxrss" and self.runner_peak_kib and value <= self.runner_peak_kib:
                # a child forked from this (large) Python process starts from its peak, and Linux
                # keeps that peak across exec: a workload below it cannot be told from it
                out[metric.name] = Missing(f"at most the runner's own peak ({self.runner_peak_kib:.0f} KiB), "
                                           "which a child forked from it inherits: not measurable this way")
            else:
                out[metric.name] = value
        return out


def _own_peak_kib() -> float | None:
    """This process's peak resident set (VmHWM), KiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return None
