"""Find the native wire binaries: $PERFLEARN_WIRE_BIN, the source tree's build, or PATH."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from perflearn.errors import UnsupportedError

BIN_ENV = "PERFLEARN_WIRE_BIN"
TOOLS = ("perflearn-sniff", "perflearn-load")

# src/perflearn/wire/locate.py -> repository root
_BUILD_DIR = Path(__file__).resolve().parents[3] / "native" / "wire" / "target" / "release"


def locate(tool: str) -> Path:
    """Path of ``perflearn-sniff`` or ``perflearn-load``.

    ``$PERFLEARN_WIRE_BIN`` may name the directory holding both tools (or, for one
    tool, the executable itself); without it the source tree's release build is used,
    then ``PATH``.
    """
    if tool not in TOOLS:
        raise ValueError(f"unknown wire tool {tool!r}")
    env = os.environ.get(BIN_ENV)
    if env:
        p = Path(env)
        candidate = p / tool if p.is_dir() else p
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        raise UnsupportedError(f"{candidate} is not an executable {tool}", where=BIN_ENV)
    built = _BUILD_DIR / tool
    if built.is_file() and os.access(built, os.X_OK):
        return built
    found = shutil.which(tool)
    if found:
        return Path(found)
    raise UnsupportedError(f"{tool} not built: run `make -C native/wire build` or set {BIN_ENV}", where=str(built))


def search_path(path: str | None) -> str:
    """``path`` (a ``PATH`` value; unset is the system's default) with the directories of
    the wire tools ``locate`` finds put first where ``path`` alone would not find those
    same files, so that a spec's command may name ``perflearn-load`` wherever the spec lies
    (the examples reached the source tree's build by a path relative to theirs, which a
    copied spec broke). ``path`` is kept as it was, entry for entry."""
    path = os.defpath if path is None else path
    first: list[str] = []
    for tool in TOOLS:
        try:
            found = locate(tool).resolve()
        except UnsupportedError:
            continue
        on_path = shutil.which(tool, path=path)
        if (on_path is None or Path(on_path).resolve() != found) and str(found.parent) not in first:
            first.append(str(found.parent))
    return os.pathsep.join([*first, path]) if first else path


def with_tools_on_path(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with its ``PATH`` as ``search_path`` gives it: the environment a spec's
    commands run in (its processes, set-up and teardown, a hook knob's command)."""
    return {**environ, "PATH": search_path(environ.get("PATH"))}
