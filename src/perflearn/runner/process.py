"""Start, wait for and stop the processes of a run.

Each process gets its own process group (a timeout kills all it started), and
joins its cgroups and takes its CPU affinity before exec, so the workload runs
there from its first instruction. Only then is code run in the child between
fork and exec: without it Python can vfork, which costs ~2 ms instead of ~14 ms
for a runner that has pandas and DuckDB loaded. Every process carries
PERFLEARN_RUNNER_PID and PERFLEARN_STORE in its environment, so that processes
left by a SIGKILLed runner are found and stopped when the experiment resumes
(``reap_orphans``). Waiting uses a pidfd and wait4(), which gives the exact
resource usage of that one process and what it waited for.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perflearn.experiment.launch import ProcessLaunch, ProcessResult
from perflearn.experiment.timelimit import TimeLimit, time_limit
from perflearn.lifetime import died_with

RUNNER_VAR = "PERFLEARN_RUNNER_PID"
STORE_VAR = "PERFLEARN_STORE"


@dataclass
class Running:
    launch: ProcessLaunch
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    started: float  # perf_counter
    exit_status: int | None = None  # raw wait status once reaped
    rusage: object | None = None
    killed_by_us: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self, stream: str) -> str:
        path = self.stdout_path if stream == "stdout" else self.stderr_path
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def result(self) -> ProcessResult:
        """Its exit and its output, read when first asked for."""
        return ProcessResult(self.launch.name, self.exit_code, self.signal, self.stdout_path, self.stderr_path)

    @property
    def exit_code(self) -> int | None:
        if self.exit_status is None or not os.WIFEXITED(self.exit_status):
            return None
        return os.WEXITSTATUS(self.exit_status)

    @property
    def signal(self) -> int | None:
        if self.exit_status is None or not os.WIFSIGNALED(self.exit_status):
            return None
        return os.WTERMSIG(self.exit_status)


def spawn(launch: ProcessLaunch, run_dir: Path, with_runner: bool = False) -> Running:
    """Start one process with its output in ``run_dir/<name>.stdout|stderr``.
    ``with_runner``: it gets its ``stop_signal`` when the runner dies, even killed
    outright (a companion: a server runs until stopped). Not the workload's default: it
    ends by itself, and the fork a ``preexec_fn`` needs costs 5-7 ms a process here."""
    cgroup_files, cpus = list(launch.cgroup_procs), set(launch.cpus) if launch.cpus else None
    ends_with_runner = died_with(launch.stop_signal) if with_runner else None

    def in_child() -> None:  # runs between fork and exec
        if ends_with_runner is not None:
            ends_with_runner()
        pid = str(os.getpid())
        for procs in cgroup_files:  # join cgroups first: joining a cpuset resets the affinity
            with open(procs, "w") as f:
                f.write(pid)
        if cpus:
            os.sched_setaffinity(0, cpus)

    stdout_path = run_dir / f"{launch.name}.stdout"
    stderr_path = run_dir / f"{launch.name}.stderr"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.perf_counter()
        popen = subprocess.Popen(
            launch.argv, cwd=launch.cwd, env=launch.env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            process_group=0, preexec_fn=in_child if (cgroup_files or cpus or with_runner) else None, close_fds=True,
        )
    launch.pid = popen.pid  # collectors read a companion's counters by it
    return Running(launch, popen, stdout_path, stderr_path, started)


def wait(proc: Running, timeout: float | None) -> bool:
    """Wait for the process to exit; True if it did within ``timeout`` (it is then reaped)."""
    if proc.exit_status is not None:
        return True
    fd = os.pidfd_open(proc.pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return False
        _, status, rusage = os.wait4(proc.pid, 0)
    finally:
        os.close(fd)
    proc.exit_status, proc.rusage = status, rusage
    proc.popen.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it is reaped
    return True


def wait_marking(proc: Running, timeout: float | None, pattern: str, on_match: Callable[[], None],
                 poll: float = 0.01) -> tuple[bool, str | None]:
    """``wait``, calling ``on_match`` as soon as a line of the process's stdout first
    matches ``pattern`` (the start of its measured phase). Returns whether it exited in
    time, and why no line matched (None once one did)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    regex, pending, why = re.compile(pattern), b"", f"its stdout had no line matching {pattern!r}"
    with open(proc.stdout_path, "rb") as out:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            exited = wait(proc, poll if left is None else max(0.0, min(poll, left)))
            lines = (pending + out.read()).split(b"\n")
            pending = b"" if exited else lines.pop()  # a line still being written waits, unless it is the last
            try:  # a backtracking pattern must not outlast the run
                with time_limit(max(left, 0.01) if left is not None else 60.0):
                    matched = any(regex.search(line.decode(errors="replace")) for line in lines)
            except TimeLimit:
                return wait(proc, None if left is None else 0.0), f"matching {pattern!r} on its stdout ran out of time"
            if matched:
                on_match()
                left = None if deadline is None else deadline - time.monotonic()
                return wait(proc, None if left is None else max(0.0, left)), None
            if exited or (left is not None and left <= 0):
                return exited, why


def stop(proc: Running, sig: int = signal.SIGTERM, grace: float = 5.0) -> None:
    """Signal the whole process group, then SIGKILL it after ``grace`` seconds; reap."""
    if proc.exit_status is None:
        proc.killed_by_us = True
        _killpg(proc.pid, sig)
        if not wait(proc, grace):
            _killpg(proc.pid, signal.SIGKILL)
            wait(proc, None)
    _killpg(proc.pid, signal.SIGKILL)  # anything it left running in its group


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_ready(proc: Running, port: int | None, pattern: str | None, delay: float, timeout: float) -> str | None:
    """Wait until a companion accepts on ``port`` / prints ``pattern``; None when ready, else why not."""
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern, re.MULTILINE) if pattern else None
    while True:
        if wait(proc, 0):
            return f"exited with {describe_exit(proc)} before it was ready"
        ok = True
        if port is not None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    pass
            except OSError:
                ok = False
        if ok and regex is not None:
            try:  # a backtracking pattern must not outlast the wait it is part of
                with time_limit(max(deadline - time.monotonic(), 0.01)):
                    ok = bool(regex.search(proc.output("stdout")) or regex.search(proc.output("stderr")))
            except TimeLimit:
                return f"not ready after {timeout:g} s (matching {pattern!r} on its output ran out of time)"
        if ok:
            break
        if time.monotonic() > deadline:
            what = f"port {port}" if port is not None else f"output matching {pattern!r}"
            return f"not ready after {timeout:g} s (waiting for {what})"
        time.sleep(0.01)
    if delay:
        time.sleep(delay)
        if wait(proc, 0):
            return f"exited with {describe_exit(proc)} right after start"
    return None


def describe_exit(proc: Running) -> str:
    return describe_status(proc.exit_code, proc.signal)


def describe_status(exit_code: int | None, sig: int | None) -> str:
    if sig is not None:
        try:
            return f"signal {signal.Signals(sig).name}"
        except ValueError:
            return f"signal {sig}"
    return f"code {exit_code}"


def free_port() -> int:
    """A TCP port on loopback that is free now (for the {port} placeholder)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(text: str, lines: int = 20, chars: int = 2000) -> str:
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def reap_orphans(store: str) -> int:
    """Stop the process groups left behind by a killed runner of ``store``; return how many."""
    mine = str(os.getpid())
    groups: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        runner = environ.get(RUNNER_VAR.encode())
        if runner is None or environ.get(STORE_VAR.encode()) != store.encode() or runner.decode() == mine:
            continue
        if not os.path.exists(f"/proc/{runner.decode()}"):  # its runner is gone: an orphan
            try:
                groups.add(os.getpgid(int(entry.name)))
            except ProcessLookupError:
                pass
    for group in groups:
        _killpg(group, signal.SIGKILL)
    return len(groups)
