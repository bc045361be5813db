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

    def values(self, run, result):
        out = {}
        for metric in self.metrics:
            if result.rusage is None:
                out[metric.name] = Missing("no resource usage: the workload was not waited for")
            else:
                out[metric.name] = float(getattr(result.rusage, FIELDS[metric.options["field"]][0]))
        return out
