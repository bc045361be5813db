"""perflearn-load from Python: run an open-loop load and collect its JSON lines."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from perflearn.errors import PerflearnError, UsageError
from perflearn.lifetime import died_with

from .jsonl import objects, tool_error
from .locate import locate

PROTOCOLS = ("memcache-binary", "memcache-ascii", "redis", "http")


@dataclass
class LoadResult:
    intervals: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)


class LoadFailed(PerflearnError):
    """perflearn-load ran but failed: connections broke, or no request was answered.
    ``result`` holds what it measured (its summary says how far it got)."""

    def __init__(self, error: PerflearnError, result: LoadResult):
        super().__init__(error.message, where=error.where)
        self.result = result


def run_load(
    server: str,
    protocol: str,
    *,
    rate: float = 1000.0,
    duration: float = 10.0,
    connections: int = 8,
    threads: int = 1,
    profile: str = "constant",
    cpus: str | None = None,
    realtime: int | bool | None = None,
    spin_us: float | None = None,
    pm_qos: bool = False,
    extra: Sequence[str] = (),
    on_line: Callable[[dict], None] | None = None,
) -> LoadResult:
    """Drive ``server`` ("host:port"); returns its interval lines and summary.

    ``cpus`` pins the send threads ("1", "0,2-3"), ``realtime`` runs them SCHED_FIFO at
    that priority (True: the tool's default, 10), ``spin_us`` is how long before a send
    they stop sleeping, ``pm_qos`` holds the CPUs' wake-up latency at 0 for the run (idle
    CPUs poll; needs root); the summary's ``sched`` records what was in force.

    A run that ran but failed (connections broke, no request answered) raises
    ``LoadFailed``, its ``result`` holding the summary.
    """
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r} (one of {', '.join(PROTOCOLS)})", where="protocol")
    # "--opt=value": a negative value reaches the tool's own check, not its flag parser
    cmd = [str(locate("perflearn-load")), "--server", server, "--protocol", protocol, f"--rate={rate}",
           f"--duration={duration}", f"--connections={connections}", f"--threads={threads}",
           "--profile", profile]
    if cpus is not None:
        cmd.append(f"--cpus={cpus}")
    if realtime is True:
        cmd.append("--realtime")
    elif realtime is not None and realtime is not False:
        cmd.append(f"--realtime={realtime}")
    if spin_us is not None:
        cmd.append(f"--spin-us={spin_us}")
    if pm_qos:
        cmd.append("--pm-qos")
    cmd += list(extra)
    result = LoadResult()
    # ends with this process, even one killed outright: a load generator left running loads the service
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=died_with()) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for obj in objects(proc.stdout, "perflearn-load output"):
                if obj["type"] == "interval":
                    result.intervals.append(obj)
                elif obj["type"] == "summary":
                    result.summary = obj
                if on_line is not None:
                    on_line(obj)
        except BaseException:
            # the caller stopped reading (a closed stdout, ^C): stop loading the server now,
            # not after the rest of --duration (Popen's exit waits for the process)
            proc.terminate()
            raise
        stderr = proc.stderr.read()
        proc.wait()
    if proc.returncode != 0:
        error = tool_error("perflearn-load", proc.returncode, stderr)
        # a summary means the run ran and failed (connections broke, nothing answered)
        raise LoadFailed(error, result) if result.summary else error
    return result
