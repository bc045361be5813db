"""perflearn-sniff from Python: a capture file at once, or a live interface streamed."""

from __future__ import annotations

import contextlib

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perflearn.errors import PerflearnError, UsageError
from perflearn.lifetime import died_with

from .jsonl import objects, tool_error
from .locate import locate

PROTOCOLS = ("auto", "memcache", "memcache-binary", "memcache-ascii", "redis", "http", "generic")


def clock_offset(ready: dict) -> float:
    """A ready line's ``clock_offset``: its times minus the monotonic clock. A sniffer built
    before session 54 said none and kept the wall clock: the wall clock's offset now."""
    given = ready.get("clock_offset")
    return float(given) if isinstance(given, (int, float)) else time.time() - time.monotonic()


@dataclass
class SniffResult:
    """What one capture yielded: interval aggregates, the summary, and records if asked."""

    intervals: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)
    # the tool's warnings (no request matched, a truncated capture, a step of the wall clock), one line each
    warnings: list[str] = field(default_factory=list)
    # live: seconds to add to the monotonic clock (time.monotonic) to get the capture's times, which
    # are the wall clock as it read at the start, moved on by the monotonic clock (a step moves none)
    clock_offset: float | None = None

    def keep(self, obj: dict, records: bool = True) -> None:
        """File a line of the tool's by its type (records only with ``records``)."""
        kind = obj["type"]
        if kind == "interval":
            self.intervals.append(obj)
        elif kind == "summary":
            self.summary = obj
        elif kind == "ready":
            self.clock_offset = clock_offset(obj)
        elif kind == "record" and records:
            self.records.append(obj)

    @property
    def counters(self) -> dict:
        return self.summary.get("counters", {})


def _common_args(protocol: str, ports: Sequence[int], interval: float, timeout: float | None) -> list[str]:
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r} (one of {', '.join(PROTOCOLS)})", where="protocol")
    # "--opt=value": a negative value reaches the tool's own check, not its flag parser
    args = ["--protocol", protocol, f"--interval={interval}"]
    for p in ports:
        args.append(f"--port={int(p)}")
    if timeout is not None:
        args.append(f"--timeout={timeout}")
    return args


_WARNING = "perflearn-sniff: warning: "


def _warnings(stderr: str) -> list[str]:
    return [ln[len(_WARNING):].strip() for ln in stderr.splitlines() if ln.startswith(_WARNING)]


def sniff_file(
    path: str | os.PathLike,
    *,
    protocol: str = "auto",
    ports: Sequence[int] = (),
    interval: float = 1.0,
    records: bool = False,
    timeout: float | None = None,
    extra: Sequence[str] = (),
    on_line: Callable[[dict], None] | None = None,
) -> SniffResult:
    """Analyze a pcap/pcapng file; ``records=True`` keeps every matched request.

    ``on_line`` (if given) gets every line as the tool writes it; records then go only
    to it (unless ``records=True``), so a large capture's records need not fit in memory.
    """
    p = Path(path)
    if p.is_dir():
        raise UsageError("is a directory, not a capture file", where=str(p))
    if str(p) == "-":
        p = Path("/dev/stdin")
    if not p.exists():  # a pipe (/dev/stdin, <(...)) is no regular file but streams as one
        raise UsageError("capture file not found", where=str(p))
    # a pipe (<(...), /dev/fd/N) is this process's descriptor, closed in the tool's: its stdin instead
    streamed = not p.is_file()
    cmd = [str(locate("perflearn-sniff")), "--read", "/dev/stdin" if streamed else str(p),
           *_common_args(protocol, ports, interval, timeout)]
    if records:
        cmd += ["--records", "-", "--format", "jsonl"]
    cmd += list(extra)
    result = SniffResult()
    keep_records = records or on_line is None
    source = open(p, "rb") if streamed else subprocess.DEVNULL
    # streamed, not captured: records can be many more than fit in memory as one string
    with source if streamed else contextlib.nullcontext(), \
            subprocess.Popen(cmd, stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for obj in objects(proc.stdout, "perflearn-sniff output"):
                result.keep(obj, records=keep_records)
                if on_line is not None:
                    on_line(obj)
        except BaseException:
            proc.kill()  # the caller stopped reading (a closed stdout, ^C)
            raise
        stderr = proc.stderr.read()  # a few lines at most: warnings or one error
        proc.wait()
    if proc.returncode != 0:
        raise tool_error("perflearn-sniff", proc.returncode, stderr)
    result.warnings = _warnings(stderr)
    return result


class LiveSniffer:
    """Capture on an interface in the background; interval lines stream as they close.

        with LiveSniffer("lo", bpf="tcp port 11211") as s:
            ...drive load...
        s.result.summary

    ``on_line`` (if given) is called from a reader thread with every parsed line.
    ``tick`` (seconds) adds "tick" lines, the requests that arrived in each tick, so
    a controller can react between intervals.
    Capture needs root or CAP_NET_RAW.
    """

    def __init__(
        self,
        interface: str,
        *,
        bpf: str | None = None,
        protocol: str = "auto",
        ports: Sequence[int] = (),
        interval: float = 1.0,
        records: bool = False,
        snaplen: int | None = None,
        timeout: float | None = None,
        on_line: Callable[[dict], None] | None = None,
        ready_timeout: float = 10.0,
        tick: float | None = None,
        mark_file: str | os.PathLike | None = None,
    ):
        self.cmd = [str(locate("perflearn-sniff")), "--interface", interface,
                    *_common_args(protocol, ports, interval, timeout)]
        if tick:
            self.cmd += ["--tick", str(tick)]
        self.mark_file = mark_file  # where ``mark(at=...)`` gives the capture a mark's time
        if mark_file is not None:
            self.cmd += ["--mark-file", str(mark_file)]
        if bpf:
            self.cmd += ["--filter", bpf]
        if snaplen is not None:
            self.cmd.append(f"--snaplen={int(snaplen)}")
        if records:
            self.cmd += ["--records", "-", "--format", "jsonl"]
        self.on_line = on_line
        self.ready_timeout = ready_timeout
        self.result = SniffResult()
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._reader: threading.Thread | None = None
        self._stderr = ""

    def start(self) -> LiveSniffer:
        # ends with this process, even one killed outright: a capture left running holds its socket
        self._proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      preexec_fn=died_with())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            first = self._lines.get(timeout=self.ready_timeout)
        except queue.Empty:
            self.stop()
            raise PerflearnError("no ready line from the capture", where="perflearn-sniff") from None
        if first is None or first.get("type") != "ready":
            self._proc.wait()
            raise tool_error("perflearn-sniff", self._proc.returncode or 1, self._stderr)
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for obj in objects(self._proc.stdout, "perflearn-sniff output"):
            self.result.keep(obj)
            if self.on_line is not None:
                self.on_line(obj)
            self._lines.put(obj)
        self._stderr = self._proc.stderr.read() if self._proc.stderr else ""
        self._lines.put(None)

    def intervals(self) -> Iterable[dict]:
        """Interval lines as they arrive (blocks), until the capture ends."""
        while True:
            obj = self._lines.get()
            if obj is None:
                return
            if obj.get("type") == "interval":
                yield obj

    def poll(self) -> int | None:
        """The capture's exit status once it has ended (as Popen.poll), else None."""
        return None if self._proc is None else self._proc.poll()

    def mark(self, at: float | None = None) -> None:
        """The measured phase begins now, or ``at`` (seconds on the capture's clock, ahead: with
        ``mark_file``): the summary covers only what follows (SIGUSR1). Interval lines go on as
        before, the one in progress closing at the mark, and the next ones starting there."""
        if self._proc is None or self._proc.poll() is not None:
            return
        if self.mark_file is not None:  # written whole before the signal: the capture reads it on the signal
            scratch = f"{self.mark_file}.new"
            with open(scratch, "w") as f:
                f.write("" if at is None else f"{at:.9f}")
            os.replace(scratch, self.mark_file)
        elif at is not None:
            raise ValueError("a mark at a given time needs the capture started with mark_file")
        self._proc.send_signal(signal.SIGUSR1)

    def stop(self) -> SniffResult:
        """Stop the capture (SIGINT), wait for its summary."""
        if self._proc is None:
            return self.result
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            # a stopped capture (SIGSTOP, a debugger's) holds the SIGINT until it runs again: 30 s, then a kill
            self._proc.send_signal(signal.SIGCONT)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=30)
        for pipe in (self._proc.stdout, self._proc.stderr):
            if pipe is not None and not (self._reader is not None and self._reader.is_alive()):
                pipe.close()
        if self._proc.returncode not in (0, -signal.SIGINT):
            raise tool_error("perflearn-sniff", self._proc.returncode, self._stderr)
        self.result.warnings = _warnings(self._stderr)
        return self.result

    def __enter__(self) -> LiveSniffer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


LATENCIES = ("mean_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "max_us")


def summary_metrics(summary: dict, prefix: str = "wire_") -> dict[str, float]:
    """A sniff or load summary as flat metrics for the results store (missing -> absent).

    With no request answered there is no latency: the percentiles are left out even where
    a summary says 0.0 (the tools did before they said null), never stored as 0.
    """
    answered = summary.get("requests")
    out = {}
    for k in ("rps", "requests", *LATENCIES):
        v = summary.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (k in LATENCIES and answered == 0):
            continue
        out[f"{prefix}{k}"] = float(v)
    counters = summary.get("counters") or {}
    for k in ("evicted", "discarded", "unmatched_responses", "gaps", "desyncs", "flows_dropped"):
        if k in counters:
            out[f"{prefix}{k}"] = float(counters[k])
    kernel = summary.get("kernel") or {}
    if "dropped" in kernel:
        out[f"{prefix}kernel_dropped"] = float(kernel["dropped"])
    return out
