"""Wall time and exit status of the workload."""

from __future__ import annotations

from .base import Collector, Missing


class WallTime(Collector):
    source = "time"
    default_unit = "s"

    def values(self, run, result):
        return {m.name: result.wall_s for m in self.metrics}


class ExitStatus(Collector):
    source = "exit"
    default_unit = ""

    def values(self, run, result):
        if result.exit_code is None:
            value = Missing(f"killed by signal {result.signal}" if result.signal else "the workload did not exit")
        else:
            value = float(result.exit_code)
        return {m.name: value for m in self.metrics}
