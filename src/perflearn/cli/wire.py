"""`perflearn sniff` and `perflearn load`: the native wire tools, JSON Lines on stdout."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperCommand

from perflearn.errors import PerflearnError, UsageError
from perflearn.wire import LiveSniffer, run_load, sniff_file

from . import terminal
from .app import app, interrupt_on_sigterm


def _emit(obj: dict) -> None:
    # Plain JSON lines on the terminal helper's stdout, not through rich's print (110 µs a
    # record against 7), and a closed stdout reaches _stdout_closed (rich exits 1 itself).
    out = terminal.out.file
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    if obj.get("type") != "record":  # records come in bulk: the next other line flushes them
        out.flush()


def _stdout_closed() -> None:
    """Whoever read stdout went away (`| head`): end quietly, as other filters do."""
    try:  # what is still buffered goes nowhere, not into a second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise typer.Exit(0)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _describe(summary: dict, what: str) -> None:
    # With no request answered there is no latency to show (the tool warns why).
    if not summary or not summary.get("requests"):
        return
    us = {k: f"{summary[k]:.1f} us" if _number(summary.get(k)) else "-" for k in ("p50_us", "p99_us", "max_us")}
    rate = f", {summary['rps']:.0f}/s" if _number(summary.get("rps")) else ""
    counted = f"{summary['requests']} requests{rate}"
    if _number(summary.get("sent")):  # load's rps is the rate sent: "58 requests, 100/s" read as throughput
        counted = f"{summary['requests']} answered of {summary['sent']} sent" + (rate and f"{rate} sent")
    terminal.info(f"{what}: {counted}, p50 {us['p50_us']}, p99 {us['p99_us']}, max {us['max_us']}")
    _warn_unmatched(summary.get("counters") or {}, summary["requests"])


def _warn_unmatched(counters: dict, answered: int) -> None:
    """Requests seen without a response to time: the percentiles above leave them out, and
    they are the slow ones (a server that stopped answering, responses coalesced past a
    short snap length), so a healthy-looking tail may not be."""
    lost = {k: int(counters.get(k) or 0) for k in ("unanswered", "discarded", "evicted")}
    if sum(lost.values()):
        terminal.warn(f"{sum(lost.values())} requests had no response timed ({lost['unanswered']} unanswered at the "
                      f"end, {lost['discarded']} dropped with their connection or a lost stream, {lost['evicted']} "
                      f"past --timeout): the percentiles are of the {answered} answered only")
    if counters.get("desyncs"):
        terminal.warn(f"the parser lost {counters['desyncs']} streams (desyncs): a snap length shorter than the "
                      "messages, or a protocol other than the one read")


def _warn(warnings: list[str]) -> None:
    for w in warnings:  # the tool's own: no request matched, a truncated capture
        terminal.warn(w)


@app.command()
def sniff(
    capture: Annotated[Optional[Path], typer.Argument(help="pcap or pcapng file (omit with --interface).")] = None,
    interface: Annotated[Optional[str], typer.Option("--interface", "-i", help="Capture live on this interface.")] = None,
    bpf: Annotated[Optional[str], typer.Option("--filter", "-f", help="BPF filter (live).")] = None,
    protocol: Annotated[str, typer.Option("--protocol", "-p", help="auto, memcache, memcache-binary, memcache-ascii, redis, http, generic.")] = "auto",
    port: Annotated[Optional[list[int]], typer.Option("--port", help="Server port (repeatable); only these connections.")] = None,
    interval: Annotated[float, typer.Option(help="Seconds per interval line.")] = 1.0,
    tick: Annotated[Optional[float], typer.Option(help="Live: also a \"tick\" line of arrivals every this many seconds (e.g. 0.02).")] = None,
    records: Annotated[Optional[Path], typer.Option("--records", help="Write per-request records here (.csv or JSON Lines; - for stdout).")] = None,
    duration: Annotated[Optional[float], typer.Option(help="Live: stop after this many seconds.")] = None,
    snaplen: Annotated[Optional[int], typer.Option(help="Live: bytes kept per packet.")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="Evict requests unanswered after this many seconds.")] = None,
) -> None:
    """Request latency measured from packets: interval aggregates as JSON Lines on stdout."""
    if capture is None and interface is None:
        raise UsageError("give a capture file or --interface (neither was given)", where="perflearn sniff")
    if capture is not None and interface is not None:
        raise UsageError("give a capture file or --interface, not both", where="perflearn sniff")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise UsageError(f"--duration {duration}: must be a positive number of seconds", where="perflearn sniff")
    if snaplen is not None and snaplen <= 0:
        raise UsageError(f"--snaplen {snaplen}: must be a positive number of bytes", where="perflearn sniff")
    if tick is not None and (capture is not None or not 0 < tick <= interval):
        raise UsageError(f"--tick {tick}: needs --interface and 0 < tick <= --interval ({interval})", where="perflearn sniff")
    extra = ["--records", str(records)] if records else []
    if capture is not None:
        live_only = [flag for flag, given in (("--filter", bpf), ("--duration", duration), ("--snaplen", snaplen))
                     if given is not None]
        if live_only:  # they were ignored: a file read with -f "tcp port 1" was analysed whole
            raise UsageError(f"{live_only[0]} applies to a live capture (--interface); to keep part of a file, "
                             "give --port, or filter it first (tcpdump -r FILE -w OUT FILTER)", where="perflearn sniff")
        # Every line as the tool writes it: records too with --records - (they were dropped).
        try:
            result = sniff_file(capture, protocol=protocol, ports=port or (), interval=interval, timeout=timeout,
                                extra=extra, on_line=_emit)
        except BrokenPipeError:
            _stdout_closed()
        _describe(result.summary, str(capture))
        _warn(result.warnings)
        return
    assert interface is not None
    closed = []

    def emit(obj: dict) -> None:
        if obj["type"] == "ready" or closed:
            return
        try:
            _emit(obj)
        except BrokenPipeError:
            closed.append(True)  # the reader thread cannot exit the command: the loop below stops the capture

    interrupt_on_sigterm()  # `timeout 60 perflearn sniff ...` ends as Ctrl-C does: with its summary (it had none)
    sniffer = LiveSniffer(interface, bpf=bpf, protocol=protocol, ports=port or (), interval=interval,
                          snaplen=snaplen, timeout=timeout, tick=tick, on_line=emit)
    if records:
        sniffer.cmd += extra
    if duration is not None:
        # The tool stops itself (and refuses a duration its clock cannot hold).
        sniffer.cmd.append(f"--duration={duration}")
    sniffer.start()
    try:
        for _ in sniffer.intervals():
            if closed:
                break
    except KeyboardInterrupt:
        pass
    try:
        result = sniffer.stop()
    except KeyboardInterrupt:  # ^C reaches the tool and us together: it can land after the tool ended
        result = sniffer.stop()
    if closed:
        _stdout_closed()
    _describe(result.summary, f"interface {interface}")
    _warn(result.warnings)


REALTIME_DEFAULT = 10  # perflearn-load's own priority for a bare --realtime


def _bare_realtime(args: list[str]) -> list[str]:
    """A bare --realtime (no priority after it) as --realtime=REALTIME_DEFAULT."""
    out = []
    for i, a in enumerate(args):
        if a == "--":
            return out + args[i:]
        if a == "--realtime" and not (i + 1 < len(args) and re.fullmatch(r"[+-]?\d+", args[i + 1])):
            a = f"--realtime={REALTIME_DEFAULT}"
        out.append(a)
    return out


class _LoadCommand(TyperCommand):
    """`--realtime [PRIO]` as documented: Typer's options always take a value, so
    `--realtime --pm-qos` was refused ("Invalid value for '--realtime'")."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, _bare_realtime(list(args)))


@app.command(cls=_LoadCommand)
def load(
    server: Annotated[str, typer.Argument(help="host:port")],
    protocol: Annotated[str, typer.Option("--protocol", "-p", help="memcache-binary, memcache-ascii, redis, http.")],
    rate: Annotated[float, typer.Option("--rate", "-r", help="Requests/s (peak for steps).")] = 1000.0,
    duration: Annotated[float, typer.Option("--duration", "-d", help="Seconds (constant profile).")] = 10.0,
    connections: Annotated[int, typer.Option("--connections", "-c")] = 8,
    threads: Annotated[int, typer.Option("--threads", "-t")] = 1,
    profile: Annotated[str, typer.Option(help="constant, steps, trace.")] = "constant",
    trace: Annotated[Optional[Path], typer.Option(help="Trace profile: 'seconds rate' lines.")] = None,
    step_seconds: Annotated[float, typer.Option(help="Steps profile: seconds per step.")] = 10.0,
    step_pct: Annotated[float, typer.Option(help="Steps profile: step size in percent of --rate (0 -> 100 -> 0).")] = 20.0,
    arrivals: Annotated[str, typer.Option(help="poisson or uniform.")] = "poisson",
    keys: Annotated[int, typer.Option(help="Distinct keys.")] = 10_000,
    key_size: Annotated[str, typer.Option(help="fixed:N, uniform:A-B, etc (a key is 1-250 bytes).")] = "fixed:16",
    value_size: Annotated[str, typer.Option(help="fixed:N, uniform:A-B, etc (a value is 0-1073741824 bytes).")] = "fixed:32",
    set_ratio: Annotated[float, typer.Option(help="Fraction of sets.")] = 0.1,
    path: Annotated[str, typer.Option(help="HTTP path.")] = "/",
    preload: Annotated[bool, typer.Option(help="Set every key before the run.")] = False,
    interval: Annotated[float, typer.Option(help="Seconds per interval line.")] = 1.0,
    drain: Annotated[float, typer.Option(help="Seconds to wait for replies after the last request.")] = 2.0,
    seed: Annotated[int, typer.Option(help="Random seed of the arrivals, keys, operations and sizes.")] = 1,
    cpus: Annotated[Optional[str], typer.Option(help="Pin the send threads to these CPUs, e.g. 1 or 0,2-3.")] = None,
    realtime: Annotated[Optional[int], typer.Option(metavar="[PRIO]", help=f"Run the send threads SCHED_FIFO at this priority (1-99; {REALTIME_DEFAULT} when omitted; root).")] = None,
    spin_us: Annotated[Optional[float], typer.Option(help="Microseconds before a send that a thread stops sleeping.")] = None,
    pm_qos: Annotated[bool, typer.Option("--pm-qos", help="Hold CPU wake-up latency at 0 for the run (idle CPUs poll; root).")] = False,
) -> None:
    """Open-loop load (latency from the intended send time): JSON Lines on stdout."""
    _check_profile_options(profile, trace, duration, step_seconds, step_pct)
    # perflearn-load checks every value (bad ones: exit 2, one line, passed on as they are)
    extra = ["--arrivals", arrivals, "--key-size", key_size, "--value-size", value_size,
             f"--set-ratio={set_ratio}", f"--step-seconds={step_seconds}", f"--step-pct={step_pct}", f"--keys={keys}",
             f"--path={path}", f"--interval={interval}", f"--drain={drain}", f"--seed={seed}"]
    if trace is not None:
        extra += ["--trace", str(trace)]
    if preload:
        extra.append("--preload")
    # A run whose connections broke or that got no answer fails (exit 1, one line) after its
    # summary: perflearn-load says so and run_load raises.
    try:
        result = run_load(server, protocol, rate=rate, duration=duration, connections=connections, threads=threads,
                          profile=profile, cpus=cpus, realtime=realtime, spin_us=spin_us, pm_qos=pm_qos, extra=extra,
                          on_line=_emit)
    except BrokenPipeError:
        _stdout_closed()
    _describe(result.summary, server)
    _judge_answers(result.summary)


def _check_profile_options(profile: str, trace: Path | None, duration: float, step_seconds: float,
                           step_pct: float) -> None:
    """Another profile's options were taken and ignored: --trace without --profile trace ran
    a constant load at --rate, unsaid (session 57's audit)."""
    others = {"trace": [("--trace", trace is not None)],
              "steps": [("--step-seconds", step_seconds != 10.0), ("--step-pct", step_pct != 20.0)],
              "constant": [("--duration", duration != 10.0)]}
    for owner, given in others.items():
        named = [option for option, was_given in given if was_given]
        if named and profile != owner:
            raise UsageError(f"{named[0]}: the {owner} profile's option, and the profile is {profile} "
                             f"(--profile {owner} takes it)", where="perflearn load")


UNANSWERED_FAILS = 0.01  # more than this share of requests never answered: the run measured a server that fell over


def _judge_answers(summary: dict) -> None:
    """Requests never answered, or answered with an error, are not in the percentiles. A
    server that stopped answering after 1 s of 3 read "p99 3559 us", exit 0 (session 46's
    review): beyond ``UNANSWERED_FAILS`` of what was sent the run fails, summary kept."""
    sent, unanswered, errors = (int(summary.get(k) or 0) for k in ("sent", "unanswered", "errors"))
    if errors:
        terminal.warn(f"{errors} of the requests were answered with an error (e.g. a value the server refused); "
                      "the percentiles time them as answered")
    if sent and unanswered / sent > UNANSWERED_FAILS:
        raise PerflearnError(f"{unanswered} of the {sent} requests sent ({unanswered / sent:.0%}) were never "
                             "answered: the server fell behind or stopped; the percentiles above are of the answered "
                             "ones only", where="perflearn load")
    if unanswered:
        terminal.warn(f"{unanswered} of the {sent} requests sent were not answered by the end (in flight)")
