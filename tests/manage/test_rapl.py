"""RAPL, read where the machine has it. This one has none, so a private mount namespace
gives it the powercap files a machine with RAPL has (a counter, and where it wraps)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

READ = """
from perflearn.manage.power import Rapl, rapl_or_none
rapl = rapl_or_none()
assert rapl is not None and rapl.label == "measured (RAPL)"
before = rapl.read()
open("/sys/class/powercap/intel-rapl:0/energy_uj", "w").write("500")  # wrapped past 1000000
print(before, rapl.read(), rapl.joules_between(before, rapl.read()))
"""


def test_rapl_counters_are_read_across_their_wrap():
    """Rapl was never read: the manager said "measured" nowhere, and power was the model's
    even where a counter existed."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    # a tmpfs over /sys/class, seen by this namespace alone (this machine has no powercap directory to mount on)
    script = ("mount -t tmpfs none /sys/class && mkdir -p /sys/class/powercap/intel-rapl:0 && "
              "echo 999000 > /sys/class/powercap/intel-rapl:0/energy_uj && "
              "echo 999999 > /sys/class/powercap/intel-rapl:0/max_energy_range_uj && "
              f"{sys.executable} -c '{READ}'")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True)
    if done.returncode and "mount" in done.stderr:
        pytest.skip(f"cannot mount in a private namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    before, joules = done.stdout.rsplit(" ", 1)[0], float(done.stdout.split()[-1])
    assert before == "[999000] [500]"
    assert joules == pytest.approx((999999 + 1 - 999000 + 500) / 1e6)
