"""Deltas of /proc counters over the workload's lifetime.

One reader per file, each returning {key: value}:
- ``interrupts``: per IRQ number and per name (``virtio0-input.0``), summed over CPUs
  or for one ``cpu``;
- ``softirqs``: ``NET_RX``, ``TIMER``, ... summed over CPUs or for one ``cpu``;
- ``stat``: ``ctxt``, ``intr``, ``processes``, and ``cpu.user``/``cpu3.idle``... in seconds;
- ``vmstat``: every counter (``pgfault``, ``pgmajfault``, ...);
- ``net/dev``: ``IFACE.rx_bytes``, ``IFACE.tx_packets``, ...
- ``process``: the counters of one companion (``process = "memcached"``), summed over it,
  its descendants and its process group: ``cpu`` (user + system seconds, all threads),
  ``cpu.user``, ``cpu.system``, ``minflt``, ``majflt``, ``run_delay``, ``vcsw``, ``ivcsw``,
  and where the kernel has them ``read_bytes``, ``write_bytes``, ``rchar``, ``wchar``.
  A server's CPU time per request is the measure of its cost (the manager follows it).
``key`` names one counter; ``match`` a regular expression whose matching keys are summed.
"""

from __future__ import annotations

import os
import re

from .base import Collector, Missing

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
_NETDEV_FIELDS = (
    "rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast",
    "tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed",
)
TICKS = os.sysconf("SC_CLK_TCK")


class PerCpuCounts(dict):
    """Counters of /proc/interrupts or /proc/softirqs by source (a numbered interrupt under
    its number and again under its device's name), and ``rows``: (number or name, device
    name or None, value) once per source, which ``match`` sums (the keys count IRQs twice)."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[str, str | None, float]] = []


def cpu_count(text: str) -> int:
    """The CPUs in the header of /proc/interrupts or /proc/softirqs."""
    lines = text.splitlines()
    return len(lines[0].split()) if lines else 0


def parse_per_cpu(text: str, cpu: int | None) -> PerCpuCounts:
    """/proc/interrupts and /proc/softirqs: a header of CPUs, then one row per source. A row
    without a count for ``cpu`` (ERR, MIS: one count only) has no value for it."""
    lines = text.splitlines()
    ncpu = cpu_count(text)
    out = PerCpuCounts()
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        fields = rest.split()
        counts = []
        for field in fields[:ncpu]:
            if not field.isdigit():
                break
            counts.append(int(field))
        if not counts or (cpu is not None and cpu >= len(counts)):
            continue
        value = float(sum(counts)) if cpu is None else float(counts[cpu])
        label = label.strip()
        out[label] = value
        names = fields[len(counts):]
        device = names[-1] if label.isdigit() and names else None
        if device:  # "24: 1 0 IO-APIC 4-edge ttyS0": also keyed by device, summed if shared
            out[device] = out.get(device, 0.0) + value
        out.rows.append((label, device, value))
    return out


def parse_stat(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith("cpu"):
            for name, raw in zip(_CPU_FIELDS, fields[1:]):
                out[f"{fields[0]}.{name}"] = int(raw) / TICKS
        elif len(fields) >= 2 and fields[1].isdigit():
            out[fields[0]] = float(fields[1])
    return out


def parse_vmstat(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("-").isdigit():
            out[fields[0]] = float(fields[1])
    return out


def parse_net_dev(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines()[2:]:
        iface, _, rest = line.partition(":")
        for name, raw in zip(_NETDEV_FIELDS, rest.split()):
            out[f"{iface.strip()}.{name}"] = float(raw)
    return out


READERS = {
    "interrupts": lambda text, cpu: parse_per_cpu(text, cpu),
    "softirqs": lambda text, cpu: parse_per_cpu(text, cpu),
    "stat": lambda text, cpu: parse_stat(text),
    "vmstat": lambda text, cpu: parse_vmstat(text),
    "net/dev": lambda text, cpu: parse_net_dev(text),
}


PROCESS = "process"  # a companion's own counters, not a /proc file of the system
PROCESS_KEYS = ("cpu", "cpu.user", "cpu.system", "minflt", "majflt", "run_delay", "vcsw", "ivcsw",
                "read_bytes", "write_bytes", "rchar", "wchar")


def read(file: str, cpu: int | None = None, root: str = "/proc") -> dict[str, float]:
    with open(os.path.join(root, file)) as f:
        return READERS[file](f.read(), cpu)


def read_process(pid: int) -> dict[str, float]:
    """The counters (not the gauges) of process ``pid``, its descendants and its process
    group, keyed without the samplers' ``proc.`` prefix, plus ``cpu`` = user + system."""
    from ..sampling import process_counters, workload_members

    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return {}  # it has exited and was reaped
    if state in ("Z", "X"):
        return {}  # it has exited: a server that died mid-run has no cost per request to tell
    members = workload_members(pid)
    counters, _ = process_counters(members)
    out = {key.removeprefix("proc."): value for key, value in counters.items()}
    out["cpu"] = out["cpu.user"] + out["cpu.system"]
    return out


def pick(counters: dict[str, float], metric) -> float | Missing:
    if "key" in metric.options:
        key = metric.options["key"]
        if key not in counters:
            return Missing(f"no {key!r} in /proc/{metric.options['file']}")
        return counters[key]
    pattern = re.compile(metric.options["match"])
    if isinstance(counters, PerCpuCounts):  # each source once, by its number or its device's name
        matched = [v for label, device, v in counters.rows if pattern.search(label) or (device and pattern.search(device))]
    else:
        matched = [v for k, v in counters.items() if pattern.search(k)]
    if not matched:
        return Missing(f"nothing matches {metric.options['match']!r} in /proc/{metric.options['file']}")
    return float(sum(matched))


class ProcDelta(Collector):
    source = "proc"
    OPTIONS = {"file": ((str,), True), "key": ((str,), False), "match": ((str,), False), "cpu": ((int,), False),
               "process": ((str,), False)}

    @classmethod
    def validate(cls, metric):
        options = metric.options
        if options["file"] not in (*READERS, PROCESS):
            raise ValueError(f"file: expected one of {', '.join((*READERS, PROCESS))}, got {options['file']!r}")
        if (options["file"] == PROCESS) != ("process" in options):
            raise ValueError("process: give the companion's name with file = \"process\", and only with it")
        if ("key" in options) == ("match" in options):
            raise ValueError("key: give exactly one of key or match")
        if options["file"] == PROCESS and options["process"] == "workload":
            raise ValueError("process: the workload starts after the counters are first read; "
                             "its own CPU time is source = \"rusage\"")
        if options["file"] == PROCESS and options.get("key", "cpu") not in PROCESS_KEYS:
            raise ValueError(f"key: a process has {', '.join(PROCESS_KEYS)}; got {options['key']!r}")
        if "match" in options:
            try:
                re.compile(options["match"])
            except re.error as exc:
                raise ValueError(f"match: not a valid regular expression ({exc})") from None
        if "cpu" in options and options["file"] not in ("interrupts", "softirqs"):
            raise ValueError("cpu: only interrupts and softirqs are per CPU (use stat key cpuN.user)")
        if "cpu" in options and (isinstance(options["cpu"], bool) or options["cpu"] < 0):
            raise ValueError(f"cpu: a CPU number (0 or more), got {options['cpu']!r}")  # -1 read the last CPU

    def __init__(self, metrics):
        super().__init__(metrics)
        self.files = sorted({self._key(m) for m in metrics}, key=str)
        self._before: dict = {}
        self._after: dict = {}

    @staticmethod
    def _key(metric) -> tuple:
        """(file, cpu or the process's name)"""
        return metric.options["file"], metric.options.get("cpu", metric.options.get("process"))

    def check(self) -> list[str]:
        snapshot = self._snapshot(None)
        for metric in self.metrics:
            if metric.options["file"] == PROCESS:
                continue  # no process runs yet: its counters are all read the same way
            if metric.options.get("cpu") is not None:  # a CPU beyond the machine's read as 0
                with open(os.path.join("/proc", metric.options["file"])) as f:
                    cpus = cpu_count(f.read())
                if metric.options["cpu"] >= cpus:
                    raise ValueError(f"metric {metric.name}: cpu {metric.options['cpu']}: "
                                     f"/proc/{metric.options['file']} counts CPUs 0-{cpus - 1} on this machine")
            value = pick(snapshot[self._key(metric)], metric)
            if isinstance(value, Missing):
                raise ValueError(f"metric {metric.name}: {value.reason} on this machine")
        return []

    def _snapshot(self, run) -> dict:
        snapshot: dict = {}
        for file, which in self.files:
            if file != PROCESS:
                snapshot[file, which] = read(file, which)
            elif run is not None:
                process = run.processes.get(which)
                counters = read_process(process.pid) if process is not None and process.pid is not None else {}
                if counters:
                    snapshot[file, which] = counters
        return snapshot

    def before(self, run):
        self._before = self._snapshot(run)

    def mark(self, run):  # counted over the measured phase only
        self._before = self._snapshot(run)

    def after(self, run):
        self._after = self._snapshot(run)

    def values(self, run, result):
        out = {}
        for metric in self.metrics:
            key = self._key(metric)
            if key[0] == PROCESS and key not in self._before:
                out[metric.name] = Missing(f"no process {key[1]!r} was running when the workload started "
                                           f"(processes: {', '.join(run.processes) or 'none'})")
                continue
            if key[0] == PROCESS and key not in self._after:
                out[metric.name] = Missing(f"process {key[1]!r} had exited when the workload ended")
                continue
            start, end = pick(self._before.get(key, {}), metric), pick(self._after.get(key, {}), metric)
            if isinstance(start, Missing):
                out[metric.name] = start
            elif isinstance(end, Missing):
                out[metric.name] = end
            else:
                out[metric.name] = end - start
        return out
