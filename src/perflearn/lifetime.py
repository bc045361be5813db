"""Children that end with perflearn. A process killed outright (SIGKILL, the OOM killer)
runs no cleanup, so a service, load generator or capture it started would run on,
holding its port, its CPUs and its cgroup. Linux's parent-death signal ends them.

Use ``died_with()`` as (or inside) ``subprocess.Popen``'s ``preexec_fn``, made and
passed from the thread that outlives the child: the kernel signals the child when the thread
that forked it ends, not only the process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable

from perflearn.errors import Terminated

PR_SET_PDEATHSIG = 1
# loaded before any fork: a child between fork and exec should not dlopen
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def died_with(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that has the child sent ``sig`` when this process dies (SIGTERM by
    default: a wrapper such as mpirun or a shell can still end its own children). A no-op
    where the platform has no parent-death signal."""
    parent = os.getpid()

    def in_child() -> None:
        if _libc is None:
            return
        _libc.prctl(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before the signal was asked for
            os._exit(1)

    return in_child


def stop_signals() -> tuple[int, ...]:
    """The signals taken as Ctrl-C is, told apart (``Terminated``): SIGTERM, and SIGHUP unless
    it was ignored from the start (``nohup``: it stays ignored)."""
    hang_up = () if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGTERM, *hang_up)


def terminate(signum: int, _frame=None) -> None:
    """A handler of ``stop_signals``: the command's cleanup runs, as for Ctrl-C."""
    leave_a_hung_up_terminal(signum)
    raise Terminated(signum)


def leave_a_hung_up_terminal(signum: int) -> None:
    """After SIGHUP the terminal is gone, and a write to it fails (EIO): the first warning of
    the cleanup raised, the rest were skipped, and the exit status read 1, not 129. The
    standard streams still on it are pointed at /dev/null; a file or a pipe keeps them."""
    if signum != signal.SIGHUP:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1, 2):
            try:
                if os.isatty(fd):
                    os.dup2(null, fd)
            except OSError:  # a closed descriptor: nothing to write to anyway
                pass
    finally:
        os.close(null)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP in the block is held until it ends, then delivered as it would
    have been. For work a signal must not cut in two: a store call (DuckDB checks for
    signals while it works and gave up with "Query interrupted", an internal error in
    place of a clean stop), a service's shutdown (interrupted, it left the rest undone,
    and a ``Thread.join`` cut short can break the thread's lock). A second signal is not
    held: a store call can wait minutes for a reader to let go. In the main thread only,
    where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    signals = (signal.SIGINT, *stop_signals())
    previous: dict = {}

    def deliver(signum: int) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        handler = previous[signum]
        if callable(handler):
            handler(signum, None)  # ours raise Terminated, Python's KeyboardInterrupt
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)

    def hold(signum, frame):
        got.append(signum)
        if len(got) > 1:
            deliver(signum)

    previous.update({sig: signal.signal(sig, hold) for sig in signals})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if len(got) == 1:  # held, not delivered yet (a second was, at once); even as the block raises:
            deliver(got[0])  # the stop wins, the block's error kept as its __context__


# The guard of start_group: a process of its own, so it outlives perflearn killed outright. Its
# parent-death signal (SIGTERM) is its cue: the group gets SIGTERM, then SIGKILL after a grace.
# It is ready before the command starts and learns the group's id on stdin, so a death at any
# moment after the command starts is covered.
_GUARD = """
import os, signal, sys, time
grace, pgid = float(sys.argv[1]), None
def group_runs():
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False
def end(*_):
    if pgid is not None and group_runs():
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while group_runs() and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_runs():
            os.killpg(pgid, signal.SIGKILL)
    os._exit(0)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches it with perflearn, which ends the group itself
sys.stdout.write("ready\\n")
sys.stdout.flush()
line = sys.stdin.readline()
if not line:  # perflearn ended before the command started
    os._exit(0)
pgid = int(line)
while True:
    signal.pause()
"""


def start_group(command: list[str], grace: float = 5.0, **popen):
    """``command`` in a process group of its own that ends with perflearn however perflearn
    ends: Ctrl-C or SIGTERM through ``end_group``; killed outright, through ``died_with`` (the
    leader) and a guard process (the rest: a shell's background job, an mpirun's ranks), which
    ends the group (SIGTERM, SIGKILL after ``grace``). ``release`` it once it has ended."""
    import subprocess

    guard = subprocess.Popen([sys.executable, "-S", "-c", _GUARD, str(grace)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, preexec_fn=died_with(), text=True)
    try:
        guard.stdout.readline()  # its handler is set
        process = subprocess.Popen(command, process_group=0, preexec_fn=died_with(), **popen)
    except BaseException:  # the command did not start, or Ctrl-C meanwhile
        _stop(guard)
        raise
    guard.stdin.write(f"{process.pid}\n")
    guard.stdin.flush()
    process.guard = guard
    return process


def _stop(guard) -> None:
    guard.kill()
    guard.wait()
    guard.stdin.close()
    guard.stdout.close()


def release(process) -> None:
    """Stop ``start_group``'s guard: the group ended, or was ended, the ordinary way."""
    _stop(process.guard)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: one that ended and waits for its parent to reap it (a
    zombie) does not; another user's does."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def end_group(process, grace: float = 5.0) -> None:
    """End a child started in its own process group (``process_group=0``) and everything it
    started there: SIGTERM to the group (a shell or mpirun ends its own children), SIGKILL
    to whatever is left after ``grace`` seconds. The leader is reaped; a no-op once the
    group is gone."""
    import subprocess
    import time

    def signal_group(sig: int) -> bool:
        try:
            os.killpg(process.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    if not signal_group(signal.SIGTERM):
        process.poll()
        return
    deadline = time.monotonic() + grace
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    while _group_runs(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_runs(process.pid):
        signal_group(signal.SIGKILL)
    process.wait()


def _group_runs(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies waiting for a reaper do not)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False
