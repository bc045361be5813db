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
WALL_EVENT = "duration_time"  # ns from the command's start to its end, without perf's own start-up
STATUS_FILE = "workload-status"


def keep_status(argv: list[str], status_file: Path) -> list[str]:
    """``argv`` behind a shell that writes its exit status to ``status_file``: perf stat exits
    0 whatever its command did (a workload's exit 3, SIGKILL or SIGSEGV was stored as ok)."""
    return ["sh", "-c", '"$@"; s=$?; echo $s > "$0"; exit $s', str(status_file), *argv]


def read_status(status_file: Path) -> tuple[int | None, int | None] | None:
    """(exit code, signal) that ``keep_status``'s shell wrote (128 + N is signal N); None when
    it wrote nothing (the command never finished: killed with perf)."""
    try:
        code = int(Path(status_file).read_text().strip())
    except (OSError, ValueError):
        return None
    return (None, code - 128) if 128 < code < 128 + 65 else (code, None)


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
        self.timed = False  # WALL_EVENT counted too (``check`` found it): the run's wall time is the workload's

    @classmethod
    def validate(cls, metric):
        event = metric.options["event"]
        if not event or any(c in event for c in ", \t"):
            raise ValueError(f"event: one perf event name per metric, got {event!r}")
        if not metric.unit and "scale" not in metric.options:  # perf stat: clocks in ms, every other event a count
            metric.unit = "ms" if event.split(":")[0] in ("task-clock", "cpu-clock") else "count"

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
        timing = subprocess.run(["perf", "stat", "-x,", "-e", WALL_EVENT, "true"], capture_output=True, text=True,
                                timeout=30)
        row = find_event(parse_perf_csv(timing.stderr), WALL_EVENT) if timing.returncode == 0 else None
        self.timed = row is not None and row[0] is not None  # an older perf may not have it: the runner's clock then
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
        status = Path(run.run_dir) / STATUS_FILE
        events = self.events + ([WALL_EVENT] if self.timed and WALL_EVENT not in self.events else [])
        workload.argv = ["perf", "stat", "-x,", "--no-big-num", "-o", output, "-e", ",".join(events), "--",
                         *keep_status(workload.argv, status)]

    def workload_exit(self, run):
        return read_status(Path(run.run_dir) / STATUS_FILE)

    def workload_wall(self, run):
        """perf's own start-up (about 10 ms, 20 % of a 50-ms workload) was in the run's wall time."""
        if not self.timed:
            return None
        try:
            row = find_event(parse_perf_csv((Path(run.run_dir) / PERF_FILE).read_text()), WALL_EVENT)
        except OSError:
            return None
        return row[0] / 1e9 if row is not None and row[0] is not None else None

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
