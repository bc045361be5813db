"""What machine the experiment ran on, stored with it."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from perflearn import __version__
from perflearn.experiment import cgroups


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _numa_nodes() -> int | None:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return len(nodes) or None


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cpufreq() -> str | None:
    governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return governor.read_text().strip() if governor.exists() else None


def host_metadata() -> dict:
    uname = platform.uname()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cpus_allowed": len(os.sched_getaffinity(0)),
        "numa_nodes": _numa_nodes(),
        "memory_bytes": _memory_bytes(),
        "kernel": uname.release,
        "os": f"{uname.system} {uname.machine}",
        "python": platform.python_version(),
        "perflearn": __version__,
        "cgroup_version": cgroups.version(),
        "cpufreq_governor": _cpufreq(),  # None: no cpufreq on this machine
    }
