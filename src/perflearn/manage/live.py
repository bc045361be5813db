"""A real latency-critical service under the manager: started in its own cgroups,
driven by perflearn-load, observed by perflearn-sniff's live interval stream.

Cores are a cgroup cpuset (the first N of the service's CPUs); the speed level is the
CPU frequency through cpufreq's userspace governor where the machine has it, else the
CFS quota per core stands in (quota = cores x level CPUs). Utilisation is the service's
CPU time (cgroup cpuacct / cpu.stat) over what its configuration allows.

The service's CPUs are those this process may use, or ``service_cpus``; given, the load
generator, the sniffer and the manager itself run on the others (the harness), as a
load generator on its own client machine would (the seed's did): on one machine they
would otherwise take CPU time from the service they measure.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from perflearn.errors import PerflearnError, RunnerError, UnsupportedError, UsageError
from perflearn.experiment import cgroups
from perflearn.experiment.actuators import CpuFrequency, cpu_list, parse_cpus
from perflearn.experiment.cpufreq import CpuFreq
from perflearn.experiment.knobs import Domain, Knob
from perflearn.lifetime import alive, died_with, signals_held
from perflearn.runner import originals
from perflearn.runner.process import describe_status
from perflearn.wire import LiveSniffer, locate

from .config import ConfigSpace, Configuration
from .hostspeed import HostSpeedProbe
from .loop import Measured, Service
from .power import Rapl
from .stream import LineStream

# how far ahead the load announces its start: its line reaches the sniffer's mark through a pipe, a
# thread of this process and a file, milliseconds (more on a loaded host); it delays each pass as long
START_IN_S = 0.25
# policies taking turns (--interleave): each turn begins after this long at its own configuration, recorded in no
# pass (loop.take_turns): a cpuset cut makes memcached's CPU time per request jump for a second or two
HANDOVER_S = 2.0


def handover_intervals(interval_s: float, seconds: float | None = None) -> int:
    """The intervals a turn's hand-over of ``seconds`` lasts (default ``HANDOVER_S``)."""
    return math.ceil((HANDOVER_S if seconds is None else seconds) / interval_s - 1e-9)


def _usage(group: cgroups.Group) -> tuple[float | None, float | None]:
    """(CPU seconds the group used so far, seconds its run queues were throttled by its CFS
    quota so far), each None where the kernel does not report it. CPU time: v1
    cpuacct.usage, v2 cpu.stat usage_usec; throttled: cpu.stat throttled_time (v1, ns) or
    throttled_usec (v2), summed over its CPUs by the kernel. cpu.stat is read once."""
    stat_file = group.dirs.get("cpu", Path("/nonexistent")) / "cpu.stat"
    stat = {key: int(value) for key, _, value in (line.partition(" ") for line in stat_file.read_text().splitlines())
            if value.strip().isdigit()} if stat_file.exists() else {}
    cpu = stat["usage_usec"] / 1e6 if "usage_usec" in stat else None
    for controller in ("cpuacct", "cpu"):  # v1: cpuacct mounted alone, or with cpu
        usage = group.dirs.get(controller, Path("/nonexistent")) / "cpuacct.usage"
        if usage.exists():
            cpu = int(usage.read_text()) / 1e9
            break
    throttled = (stat["throttled_time"] / 1e9 if "throttled_time" in stat
                 else stat["throttled_usec"] / 1e6 if "throttled_usec" in stat else None)
    return cpu, throttled


class LiveService(Service):
    def __init__(self, command: str, port: int, space: ConfigSpace, interval_s: float, protocol: str,
                 load: list[str], interface: str = "lo", name: str = "manage", tick_s: float | None = None,
                 service_cpus: list[int] | None = None, rapl: Rapl | None = None,
                 warn: Callable[[str], None] | None = None):
        self.affinity = sorted(os.sched_getaffinity(0))  # restored on close: the harness may be moved off the service's
        if service_cpus:
            self.cpus = check_service_cpus(service_cpus, self.affinity, max(space.cores))
        elif max(space.cores) > len(self.affinity):
            raise UsageError(f"--cores {max(space.cores)}: this machine lets us use {len(self.affinity)} CPUs")
        else:
            self.cpus = self.affinity
        self.harness = [c for c in self.affinity if c not in self.cpus]  # none unless the service was given CPUs
        self.space, self.interval, self.tick_s = space, interval_s, tick_s
        self.rapl = rapl  # measured power, each interval's (the package's: the harness's share included)
        controllers = {"cpuset", "cpu"}
        if cgroups.version() == 1 and (cgroups.root() / "cpuacct").is_dir():
            controllers.add("cpuacct")  # CPU time, where it is its own v1 hierarchy
        try:
            # groups of managers that were killed and could not remove their own, with what their service left
            cgroups.remove_stale(name, end_processes=True)
            # one group per manager process: two managers never share (or remove) one
            self.group = cgroups.create(f"{name}-{os.getpid()}-service", controllers)
        except UnsupportedError as exc:
            raise UnsupportedError(f"the manager needs cgroup cpuset and cpu controllers: {exc.message}") from None
        # what close() stops, as far as the start got: an interrupt in the preload must not leave them running
        self.governors: CpuFrequency | None = None  # the speed knob where cpufreq is: its governors kept as a runner's
        self.held: list[Path] = []  # their originals on disk, while this manager has them
        self.warn = warn or (lambda message: None)
        self.service: subprocess.Popen | None = None
        self.service_err = None  # the service's stderr, a temporary file
        self.load_err = None  # perflearn-load's
        self.load: subprocess.Popen | None = None
        self.sniffer: LiveSniffer | None = None
        self.load_reader: threading.Thread | None = None
        self.probe: HostSpeedProbe | None = None
        self.marks: tempfile.TemporaryDirectory | None = None
        try:
            self._start(command, port, space, protocol, load, interface)
        except BaseException:
            self.close()
            raise

    def _start(self, command, port, space, protocol, load, interface) -> None:
        interval_s, tick_s = self.interval, self.tick_s
        try:
            # kept on disk as a runner keeps a cpufreq knob's (perflearn.runner.originals): a manager killed
            # outright left its CPUs in the userspace governor at its last frequency; the next one puts them back
            governors = CpuFrequency(Knob("speed", Domain("values", (1,)), "cpufreq", {"cpus": self.cpus}), "manage")
            governors.check()  # UnsupportedError where the machine has no cpufreq
            self.governors = governors
            self.held = originals.take({"speed": governors}, self.warn)
            if not governors.captured:  # not kept on disk (said): put back at close all the same
                governors.capture()
            self.speed = f"speed level = CPU frequency (cpufreq userspace, up to {self.freq.max_khz / 1e3:g} MHz)"
        except UnsupportedError as exc:
            self.speed = f"speed level = CFS quota per core: {exc.message}"
        self.apply(space.maximum)
        files = self.group.procs_files

        cpus = self.cpus
        ends_with_us = died_with()  # a manager killed outright leaves nothing running

        def join() -> None:
            ends_with_us()
            for procs in files:
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))
            os.sched_setaffinity(0, cpus)  # not the harness's CPUs it was forked with

        # stderr to a file: a pipe nobody reads while it runs would stop a service that logs
        self.service_err = tempfile.TemporaryFile()
        argv = shlex.split(command)
        try:
            self.service = subprocess.Popen(argv, preexec_fn=join, process_group=0,
                                            stdout=subprocess.DEVNULL, stderr=self.service_err)
        except (FileNotFoundError, PermissionError) as exc:  # exit 1, the option unnamed (closed by __init__)
            raise UsageError(f"--service: cannot run {argv[0]!r}: {exc.strerror}") from None
        _wait_port(port, self.service, self.service_err, 10.0)
        if self.harness:  # this process's threads, and so the sniffer and the load generator it starts: off the service's CPUs
            _place_threads(self.harness)
        self.probe = HostSpeedProbe().start()  # a thread of this process: on the harness's CPUs when there are some
        self.stream = LineStream(interval_s)  # the sniffer's lines on the load's clock
        self.lost = 0  # packets the kernel dropped from the capture so far, as the last interval recorded said
        self.dropping = False  # the last interval recorded lost some
        self.load_started = threading.Event()
        # the mark's time, for the sniffer; named as the work directory is, so the next manager removes it if
        # this one is killed outright (``remove_stale_work_directories``: perflearn-mark-* were left behind)
        self.marks = tempfile.TemporaryDirectory(prefix=f"{WORKDIR}-{os.getpid()}-mark-")
        self.sniffer = LiveSniffer(interface, bpf=f"tcp port {port}", protocol=protocol, ports=[port],
                                   interval=interval_s, tick=tick_s or interval_s / 10, on_line=self._line,
                                   mark_file=Path(self.marks.name) / "mark").start()
        # the load announces its start this far ahead, so the sniffer's intervals start with it: marked when
        # the line arrived (a pipe, this thread, a signal later), an interval offered none before a step held
        # a few of its requests, and a p95 (session 59's audit)
        load = [*load, "--start-in", f"{START_IN_S:g}"]
        self.load_err = tempfile.TemporaryFile()  # a file, as the service's: nobody reads a pipe during the run
        self.load = subprocess.Popen([str(locate("perflearn-load")), *load], stdout=subprocess.PIPE,
                                     stderr=self.load_err, text=True, preexec_fn=ends_with_us)
        self.load_reader = threading.Thread(target=self._read_load, daemon=True)
        self.load_reader.start()
        self._await_load(timeout=120.0)
        self.last_cpu, self.last_throttled = _usage(self.group)
        self.last_energy = self.rapl.read() if self.rapl is not None else None
        self.last_time = time.monotonic()

    def _line(self, obj: dict) -> None:
        if not self.stream.put(obj) and obj.get("type") == "interval":
            self.lost = _dropped(obj)  # the preload's drops are not the trace's

    def _read_load(self) -> None:
        """Note when the load profile starts; keep the generator's stdout pipe drained."""
        assert self.load.stdout is not None
        for line in self.load.stdout:
            if self.load_started.is_set():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") == "start":
                # the sniffer's intervals start again here, with the trace's: on their own they
                # lie on whole seconds, so a load step fell inside an interval, the first
                # interval came late enough to read as a stall, and each interval was labelled
                # with the load of the one before for part of it. At the start announced, on the
                # monotonic clock both keep to (the sniffer's clock is it plus its offset).
                start = float(obj["monotonic"])  # the sniffer's ready line gave the offset before the load ran
                self.stream.begin(ago=time.monotonic() - start)
                self.sniffer.mark(at=start + self.stream.offset)
                self.load_started.set()

    def _await_load(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.load_started.wait(0.1):
            if self.load.poll() is not None:
                why = f"ended with {_status(self.load)}: {_tail(self.load_err)}"
            elif time.monotonic() > deadline:
                why = f"did not start its profile within {timeout:g} s"
            else:
                continue
            self.close()
            raise UsageError(f"perflearn-load {why}")

    @property
    def horizon(self) -> int | None:
        return self.stream.horizon

    @horizon.setter
    def horizon(self, index: int | None) -> None:
        self.stream.horizon = index

    @property
    def freq(self) -> CpuFreq | None:
        """The speed knob's cpufreq; None where the CFS quota stands in for it."""
        return self.governors.cpufreq if self.governors is not None else None

    @property
    def speed_is_quota(self) -> bool:
        return self.freq is None

    def apply(self, config: Configuration) -> None:
        cpus = self.cpus[:config.cores]
        self.group.set_cpus(",".join(str(c) for c in cpus))
        if self.freq is not None:
            self.freq.set_khz(self.freq.nearest_khz(config.level), cpus)
            self.group.set_quota(config.cores, 100_000)
        else:
            self.group.set_quota(config.cores * config.level, 100_000)
        self.config = config

    def observe(self, t: float, react=None) -> Measured | None:
        """The next interval of the load's clock, measured (``LineStream.take``: stalled when
        the stream stalled, its usage measured all the same; the intervals the loop fell behind
        on in ``behind``). When the next turn's line came before any this caller asked for, a
        Measured of no requests whose ``index`` is the horizon: the loop's run ends there."""
        self._check_running()
        taken = self.stream.take((lambda tick: react(float(tick.get("rps", 0.0)))) if react is not None else None)
        if taken is None:  # the latency stream stalled; the service ran, and its usage is the cgroup's
            utilisation, power, extra = self._usage()
            return Measured(math.nan, math.nan, math.nan, utilisation, **power, **extra, stalled=True)
        if taken.past:
            return Measured(0.0, math.nan, math.nan, 0.0, index=taken.index)
        line, ticks, earlier = taken.line, taken.ticks, taken.earlier
        utilisation, power, extra = self._usage()
        behind = [_measured(old, old_ticks, utilisation, power, self._lost(old)) for old, old_ticks in earlier]
        p95, p99, note = interval_latency(line, ticks)
        lost = self._lost(line)
        note = "; ".join(filter(None, [note, lost, self._clock_steps()]))
        if note:
            extra["note"] = note
        return Measured(float(line.get("rps", 0.0)), p95, p99, utilisation, **power, **extra, index=line["index"],
                        behind=behind, partial=lost is not None)

    def _usage(self) -> tuple[float, dict, dict]:
        """Since the last call: the service's utilisation of the CPU its configuration allows,
        its power where RAPL reads it, and the host probe's and the quota's hold (Measured's)."""
        now, (cpu, throttled) = time.monotonic(), _usage(self.group)
        utilisation, power = 0.0, {}
        if cpu is not None and self.last_cpu is not None and now > self.last_time:
            allowed = self.config.cores * self.config.level * (now - self.last_time)
            utilisation = min(1.0, (cpu - self.last_cpu) / allowed)
        if self.rapl is not None:
            energy = self.rapl.read()
            if now > self.last_time:
                power["power_w"] = self.rapl.joules_between(self.last_energy, energy) / (now - self.last_time)
            self.last_energy = energy
        self.last_cpu, self.last_time = cpu, now
        probe = self.probe.take()  # (median, fastest) µs, or None
        extra = {"host_probe_us": probe[0], "host_probe_min_us": probe[1]} if probe else {}
        if throttled is not None and self.last_throttled is not None:  # ms the quota held the service back
            extra["throttled_ms"] = max(0.0, throttled - self.last_throttled) * 1e3
        self.last_throttled = throttled
        return utilisation, power, extra

    def _clock_steps(self) -> str | None:
        """What to say of steps of the wall clock the sniffer saw since the last interval recorded."""
        said = []
        while self.stream.steps:
            step = self.stream.steps.pop(0)
            said.append(f"the wall clock stepped {step:+.3f} s (NTP, or a VM resumed): the capture and the load "
                        "keep to the monotonic clock, so no interval moved")
            self.warn(said[-1])
        return "; ".join(said) or None

    def _lost(self, line: dict) -> str | None:
        """What to say of packets the kernel dropped from the capture since the interval
        recorded before ``line`` (the capture's buffer was full: it was stopped or starved):
        its rate and latency are of the requests it still saw. The count is the kernel's as
        the line was written, which may be after later intervals' drops: the interval after
        one that lost packets is said to be at risk too (a 5-s stop: 2 086 req/s of 4 800, unsaid)."""
        lost = _dropped(line)
        new, self.lost = lost - self.lost, max(lost, self.lost)
        dropping, self.dropping = self.dropping, new > 0
        if new > 0:
            return (f"the capture lost {new} packets in the kernel by the interval's end: its rate and latency are of "
                    "the rest")
        if dropping:
            return "the capture was losing packets in the kernel in the interval before: its rate may be low too"
        return None

    def _check_running(self) -> None:
        """A service or load generator that has exited ends the run, saying so: its intervals
        would read as a service that meets any target (no request answered late)."""
        if self.service.poll() is not None:
            raise RunnerError(f"the service ended with {_status(self.service)} during the run: "
                              f"{_tail(self.service_err) or 'it wrote nothing to stderr'}")
        if self.load.poll() not in (None, 0):
            raise RunnerError(f"perflearn-load ended with {_status(self.load)} during the run: "
                              f"{_tail(self.load_err) or 'it wrote nothing to stderr'}")
        if self.sniffer is not None and self.sniffer.poll() is not None:  # the loop ran blind, at maximum, unsaid
            raise RunnerError(f"perflearn-sniff ended with {_status_code(self.sniffer.poll())} during the run: "
                              "no latency to control by")

    @property
    def load_done(self) -> bool:
        return self.load.poll() is not None

    def close(self) -> None:
        """Stop what the pass started and leave the maximum; a signal waits until it is done
        (``signals_held``): cut short, it left the sniffer running and the threads unjoined."""
        with signals_held():
            self._close()

    def _close(self) -> None:
        for proc in filter(None, (self.load, self.service)):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for err in filter(None, (self.service_err, self.load_err)):
            err.close()
        if self.load_reader is not None:
            self.load_reader.join(timeout=2.0)  # at the generator's end of output
        if self.load is not None and self.load.stdout is not None:
            self.load.stdout.close()
        if self.probe is not None:
            self.probe.stop()
        try:
            if self.sniffer is not None:
                died = self.sniffer.poll() is not None  # said already, by the interval that found it
                try:
                    self.sniffer.stop()
                except PerflearnError:
                    if not died:
                        raise
        finally:
            if self.governors is not None:
                self.governors.restore()  # the governors it found, or those a killed manager found
                originals.release(self.held)
            self.group.end_processes()  # what the service forked or daemonised ("bash -c", "memcached -d")
            self.group.remove()
            if self.marks is not None:
                self.marks.cleanup()
            if self.harness:
                _place_threads(self.affinity)


def _dropped(line: dict) -> int:
    """Packets the kernel dropped from the capture so far, as a wire line says."""
    kernel = line.get("kernel") or {}
    return int(kernel.get("dropped") or 0) + int(kernel.get("if_dropped") or 0)


def _measured(line: dict, ticks: list[dict], utilisation: float, power: dict, lost: str | None) -> Measured:
    """An interval the loop fell behind on: its own rate and latency; the CPU time and energy
    read since the last decision, over all of them."""
    p95, p99, note = interval_latency(line, ticks)
    return Measured(float(line.get("rps", 0.0)), p95, p99, utilisation, **power, note="; ".join(filter(None, [note, lost])),
                    index=line["index"])


def _place_threads(cpus: list[int]) -> None:
    """Every thread of this process on ``cpus`` (sched_setaffinity moves one thread; children inherit the caller's)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # ended meanwhile
            pass


def parse_service_cpus(text: str) -> list[int]:
    """--service-cpus as cpuset and taskset write CPU lists: "0", "0,2", "0-3,6"."""
    try:
        return sorted(parse_cpus(text))
    except ValueError:
        raise UsageError(f"--service-cpus: expected CPU numbers such as 0 or 0,2 or 0-3, got {text!r}") from None


def check_service_cpus(cpus: list[int], allowed: list[int], cores: int) -> list[int]:
    """The service's CPUs, lowest first: each one this process may use, and at least ``cores`` of them."""
    outside = sorted(set(cpus) - set(allowed))
    if outside:
        raise UsageError(f"--service-cpus: CPU {outside[0]} is not one this process may use ({cpu_list(set(allowed))})")
    if cores > len(cpus):
        raise UsageError(f"--cores {cores}: --service-cpus {cpu_list(set(cpus))} gives {len(cpus)} "
                         f"CPU{'s' * (len(cpus) > 1)}")
    return sorted(cpus)


def _wait_port(port: int, proc: subprocess.Popen, stderr, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UsageError(f"the service ended with {_status(proc)} before accepting on port {port}: "
                             f"{_tail(stderr) or 'it wrote nothing to stderr'}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise UsageError(f"the service did not accept on port {port} within {timeout:g} s")


def _status(proc: subprocess.Popen) -> str:
    """How a process that has ended ended, in the runner's words ("code 3", "signal SIGKILL")."""
    return _status_code(proc.returncode)


def _status_code(code: int) -> str:
    return describe_status(code if code >= 0 else None, -code if code < 0 else None)


def _tail(file, limit: int = 200) -> str:
    """The end of what a process wrote to ``file`` (binary, opened for reading and writing), on one line."""
    file.seek(0)
    return " ".join(file.read().decode(errors="replace").split())[-limit:]


def interval_latency(line: dict, ticks: list[dict]) -> tuple[float, float, str | None]:
    """(p95, p99) in seconds of a wire interval ``line`` (with the ``ticks`` read in it), and
    a note. An interval with no request answered has no latency (NaN), not one of 0 (that
    counted as met), unless requests waiting at its end bound it from below; a bound above
    the answered requests' quantile replaces it (``unanswered_floor``)."""
    answered, unanswered = int(line.get("requests") or 0), int(line.get("outstanding") or 0)
    if not answered and not unanswered:
        return math.nan, math.nan, "no request in the interval: no latency"
    p95, p99 = (float(v) / 1e6 if isinstance(v, (int, float)) else 0.0  # none answered: the floor below
                for v in (line.get("p95_us"), line.get("p99_us") or line.get("p95_us")))
    start, end = float(line.get("start", 0.0)), float(line.get("end", 0.0))
    arrivals = [(float(k["end"]), int(k.get("requests", 0))) for k in ticks
                if float(k.get("start", 0.0)) >= start - 1e-6 and float(k.get("end", 0.0)) <= end + 1e-6]
    floor95, floor99 = (unanswered_floor(answered, unanswered, arrivals, start, end, q) for q in (0.95, 0.99))
    if not answered and floor95 <= 0:  # none answered, none waiting long yet (the first policy's tail at a mark)
        return math.nan, math.nan, f"no request answered in the interval ({unanswered} waiting at its end): no latency"
    note = None
    if floor95 > p95:
        note = (f"{unanswered} requests unanswered at the interval's end ({answered} answered): "
                f"p95 at least {floor95 * 1e3:.4g} ms")
    return max(p95, floor95), max(p99, floor99), note


def unanswered_floor(answered: int, unanswered: int, arrivals: list[tuple[float, int]], start: float, end: float,
                     q: float) -> float:
    """A lower bound, in seconds, of the ``q`` quantile of the latency of an interval's
    requests when ``unanswered`` were still waiting at its ``end`` (``answered`` were
    answered in it). A quantile's rank leaves n - ceil(q n) of the n requests above it;
    when more are unanswered, it is at least the wait so far of the (n - ceil(q n) + 1)-th
    longest-waiting of them. Each has waited since it arrived: taking the unanswered to
    be the latest arrivals (``arrivals``: (end, requests) of the interval's ticks; any
    more, from before ``start``) makes every wait the shortest it can be, so the bound
    holds whichever they were. 0 when they are too few to reach the quantile.
    Why: the wire's quantiles are of the answered requests only, so a service that stops
    answering reads as one that meets any target."""
    n = answered + unanswered
    above = n - math.ceil(q * n - 1e-9)
    if unanswered <= above:
        return 0.0
    rank = unanswered - above  # of the waits, shortest first
    for tick_end, count in sorted(arrivals, reverse=True):  # the latest first: the shortest waits
        if rank <= count:
            return max(0.0, end - tick_end)
        rank -= count
    return max(0.0, end - start)  # arrived before the interval


def write_trace(segments: list[tuple[float, float]], path: Path) -> Path:
    """(seconds, requests/s) segments as a perflearn-load trace file ("start rate" lines;
    the last line marks the end)."""
    start, lines = 0.0, []
    for duration, rps in segments:
        lines.append(f"{start:g} {rps:.1f}")
        start += duration
    lines.append(f"{start:g} 0")
    path.write_text("\n".join(lines) + "\n")
    return path


WORKDIR = "perflearn-manage"


def work_directory() -> tempfile.TemporaryDirectory:
    """The manager's own directory (trace files for perflearn-load), named after its pid so
    that the next manager removes it if this one is killed outright and cannot
    (``remove_stale_work_directories``), as it removes such a manager's cgroups."""
    remove_stale_work_directories()
    return tempfile.TemporaryDirectory(prefix=f"{WORKDIR}-{os.getpid()}-")


def remove_stale_work_directories(where: Path | None = None) -> list[str]:
    """Remove the directories ``perflearn-manage-<pid>-*`` in ``where`` (the temporary
    directory) of managers no longer running; the names removed."""
    where = Path(where or tempfile.gettempdir())
    pattern = re.compile(rf"^{WORKDIR}-(\d+)-")
    removed = []
    for directory in where.glob(f"{WORKDIR}-*"):
        match = pattern.match(directory.name)
        if match and directory.is_dir() and not alive(int(match.group(1))):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory.name)
    return sorted(removed)
