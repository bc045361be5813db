"""cgroup v1 and v2: create a group per process of an experiment, set cpus and quota.

The runner's child process joins its groups itself (writing its pid to
``cgroup.procs`` before exec), so the workload starts inside them.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from perflearn.errors import UnsupportedError
from perflearn.lifetime import alive

def root() -> Path:
    """The cgroup mount point (PERFLEARN_CGROUP_ROOT overrides /sys/fs/cgroup)."""
    return Path(os.environ.get("PERFLEARN_CGROUP_ROOT", "/sys/fs/cgroup"))


def version() -> int | None:
    """2 for a unified hierarchy, 1 for v1 controllers mounted below the root, else None."""
    base = root()
    if (base / "cgroup.controllers").exists():
        return 2
    if (base / "cpu").is_dir() or (base / "cpuset").is_dir():
        return 1
    return None


@dataclass
class Group:
    """One process's groups for the controllers it needs (cpuset, cpu)."""

    name: str
    dirs: dict[str, Path]  # controller -> directory

    @property
    def procs_files(self) -> list[str]:
        return sorted({str(d / "cgroup.procs") for d in self.dirs.values()})

    def set_cpus(self, cpus: str) -> None:
        _write(self.dirs["cpuset"] / "cpuset.cpus", cpus)

    def set_quota(self, cpus: float, period_us: int) -> None:
        """Limit to ``cpus`` CPUs' worth of time per period (0 = unlimited)."""
        directory = self.dirs["cpu"]
        quota = int(round(cpus * period_us)) if cpus > 0 else -1
        if (directory / "cpu.max").exists():
            _write(directory / "cpu.max", f"{quota if quota > 0 else 'max'} {period_us}")
        else:
            _write(directory / "cpu.cfs_period_us", str(period_us))
            _write(directory / "cpu.cfs_quota_us", str(quota))

    def pids(self) -> set[int]:
        """The processes in the group (any of its controllers' directories)."""
        return set().union(*(_pids(directory) for directory in self.dirs.values()))

    def end_processes(self, grace: float = 5.0) -> int:
        """SIGTERM every process in the group, SIGKILL those left after ``grace`` s: a service
        that forked or daemonised outlived its direct child's end (and kept the group). The count ended."""
        return _end(lambda: self.pids(), grace)

    def remove(self) -> None:
        for directory in self.dirs.values():
            try:
                directory.rmdir()
            except OSError:
                pass  # still has processes (a stray child): leave it, it is harmless


def create(name: str, controllers: set[str]) -> Group:
    """Create (or reuse) ``perflearn/<name>`` for each controller in ``controllers``."""
    ver = version()
    ROOT = root()
    if ver is None:
        raise UnsupportedError(f"no cgroup hierarchy under {ROOT}")
    dirs: dict[str, Path] = {}
    if ver == 2:
        enabled = (ROOT / "cgroup.controllers").read_text().split()
        for controller in controllers:
            if controller not in enabled:
                raise UnsupportedError(f"cgroup v2 controller {controller!r} is not enabled under {ROOT}")
        parent = ROOT / "perflearn"
        parent.mkdir(exist_ok=True)
        wanted = " ".join(f"+{c}" for c in sorted(controllers))
        _write(ROOT / "cgroup.subtree_control", wanted)
        _write(parent / "cgroup.subtree_control", wanted)
        directory = parent / name
        directory.mkdir(exist_ok=True)
        return Group(name, {c: directory for c in controllers})
    for controller in controllers:
        base = ROOT / controller
        if not base.is_dir():
            raise UnsupportedError(f"cgroup v1 controller {controller!r} is not mounted at {base}")
        parent = base / "perflearn"
        directory = parent / name
        for d in (parent, directory):
            d.mkdir(exist_ok=True)
            if controller == "cpuset":  # a v1 cpuset group needs cpus and mems before it takes tasks
                for file in ("cpuset.cpus", "cpuset.mems"):
                    if not (d / file).read_text().strip():
                        _write(d / file, (d.parent / file).read_text().strip())
        dirs[controller] = directory
    return Group(name, dirs)


def _pids(directory: Path) -> set[int]:
    try:
        return {int(line) for line in (directory / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def _end(pids, grace: float) -> int:
    """SIGTERM ``pids()``, then SIGKILL what is left after ``grace`` s; how many there were."""
    first = pids()
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not pids():
            break
    return len(first)


def remove_stale(prefix: str, end_processes: bool = False) -> list[str]:
    """Remove the empty groups ``perflearn/<prefix>-<pid>-*`` of processes no longer
    running: a manager killed (SIGKILL, a crash) cannot remove its own. Returns the names removed. A group
    of a process still alive is left alone; one with processes in it too, unless ``end_processes``
    (a killed manager's service that forked: its parent-death signal reached only the direct child)."""
    base = root()
    parents = [base / "perflearn"] if version() == 2 else [d / "perflearn" for d in base.iterdir() if d.is_dir()]
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)-")
    removed = []
    for parent in parents:
        if not parent.is_dir():
            continue
        for directory in parent.iterdir():
            match = pattern.match(directory.name)
            if not match or not directory.is_dir() or alive(int(match.group(1))):
                continue
            if end_processes:
                _end(lambda: _pids(directory), grace=2.0)
            try:
                directory.rmdir()  # a cgroup directory with processes refuses (EBUSY)
            except OSError:
                continue
            removed.append(directory.name)
    return sorted(set(removed))


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise UnsupportedError(f"cannot write {value!r} to {path}: {exc.strerror}") from None
