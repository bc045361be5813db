"""A child started with ``died_with`` ends when its parent is killed outright."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
