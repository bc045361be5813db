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
from typing import Callable

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
