"""Interference injectors in the spirit of HPAS: each occupies one shared resource of
the node at a chosen intensity for a chosen time, so that detectors can learn what
each kind of interference looks like.

Every injector takes ``victim`` CPUs (where the workload runs) and places itself
where its interference is real on that machine: a CPU hog and the receive side of a
network flood on the victim's CPUs (time-sharing, softirq processing), the others on
the remaining CPUs (shared caches, memory bandwidth, disk, memory capacity). Run one
with ``perflearn inject KIND``, or as a companion process in any experiment spec.
"""

from __future__ import annotations

import mmap
import os
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from perflearn.lifetime import died_with

PERIOD = 0.01  # duty-cycle period, seconds


def _other_cpus(victim: set[int]) -> set[int]:
    allowed = os.sched_getaffinity(0)
    return (allowed - victim) or allowed


def _pin(cpus: set[int]) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)


_quiet = False  # a per-CPU worker other than the first: the first says it for all


def ready() -> None:
    """Say that set-up is over and interference starts (a spec waits for this line), once."""
    if not _quiet:
        print("injecting", flush=True)


def _duty(intensity: float, deadline: float, work: Callable[[], None]) -> None:
    """Do ``work`` (short steps) for ``intensity`` of every PERIOD until ``deadline``."""
    ready()
    while (start := time.monotonic()) < deadline:
        busy_until = start + PERIOD * intensity
        while time.monotonic() < busy_until:
            work()
        rest = start + PERIOD - time.monotonic()
        if rest > 0:
            time.sleep(rest)


def _per_cpu(cpus: set[int], body: Callable[[], None]) -> None:
    """Run ``body`` in one process per CPU, each pinned; wait for all."""
    children = []
    orphaned = died_with(signal.SIGKILL)  # an injector killed outright takes its workers with it
    global _quiet
    for i, cpu in enumerate(sorted(cpus)):
        pid = os.fork()
        if pid == 0:
            try:
                orphaned()
                _quiet = _quiet or i > 0
                _pin({cpu})
                body()
            finally:
                os._exit(0)
        children.append(pid)
    try:
        for pid in children:
            os.waitpid(pid, 0)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def cache_size(level: str) -> int:
    """Bytes of the given cache level (L1, L2, L3) of CPU 0, from sysfs."""
    wanted = int(level.lstrip("Ll"))
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if int((index / "level").read_text()) == wanted and (index / "type").read_text().strip() != "Instruction":
                text = (index / "size").read_text().strip()
                scale = {"K": 1024, "M": 1024**2}.get(text[-1], 1)
                return int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    return {1: 32 * 1024, 2: 1024**2, 3: 32 * 1024**2}[wanted]


def none(intensity: float, duration: float, victim: set[int], **_) -> None:
    """No interference: a healthy baseline that looks like the others to a spec."""
    ready()
    time.sleep(duration)


def cpuoccupy(intensity: float, duration: float, victim: set[int], **_) -> None:
    """Busy-loops on the victim's CPUs for ``intensity`` of the time."""
    deadline = time.monotonic() + duration
    _per_cpu(victim or os.sched_getaffinity(0), lambda: _duty(intensity, deadline, lambda: None))


def membw(intensity: float, duration: float, victim: set[int], **_) -> None:
    """Streams copies of arrays far larger than the last-level cache: memory bandwidth."""
    import numpy as np

    # 256 MiB per array: beyond any real last-level cache (VMs may report an L3 of
    # hundreds of MiB that is not really theirs), and quick to allocate.
    size = 256 * 1024**2 // 8

    def body() -> None:
        a, b = np.ones(size), np.ones(size)
        deadline = time.monotonic() + duration
        chunk = size // 64
        position = [0]

        def work() -> None:
            i = position[0]
            np.copyto(b[i:i + chunk], a[i:i + chunk])
            position[0] = (i + chunk) % (size - chunk)

        _duty(intensity, deadline, work)

    _per_cpu(_other_cpus(victim), body)


def cachecopy(intensity: float, duration: float, victim: set[int], level: str = "L3", **_) -> None:
    """Touches an array the size of one cache level in random order: evicts its lines."""
    import numpy as np

    count = min(cache_size(level), 64 * 1024**2) // 8

    def body() -> None:
        data = np.zeros(count)
        order = np.random.default_rng(0).permutation(count)
        chunks = np.array_split(order, max(1, count // 8192))
        deadline = time.monotonic() + duration
        position = [0]

        def work() -> None:
            data[chunks[position[0]]] += 1.0
            position[0] = (position[0] + 1) % len(chunks)

        _duty(intensity, deadline, work)

    _per_cpu(_other_cpus(victim), body)


def _available_memory() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 1024**3


def memleak(intensity: float, duration: float, victim: set[int], limit: float = 0.5, **_) -> None:
    """Allocates and touches memory at a growing rate, up to ``limit`` of what is available."""
    _pin(_other_cpus(victim))
    cap = int(_available_memory() * limit)
    step = int(64 * 1024**2 * intensity) or 1
    held: list[mmap.mmap] = []
    total = 0
    deadline = time.monotonic() + duration
    ready()
    while time.monotonic() < deadline:
        if total + step <= cap:
            block = mmap.mmap(-1, step)
            block.write(b"\1" * step)  # touch every page: resident, not just reserved
            held.append(block)
            total += step
        time.sleep(0.1)


def memeater(intensity: float, duration: float, victim: set[int], limit: float = 0.5, **_) -> None:
    """Takes ``intensity * limit`` of the available memory at once and keeps it resident."""
    _pin(_other_cpus(victim))
    size = int(_available_memory() * limit * intensity)
    block = mmap.mmap(-1, max(size, mmap.PAGESIZE))
    page = b"\1" * mmap.PAGESIZE
    deadline = time.monotonic() + duration
    ready()
    while time.monotonic() < deadline:
        for offset in range(0, len(block), mmap.PAGESIZE):
            block[offset:offset + mmap.PAGESIZE] = page
            if time.monotonic() >= deadline:
                break
        time.sleep(0.5)


def iobw(intensity: float, duration: float, victim: set[int], directory: str = "/var/tmp", **_) -> None:
    """Writes and syncs 4 MiB blocks to a file (wrapping at 256 MiB): disk bandwidth."""
    _pin(_other_cpus(victim))
    block = os.urandom(4 * 1024**2)
    deadline = time.monotonic() + duration
    # unnamed (O_TMPFILE): nothing is left on disk even when the injector is killed outright
    with tempfile.TemporaryFile(dir=directory, prefix="perflearn-iobw-") as f:
        position = [0]

        def work() -> None:
            os.pwrite(f.fileno(), block, position[0])
            os.fsync(f.fileno())
            position[0] = (position[0] + len(block)) % (256 * 1024**2)

        _duty(intensity, deadline, work)


def netflood(intensity: float, duration: float, victim: set[int], **_) -> None:
    """A loopback TCP flood whose receiving end runs on the victim's CPUs, so that its
    receive processing (softirqs, copies, cache) competes with the workload — the
    analog of NiMC's network-induced contention on a node without RDMA."""
    deadline = time.monotonic() + duration
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    orphaned = died_with(signal.SIGKILL)
    receiver = os.fork()
    if receiver == 0:
        try:
            orphaned()
            _pin(victim or os.sched_getaffinity(0))
            connection, _ = listener.accept()
            buffer = bytearray(1 << 20)
            while connection.recv_into(buffer):
                pass
        finally:
            os._exit(0)
    listener.close()
    try:
        _pin(_other_cpus(victim))
        payload = b"\0" * (1 << 16)
        with socket.create_connection(("127.0.0.1", port)) as sender:
            _duty(intensity, deadline, lambda: sender.sendall(payload))
    finally:
        os.kill(receiver, signal.SIGKILL)
        os.waitpid(receiver, 0)


INJECTORS: dict[str, Callable[..., None]] = {
    f.__name__: f for f in (none, cpuoccupy, membw, cachecopy, memleak, memeater, iobw, netflood)
}
