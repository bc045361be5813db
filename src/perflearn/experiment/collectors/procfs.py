"""Deltas of /proc counters over the workload's lifetime.

One reader per file, each returning {key: value}:
- ``interrupts``: per IRQ number and per name (``virtio0-input.0``), summed over CPUs
  or for one ``cpu``;
- ``softirqs``: ``NET_RX``, ``TIMER``, ... summed over CPUs or for one ``cpu``;
- ``stat``: ``ctxt``, ``intr``, ``processes``, and ``cpu.user``/``cpu3.idle``... in seconds;
- ``vmstat``: every counter (``pgfault``, ``pgmajfault``, ...);
- ``net/dev``: ``IFACE.rx_bytes``, ``IFACE.tx_packets``, ...
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


def parse_per_cpu(text: str, cpu: int | None) -> dict[str, float]:
    """/proc/interrupts and /proc/softirqs: a header of CPUs, then one row per source."""
    lines = text.splitlines()
    ncpu = len(lines[0].split()) if lines else 0
    out: dict[str, float] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        fields = rest.split()
        counts = []
        for field in fields[:ncpu]:
            if not field.isdigit():
                break
            counts.append(int(field))
        if not counts:
            continue
        value = float(sum(counts)) if cpu is None else float(counts[cpu]) if cpu < len(counts) else 0.0
        label = label.strip()
        out[label] = value
        names = fields[len(counts):]
        if label.isdigit() and names:  # "24: 1 0 IO-APIC 4-edge ttyS0": also keyed by device, summed if shared
            out[names[-1]] = out.get(names[-1], 0.0) + value
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


def read(file: str, cpu: int | None = None, root: str = "/proc") -> dict[str, float]:
    with open(os.path.join(root, file)) as f:
        return READERS[file](f.read(), cpu)


def pick(counters: dict[str, float], metric) -> float | Missing:
    if "key" in metric.options:
        key = metric.options["key"]
        if key not in counters:
            return Missing(f"no {key!r} in /proc/{metric.options['file']}")
        return counters[key]
    pattern = re.compile(metric.options["match"])
    matched = [v for k, v in counters.items() if pattern.search(k)]
    if not matched:
        return Missing(f"nothing matches {metric.options['match']!r} in /proc/{metric.options['file']}")
    return float(sum(matched))


class ProcDelta(Collector):
    source = "proc"
    OPTIONS = {"file": ((str,), True), "key": ((str,), False), "match": ((str,), False), "cpu": ((int,), False)}

    @classmethod
    def validate(cls, metric):
        options = metric.options
        if options["file"] not in READERS:
            raise ValueError(f"file: expected one of {', '.join(READERS)}, got {options['file']!r}")
        if ("key" in options) == ("match" in options):
            raise ValueError("key: give exactly one of key or match")
        if "match" in options:
            try:
                re.compile(options["match"])
            except re.error as exc:
                raise ValueError(f"match: not a valid regular expression ({exc})") from None
        if "cpu" in options and options["file"] not in ("interrupts", "softirqs"):
            raise ValueError("cpu: only interrupts and softirqs are per CPU (use stat key cpuN.user)")

    def __init__(self, metrics):
        super().__init__(metrics)
        self.files = sorted({(m.options["file"], m.options.get("cpu")) for m in metrics}, key=str)
        self._before: dict = {}
        self._after: dict = {}

    def check(self) -> list[str]:
        snapshot = self._snapshot()
        for metric in self.metrics:
            value = pick(snapshot[(metric.options["file"], metric.options.get("cpu"))], metric)
            if isinstance(value, Missing):
                raise ValueError(f"metric {metric.name}: {value.reason} on this machine")
        return []

    def _snapshot(self) -> dict:
        return {(file, cpu): read(file, cpu) for file, cpu in self.files}

    def before(self, run):
        self._before = self._snapshot()

    def after(self, run):
        self._after = self._snapshot()

    def values(self, run, result):
        out = {}
        for metric in self.metrics:
            key = (metric.options["file"], metric.options.get("cpu"))
            start, end = pick(self._before.get(key, {}), metric), pick(self._after.get(key, {}), metric)
            if isinstance(start, Missing):
                out[metric.name] = start
            elif isinstance(end, Missing):
                out[metric.name] = end
            else:
                out[metric.name] = end - start
        return out
