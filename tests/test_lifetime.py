"""A child started with ``died_with`` ends when its parent is killed outright."""

from __future__ import annotations

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
from perflearn.detect.model import Detector
from perflearn.detect.watch import watch
# a detector that waits an hour for its first window: killed long before it classifies
next(watch(Detector(None, None, [], 3600.0, 2, []), command=sys.argv[1:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("how", ["detect watch", "emulate"])
def test_the_users_command_ends_with_perflearn_killed_outright(how, alive, reap, tmp_path):
    if how == "emulate" and not (ROOT / "native/emu/build/libperflearn_emu.so").exists():
        pytest.skip("the socket shim is not built (make -C native/emu build)")
    written = tmp_path / "pid"
    command = ["sh", "-c", f"echo $$ > {written}; exec sleep 60"]
    if how == "emulate":
        argv = [sys.executable, "-m", "perflearn", "emulate", "--latency", "1us", "--", *command]
    else:
        argv = [sys.executable, "-c", WATCH, *command]
    parent = subprocess.Popen(argv)
    reap(parent)
    child = _pid_written(written, parent)
    reap(child)
    parent.kill()  # SIGKILL: no cleanup runs
    parent.wait()
    assert not alive(child)
