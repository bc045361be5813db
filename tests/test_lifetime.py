"""A child started with ``died_with`` ends when its parent is killed outright."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PARENT = """
import os, subprocess, sys, time
from perflearn.lifetime import died_with
child = subprocess.Popen(["sleep", "60"], preexec_fn=died_with() if sys.argv[1] == "1" else None)
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("ends", [True, False])
def test_a_child_ends_with_its_parent_killed_outright(ends, alive, reap):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, "1" if ends else "0"], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    reap(parent, child)
    parent.kill()  # SIGKILL: no cleanup runs
    parent.wait()
    assert alive(child) is not ends  # without it, the orphan runs on: the case it exists for


def _pid_written(path, parent) -> int:
    """The pid a command wrote to ``path`` once it started (its parent still running)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        assert parent.poll() is None, f"perflearn exited early ({parent.returncode})"
        time.sleep(0.05)
    raise AssertionError("the command never started")


WATCH = """
import sys
from perflearn.cli.app import interrupt_on_sigterm
from perflearn.errors import Terminated
from perflearn.detect.model import Detector
from perflearn.detect.watch import watch
interrupt_on_sigterm()  # as `perflearn detect watch` does
try:  # a detector that waits an hour for its first window: stopped long before it classifies
    next(watch(Detector(None, None, [], 3600.0, 2, []), command=sys.argv[1:]))
except KeyboardInterrupt as exc:  # as the CLI maps it: 143 for SIGTERM, 130 for Ctrl-C
    sys.exit(143 if isinstance(exc, Terminated) else 130)
"""


def _perflearn_running(how: str, command: list[str]) -> list[str]:
    """The argv of perflearn running ``command`` the ``how`` way (emulate, or detect watch)."""
    if how == "emulate":
        if not (ROOT / "native/emu/build/libperflearn_emu.so").exists():
            pytest.skip("the socket shim is not built (make -C native/emu build)")
        return [sys.executable, "-m", "perflearn", "emulate", "--latency", "1us", "--", *command]
    return [sys.executable, "-c", WATCH, *command]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("how", ["detect watch", "emulate"])
@pytest.mark.parametrize("script", ["echo $$ > {pid}; exec sleep 60", "sleep 60 & echo $! > {pid}; wait"],
                         ids=["the command", "its background job"])
def test_what_the_command_runs_ends_with_perflearn_killed_outright(how, script, alive, reap, tmp_path):
    """The command, and a shell's background job (before session 46 the shell ended by its
    parent-death signal and the job ran on)."""
    written = tmp_path / "pid"
    parent = subprocess.Popen(_perflearn_running(how, ["sh", "-c", script.format(pid=written)]))
    reap(parent)
    process = _pid_written(written, parent)
    reap(process)
    parent.kill()  # SIGKILL: no cleanup runs
    parent.wait()
    assert not alive(process)  # (alive waits up to 5 s for it to end)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc are Linux's")
def test_a_group_that_ended_leaves_no_guard(reap):
    from perflearn.lifetime import alive, release, start_group

    process = start_group(["true"])
    guard = process.guard.pid
    reap(guard)
    process.wait()
    assert alive(guard)  # the group ended; the guard waits to be told
    release(process)
    assert not alive(guard)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc are Linux's")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("how", ["detect watch", "emulate"])
def test_what_the_command_started_ends_when_perflearn_is_interrupted(how, sig, alive, reap, tmp_path):
    written = tmp_path / "pid"
    # a background job of a shell: the shell alone getting a signal would leave it running
    argv = _perflearn_running(how, ["sh", "-c", f"sleep 60 & echo $! > {written}; wait"])
    # a test run from a background shell (CI, nohup) inherits SIGINT ignored, which Python
    # keeps: give perflearn the disposition of a foreground program, where Ctrl-C comes from
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    parent = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, preexec_fn=restore)
    reap(parent)
    grandchild = _pid_written(written, parent)
    reap(grandchild)
    parent.send_signal(sig)
    assert parent.wait(timeout=30) == 128 + sig, parent.stderr.read()  # 130 for Ctrl-C, 143 for SIGTERM
    assert not alive(grandchild)


def test_end_group_kills_what_ignores_sigterm(alive, reap):
    from perflearn.lifetime import end_group

    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60"], process_group=0)
    reap(stubborn)
    time.sleep(0.2)  # the trap is set
    started = time.monotonic()
    end_group(stubborn, grace=0.5)
    assert stubborn.returncode == -signal.SIGKILL and time.monotonic() - started < 10


def test_a_signal_in_a_held_block_waits_for_its_end_and_a_second_does_not():
    """A service's shutdown cut in two by SIGTERM left the rest undone (a thread unjoined);
    held, the block runs to its end and the signal is delivered after it, as it would have been."""
    import os
    import threading

    from perflearn.errors import Terminated
    from perflearn.lifetime import signals_held

    def terminate(*_):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        done = []
        with pytest.raises(Terminated):
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                worker = threading.Thread(target=time.sleep, args=(0.2,))
                worker.start()
                worker.join()  # not cut short
                done.append(not worker.is_alive())
        assert done == [True]
        assert signal.getsignal(signal.SIGTERM) is terminate  # the command's handler back
        with pytest.raises(Terminated):
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGTERM)  # a second: delivered at once
                time.sleep(0.5)
                done.append("after the second")
        assert done == [True]
        # the block raising its own error (a sniffer that would not stop) does not lose the stop
        with pytest.raises(Terminated) as stopped:
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                raise OSError("the sniffer would not stop")
        assert isinstance(stopped.value.__context__, OSError)
    finally:
        signal.signal(signal.SIGTERM, previous)
