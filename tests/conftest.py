"""Shared fixtures: a spec writer and a throwaway results store."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(text, name="spec.toml") -> Path of a spec file holding the dedented text."""

    def write(text: str, name: str = "spec.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return write


@pytest.fixture
def cpufreq_tree():
    """cpufreq_tree(root, cpus) lays out root/cpuN/cpufreq as the kernel does (each CPU in the
    "performance" governor): this project's machines have no cpufreq."""

    def make(root: Path, cpus=(0, 1), governors: str = "performance powersave userspace",
             frequencies: str = "800000 1600000 2400000") -> Path:
        for cpu in cpus:
            d = root / f"cpu{cpu}" / "cpufreq"
            d.mkdir(parents=True)
            for name, text in (("scaling_available_governors", governors), ("scaling_governor", "performance"),
                               ("scaling_available_frequencies", frequencies), ("scaling_setspeed", "<unsupported>")):
                (d / name).write_text(text + "\n")
        return root

    return make


@pytest.fixture
def store_path(tmp_path) -> Path:
    return tmp_path / "results.duckdb"


@pytest.fixture
def alive():
    """alive(pid) -> True while the process runs (a zombie waiting for its reaper counts as gone)."""

    def check(pid: int) -> bool:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return False
            except FileNotFoundError:
                return False
            time.sleep(0.05)
        return True

    return check


@pytest.fixture
def reap():
    """reap(*procs): at the test's end, failed or not, SIGKILL each of ``procs`` still running
    (a ``subprocess.Popen``, then waited for, or a pid): the kill tests start processes
    meant to end with others, and must leave none behind when they do not."""
    procs: list = []
    yield lambda *more: procs.extend(more)
    for proc in procs:
        if hasattr(proc, "poll"):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            continue
        try:
            os.kill(int(proc), signal.SIGKILL)
        except ProcessLookupError:
            pass
