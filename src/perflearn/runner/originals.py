"""What a sweep's machine-wide knobs (a sysctl, a NIC's coalescing) read before it changed
them, kept on disk while it runs.

A runner puts such settings back when it ends, but a SIGKILLed runner cannot: the setting
stays at its last run's value, and the next runner read that as the original and "restored"
it there. Now each setting's original is written, with the runner's pid and start time,
to a file of its own before the first run; the next runner that finds the file of a runner
no longer alive takes that original as its own (and says so), and a runner that ends
puts the setting back and deletes the file. Files live in /run for root (a reboot
clears them and resets the settings alike), in a directory only their user may write;
they are per setting, not per store, as the setting is the machine's (a `net.*` sysctl
or a NIC's, per network namespace).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from perflearn.experiment.actuators import Actuator, MachineSetting
from perflearn.lifetime import alive


def _dir() -> Path:
    """/run/perflearn/originals for root (a sysctl needs root; /run is cleared at boot, as the
    settings are), else the temp directory's perflearn-originals-<uid>."""
    if os.geteuid() == 0 and os.access("/run", os.W_OK):
        return Path("/run/perflearn/originals")
    return Path(tempfile.gettempdir()) / f"perflearn-originals-{os.geteuid()}"


def _private(path: Path) -> bool:
    """The directory exists as this user's own, a real directory no one else may write
    into: else another user could plant an "original" a root runner would write back."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def _file(setting: str) -> Path:
    return _dir() / f"{hashlib.sha256(setting.encode()).hexdigest()[:16]}.json"


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (None when there is no such process):
    with the pid, it tells a runner from a later process that got its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command's parentheses


def _read(path: Path) -> dict | None:
    try:
        held = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(held, dict) and isinstance(held.get("original"), str) and isinstance(held.get("pid"), int)
    return held if ok else None


def _write(path: Path, setting: str, original: str) -> None:
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")  # the writer's pid: a killed one's is found
    tmp.unlink(missing_ok=True)  # an earlier process's with this pid, killed while writing
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"setting": setting, "original": original, "pid": os.getpid(), "started": _started(os.getpid())}, f)
    os.replace(tmp, path)  # whole or not at all: a kill while writing leaves the old file


def _remove_dead_writers_files() -> None:
    """A runner killed while writing an original left its ``.tmp`` file: remove it."""
    for tmp in _dir().glob("*.tmp"):
        pid = tmp.suffixes[0][1:] if len(tmp.suffixes) == 2 else ""
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)


def take(actuators: dict[str, Actuator], warn: Callable[[str], None]) -> list[Path]:
    """Record each machine-wide setting's original before the sweep changes it, or take over
    the one a killed runner recorded. Returns the files this runner now holds."""
    held: list[Path] = []
    machine = [a for a in actuators.values() if isinstance(a, MachineSetting)]
    if machine and not _private(_dir()):
        warn(f"{_dir()} is not a directory of this user's alone: the originals of "
             f"{', '.join(a.setting() for a in machine)} are not kept on disk (a killed runner's change stays)")
        return held
    _remove_dead_writers_files()
    for actuator in machine:
        setting, key = actuator.setting(), actuator.key()
        path = _file(key)
        before = _read(path)
        if before is not None and (before["pid"] == os.getpid() or before.get("setting") != key):
            before = None  # this process's own, from an earlier sweep; or another setting's (a hash clash)
        if before is None:
            _write(path, key, actuator.capture())
            held.append(path)
            continue
        actuator.adopt(before["original"])
        if _started(before["pid"]) == before.get("started"):  # its runner is alive: the file stays its own
            warn(f"{setting} is also changed by another perflearn runner (pid {before['pid']}) now: both put "
                 f"back {before['original']}, its value before that runner")
            continue
        warn(f"{setting} was left at a killed runner's value; it will be put back to {before['original']}, "
             "its value before that runner")
        _write(path, key, before["original"])
        held.append(path)
    return held


def release(held: list[Path]) -> None:
    """After the settings were put back: forget their originals."""
    for path in held:
        before = _read(path)
        if before is None or before["pid"] == os.getpid():
            path.unlink(missing_ok=True)
