"""What one run launches, as actuators shape it and collectors read it."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

# Placeholders every command may use besides the knob names.
BUILTIN_PLACEHOLDERS = {"rep", "point_id", "run_dir", "port", "experiment", "spec_dir"}


def placeholders(template: str) -> set[str]:
    """Field names of a ``{name}`` template (``{{`` escapes a brace). Raises ValueError."""
    names = set()
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is not None:
            if not field_name.isidentifier():
                raise ValueError(f"placeholder {{{field_name}}} is not a name")
            names.add(field_name)
    return names


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an environment variable's name, or None. execve refuses it, so
    the spec must: it passed validate and failed every run."""
    if not name:
        return "an environment variable needs a name"
    if "=" in name or "\0" in name:
        return f"{name!r} is not an environment variable name (no '=' or NUL byte)"
    return None


def fill(template: str, values: dict[str, Any]) -> str:
    return template.format_map({k: as_written(v) for k, v in values.items()})


def as_written(value: Any) -> Any:
    """A knob value as a command or environment takes it: TOML's true and false as written
    (Python's True reached commands, session 61's audit); any other value as it is."""
    return ("true" if value else "false") if isinstance(value, bool) else value


@dataclass
class ProcessLaunch:
    """One process of a run: the workload, or a companion (e.g. a server)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    cpus: set[int] | None = None  # CPU affinity set before exec
    cgroup_procs: list[str] = field(default_factory=list)  # cgroup.procs files to join before exec
    stop_signal: int = 15  # how a companion is asked to stop (SIGTERM), then SIGKILL after stop_grace
    stop_grace: float = 5.0
    emulation: dict[str, Any] = field(default_factory=dict)  # interconnect knobs applied so far (emulate actuator)
    pid: int | None = None  # once started: its process group's id too (each process leads its own)


@dataclass
class RunContext:
    """One run in flight: its values, directory and processes."""

    experiment: str
    seq: int
    point_id: int
    rep: int
    values: dict[str, Any]  # knob and built-in placeholder values
    run_dir: Path
    processes: dict[str, ProcessLaunch] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what actuators did, for the run's record
    timeout: float | None = None  # the workload's timeout: also the budget for extracting a metric


@dataclass
class ProcessResult:
    """One process's exit and output. The output is given as text or as the file holding
    it, read when a collector first asks: a 200 MB stdout no metric reads is never read."""

    name: str
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    stdout_from: str | Path
    stderr_from: str | Path

    @cached_property
    def stdout(self) -> str:
        return _text(self.stdout_from)

    @cached_property
    def stderr(self) -> str:
        return _text(self.stderr_from)


def _text(source: str | Path) -> str:
    if isinstance(source, str):
        return source
    try:
        return source.read_text(errors="replace")
    except OSError:  # the run directory is gone: nothing to read
        return ""


@dataclass
class RunResult:
    """What happened: the workload's exit, time and resource usage, every process's output."""

    status: str  # ok | failed | timeout
    wall_s: float | None  # None: the workload never started
    exit_code: int | None
    signal: int | None
    rusage: Any | None  # resource.struct_rusage of the workload (and its reaped children)
    processes: dict[str, ProcessResult]
    error: str | None = None

    @property
    def workload(self) -> ProcessResult:
        return self.processes["workload"]
