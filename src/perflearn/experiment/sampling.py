"""Interval sampling: every N ms during a run, OS signals of the system and of the
workload's processes, and perf counters where the machine has them.

The workload's processes are its root process, every descendant of it (by parent PID,
so children that left the process group with setsid(), such as fio's job processes,
still count) and every process of the root's process group (members re-parented to
init when their parent exited).

Counters become rates over the interval (per second, or a fraction of the interval
for times); gauges are taken as they are. A signal this kernel does not offer (no
/proc/pressure, no /proc/PID/io, a perf event without a PMU) produces no samples:
missing, never 0.

Sample names:
  sys.cpu.<user|nice|system|idle|iowait|irq|softirq|steal>   CPUs' worth (0 to the number of CPUs)
  sys.ctxt, sys.intr, sys.forks                               per second
  sys.procs_running, sys.procs_blocked                        gauges
  sys.vm.<pgfault|pgmajfault|pswpin|pswpout|pgscan|pgsteal>   per second
  sys.mem.available, sys.mem.dirty, sys.mem.anon, sys.mem.total bytes (gauges; anon: AnonPages)
  sys.psi.<cpu|memory|io>.<some|full>                         fraction of time stalled
  sys.softirq.<NET_RX|NET_TX|TIMER|SCHED|BLOCK|RCU|...>       per second
  sys.net.<rx_bytes|tx_bytes|rx_packets|tx_packets>           per second, all interfaces
  sys.disk.<read_bytes|write_bytes>                           per second, whole disks
  proc.cpu.<user|system>                                      CPUs' worth
  proc.<minflt|majflt|vcsw|ivcsw|read_bytes|write_bytes>       per second
  proc.<rchar|wchar>                                          per second: bytes through read/write calls
                                                              (files, pipes and sockets alike)
  proc.run_delay                                              fraction of time runnable but waiting
  proc.threads, proc.rss, proc.count                          gauges
  proc.rss_anon                                               bytes (gauge): resident anonymous memory
                                                              (RssAnon; missing on kernels without it)
  perf.<event>                                                per second (perf stat -I)
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .collectors.procfs import TICKS, parse_per_cpu
from .collectors.perf import keep_status, parse_perf_csv, read_status

PAGE = os.sysconf("SC_PAGE_SIZE")
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_VM_KEYS = ("pgfault", "pgmajfault", "pswpin", "pswpout")
_MEMINFO = {"MemAvailable": "available", "Dirty": "dirty", "AnonPages": "anon", "MemTotal": "total"}
_WHOLE_DISK = re.compile(r"^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme\d+n\d+|mmcblk\d+)$")


@dataclass
class SamplingSpec:
    interval: float = 1.0
    system: bool = True
    process: bool = True
    perf_events: list[str] = field(default_factory=list)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def system_counters() -> tuple[dict[str, float], dict[str, float]]:
    """(counters, gauges) of the whole system, read now."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    stat = _read("/proc/stat") or ""
    for line in stat.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu":
            for name, raw in zip(_CPU_FIELDS, fields[1:]):
                counters[f"sys.cpu.{name}"] = int(raw) / TICKS
        elif fields[0] in ("ctxt", "processes"):
            counters["sys.ctxt" if fields[0] == "ctxt" else "sys.forks"] = float(fields[1])
        elif fields[0] == "intr":
            counters["sys.intr"] = float(fields[1])
        elif fields[0] in ("procs_running", "procs_blocked"):
            gauges[f"sys.{fields[0]}"] = float(fields[1])
    vmstat = _read("/proc/vmstat") or ""
    for line in vmstat.splitlines():
        key, _, value = line.partition(" ")
        if key in _VM_KEYS:
            counters[f"sys.vm.{key}"] = float(value)
        elif _reclaim(key):  # summed over who reclaims; a kernel without them: missing, not 0
            name = "sys.vm.pgscan" if key.startswith("pgscan_") else "sys.vm.pgsteal"
            counters[name] = counters.get(name, 0.0) + float(value)
    meminfo = _read("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        key, _, value = line.partition(":")
        if key in _MEMINFO:
            gauges[f"sys.mem.{_MEMINFO[key]}"] = float(value.split()[0]) * 1024
    for resource in ("cpu", "memory", "io"):
        text = _read(f"/proc/pressure/{resource}")
        for line in (text or "").splitlines():
            kind, _, rest = line.partition(" ")
            total = rest.rsplit("total=", 1)
            if len(total) == 2:
                counters[f"sys.psi.{resource}.{kind}"] = float(total[1]) / 1e6  # microseconds -> seconds
    softirqs = _read("/proc/softirqs")
    if softirqs:
        for name, value in parse_per_cpu(softirqs, None).items():
            counters[f"sys.softirq.{name}"] = value
    netdev = _read("/proc/net/dev") or ""
    totals = [0.0, 0.0, 0.0, 0.0]
    for line in netdev.splitlines()[2:]:
        fields = line.partition(":")[2].split()
        if len(fields) >= 10:
            for i, column in enumerate((0, 8, 1, 9)):
                totals[i] += float(fields[column])
    for name, value in zip(("rx_bytes", "tx_bytes", "rx_packets", "tx_packets"), totals):
        counters[f"sys.net.{name}"] = value
    diskstats = _read("/proc/diskstats") or ""
    read = written = 0.0
    for line in diskstats.splitlines():
        fields = line.split()
        if len(fields) >= 10 and _WHOLE_DISK.match(fields[2]):
            read += float(fields[5]) * 512
            written += float(fields[9]) * 512
    counters["sys.disk.read_bytes"], counters["sys.disk.write_bytes"] = read, written
    return counters, gauges


def _parents() -> dict[int, tuple[int, int]]:
    """PID -> (parent PID, process group) of every process now."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _read(f"/proc/{entry.name}/stat")
            if stat:
                fields = stat.rsplit(")", 1)[1].split()
                out[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return out


def group_members(pgid: int) -> list[int]:
    """Processes whose process group is ``pgid``."""
    return sorted(pid for pid, (_, group) in _parents().items() if group == pgid)


def workload_members(root: int) -> list[int]:
    """The workload's processes: ``root``, its descendants (by parent PID, whatever their
    session or process group) and the members of process group ``root`` with theirs."""
    table = _parents()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, (_, group) in table.items() if group == root or pid == root]
    members: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in members:
            members.add(pid)
            todo += children.get(pid, [])
    return sorted(members)


def _reclaim(key: str) -> bool:
    """A vmstat count of pages scanned or stolen by one reclaimer: kswapd, direct or
    khugepaged (older kernels per zone: ``pgscan_kswapd_normal``). Not the same pages again
    by type (``pgscan_anon``, ``pgscan_file``), nor throttling events (``pgscan_direct_throttle``)."""
    kind, _, rest = key.partition("_")
    return (kind in ("pgscan", "pgsteal") and rest.split("_")[0] in ("kswapd", "direct", "khugepaged")
            and rest != "direct_throttle")


def process_counters(pids: list[int]) -> tuple[dict[str, float], dict[str, float]]:
    """(counters, gauges) summed over ``pids``."""
    counters = {k: 0.0 for k in ("proc.cpu.user", "proc.cpu.system", "proc.minflt", "proc.majflt")}
    # from files a kernel may lack (schedstat without CONFIG_SCHED_INFO): missing, not 0, until read
    optional: dict[str, float] = {}
    gauges = {"proc.threads": 0.0, "proc.rss": 0.0, "proc.count": 0.0}
    rss_anon: float | None = None
    io = {"proc.read_bytes": 0.0, "proc.write_bytes": 0.0, "proc.rchar": 0.0, "proc.wchar": 0.0}
    io_seen = False
    for pid in pids:
        stat = _read(f"/proc/{pid}/stat")
        if not stat:
            continue  # exited between the listing and now
        fields = stat.rsplit(")", 1)[1].split()
        counters["proc.minflt"] += float(fields[7])
        counters["proc.majflt"] += float(fields[9])
        counters["proc.cpu.user"] += int(fields[11]) / TICKS
        counters["proc.cpu.system"] += int(fields[12]) / TICKS
        gauges["proc.threads"] += float(fields[17])
        gauges["proc.rss"] += float(fields[21]) * PAGE
        gauges["proc.count"] += 1
        schedstat = _read(f"/proc/{pid}/schedstat")
        if schedstat:
            optional["proc.run_delay"] = optional.get("proc.run_delay", 0.0) + int(schedstat.split()[1]) / 1e9
        status = _read(f"/proc/{pid}/status") or ""
        for line in status.splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                name = "proc.vcsw" if line.startswith("voluntary") else "proc.ivcsw"
                optional[name] = optional.get(name, 0.0) + float(line.split()[1])
            elif line.startswith("RssAnon:"):
                rss_anon = (rss_anon or 0.0) + float(line.split()[1]) * 1024
        io_text = _read(f"/proc/{pid}/io")
        if io_text:
            io_seen = True
            for line in io_text.splitlines():
                key, _, value = line.partition(": ")
                if key in ("read_bytes", "write_bytes", "rchar", "wchar"):
                    io[f"proc.{key}"] += float(value)
    counters.update(optional)
    if io_seen:
        counters.update(io)
    if rss_anon is not None:  # kernels before 4.5 have no RssAnon: missing, not 0
        gauges["proc.rss_anon"] = rss_anon
    return counters, gauges


class Sampler:
    """Samples in a background thread from ``start`` to ``stop``."""

    def __init__(self, spec: SamplingSpec):
        self.spec = spec
        self.samples: list[tuple[str, float, float | None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._perf_file: Path | None = None
        self._status_file: Path | None = None

    # -- perf stat -I wraps the workload: its counters follow every child ------
    def wrap(self, argv: list[str], run_dir: Path) -> list[str]:
        if not self.spec.perf_events:
            return argv
        self._perf_file = Path(run_dir) / "perf-interval.csv"
        self._status_file = Path(run_dir) / "sampled-workload-status"
        interval_ms = max(10, int(self.spec.interval * 1000))
        return ["perf", "stat", "-I", str(interval_ms), "-x,", "--no-big-num", "-o", str(self._perf_file),
                "-e", ",".join(self.spec.perf_events), "--", *keep_status(argv, self._status_file)]

    def workload_exit(self) -> tuple[int | None, int | None] | None:
        """(exit code, signal) of a command run under perf stat -I (``read_status``); None when
        not wrapped or when it never finished."""
        return None if self._status_file is None else read_status(self._status_file)

    def workload_wall(self) -> float | None:
        """Seconds the command ran under perf stat -I (its last line's time, counted from the
        command's start: perf's own start-up, about 10 ms, is not in it); None when not wrapped
        or when perf wrote no line."""
        if self._perf_file is None:
            return None
        return max((t for t, _ in _stamped(_read(str(self._perf_file)) or "")), default=None)

    def start(self, root: int) -> None:
        """Sample the system and the workload whose root process is ``root`` (see
        ``workload_members``)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(root, time.monotonic()), daemon=True,
                                        name="perflearn-sampler")
        self._thread.start()

    def stop(self) -> list[tuple[str, float, float | None]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._perf_file is not None:
            self.samples += perf_interval_samples(self._perf_file, self.spec.interval)
        return sorted(self.samples, key=lambda s: (s[1], s[0]))

    def _read(self, root: int) -> tuple[dict[str, float], dict[str, float]]:
        counters: dict[str, float] = {}
        gauges: dict[str, float] = {}
        if self.spec.system:
            c, g = system_counters()
            counters.update(c)
            gauges.update(g)
        if self.spec.process:
            members = workload_members(root)
            if members:
                c, g = process_counters(members)
                counters.update(c)
                gauges.update(g)
        return counters, gauges

    def _loop(self, root: int, t0: float) -> None:
        previous, _ = self._read(root)
        previous_time = time.monotonic()
        tick = 1
        while not self._stop.wait(max(0.0, t0 + tick * self.spec.interval - time.monotonic())):
            tick += 1
            counters, gauges = self._read(root)
            now = time.monotonic()
            dt = now - previous_time
            t = round(now - t0, 6)
            if self.spec.process and "proc.count" not in gauges:
                break  # every process of the workload is gone
            for name, value in counters.items():
                if name in previous and dt > 0:
                    self.samples.append((name, t, max(0.0, value - previous[name]) / dt))
            for name, value in gauges.items():
                self.samples.append((name, t, value))
            previous, previous_time = counters, now


def _stamped(text: str) -> Iterator[tuple[float, str]]:
    """(time, the rest) of each line of ``perf stat -I -x,`` output; comments and blank lines skipped."""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        stamp, _, rest = line.partition(",")
        try:
            t = float(stamp)
        except ValueError:
            continue
        yield t, rest


def perf_interval_samples(path: Path, interval: float) -> list[tuple[str, float, float | None]]:
    """Rows of ``perf stat -I -x,``: time,value,unit,event,... -> (perf.<event>, t, per second)."""
    samples = []
    last_time: dict[str, float] = {}
    for t, rest in _stamped(_read(str(path)) or ""):
        rows = parse_perf_csv(rest)
        for event, (value, _unit, _reason) in rows.items():
            span = t - last_time.get(event, t - interval)
            last_time[event] = t
            if value is not None and span > 0:
                samples.append((f"perf.{event}", round(t, 6), value / span))
            # an unsupported event gives no samples: missing, never 0
    return samples
