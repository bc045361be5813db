"""``perf stat`` counters of the workload: hardware events where the machine has a
PMU, software events (task-clock, context-switches, cpu-migrations, page-faults)
everywhere. An event the machine cannot count is Missing with perf's reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from perflearn.errors import UnsupportedError

from .base import Collector, Missing

PERF_FILE = "perf-stat.csv"


def parse_perf_csv(text: str) -> dict[str, tuple[float | None, str, str | None]]:
    """Rows of ``perf stat -x,`` output: event -> (value or None, unit, reason)."""
    rows: dict[str, tuple[float | None, str, str | None]] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        raw, unit, event = fields[0], fields[1], fields[2]
        if raw.startswith("<"):
            rows[event] = (None, unit, raw.strip("<>"))
            continue
        try:
            rows[event] = (float(raw), unit, None)
        except ValueError:
            rows[event] = (None, unit, f"unparsable value {raw!r}")
    return rows


def find_event(rows: dict, event: str):
    """perf may print an event with modifiers it added (``cycles:u``)."""
    if event in rows:
        return rows[event]
    for name, row in rows.items():
        if name.split(":")[0] == event.split(":")[0]:
            return row
    return None


class PerfStat(Collector):
    source = "perf"
    OPTIONS = {"event": ((str,), True), "scale": ((int, float), False)}

    def __init__(self, metrics):
        super().__init__(metrics)
        self.events = list(dict.fromkeys(m.options["event"] for m in metrics))

    @classmethod
    def validate(cls, metric):
        event = metric.options["event"]
        if not event or any(c in event for c in ", \t"):
            raise ValueError(f"event: one perf event name per metric, got {event!r}")

    def check(self) -> list[str]:
        if shutil.which("perf") is None:
            raise UnsupportedError("perf is not installed (Debian package linux-perf), needed by metric(s) "
                                   + ", ".join(m.name for m in self.metrics))
        probe = subprocess.run(
            ["perf", "stat", "-x,", "-e", ",".join(self.events), "true"], capture_output=True, text=True, timeout=30
        )
        if probe.returncode != 0 and "<not" not in probe.stderr:
            first = (probe.stderr.strip().splitlines() or ["perf failed"])[0]
            raise UnsupportedError(f"perf stat -e {','.join(self.events)}: {first}")
        rows = parse_perf_csv(probe.stderr)
        warnings = []
        for metric in self.metrics:
            row = find_event(rows, metric.options["event"])
            if row is None or row[0] is None:
                reason = row[2] if row else "not reported"
                warnings.append(f"metric {metric.name}: perf event {metric.options['event']!r} is {reason} "
                                "on this machine; it will be missing (NULL)")
        return warnings

    def before(self, run):
        workload = run.processes["workload"]
        output = str(Path(run.run_dir) / PERF_FILE)
        workload.argv = ["perf", "stat", "-x,", "--no-big-num", "-o", output, "-e", ",".join(self.events), "--",
                         *workload.argv]

    def values(self, run, result):
        path = Path(run.run_dir) / PERF_FILE
        try:
            rows = parse_perf_csv(path.read_text())
        except OSError:
            rows = {}
        out = {}
        for metric in self.metrics:
            row = find_event(rows, metric.options["event"])
            if row is None:
                out[metric.name] = Missing(f"perf reported no {metric.options['event']!r} (run {result.status})")
            elif row[0] is None:
                out[metric.name] = Missing(f"perf event {metric.options['event']!r}: {row[2]}")
            else:
                out[metric.name] = row[0] * float(metric.options.get("scale", 1.0))
        return out
