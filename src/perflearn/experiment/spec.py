"""Experiment specs (TOML): parse, validate, and give every error the user's location.

A spec has four parts: ``[workload]`` (what to run), ``[knobs.NAME]`` (what to
vary and how to apply it), ``[metrics.NAME]`` (what to measure) and ``[design]``
(which points, how often, in what order). ``docs/spec.md`` is the reference.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import signal
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflearn.errors import SpecError

from . import actuators as actuators_mod
from . import collectors as collectors_mod
from .collectors import MetricSpec
from .expr import Expression
from .knobs import MAX_LEVELS, Domain, Knob, is_number
from .launch import BUILTIN_PLACEHOLDERS, env_name_problem, placeholders
from .sampling import SamplingSpec
from .tomlpos import Positions
from .units import parse_duration

DESIGNS = ("factorial", "random", "lhs", "list")
ORDERS = ("sequential", "random")
_MISSING = object()


@dataclass
class ProcessSpec:
    """A process of the workload: the measured one (``workload``) or a companion."""

    name: str
    command: list[str] | str  # argv template, or a shell command template when shell=True
    shell: bool = False
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready_port: str | None = None  # template; the companion is ready when this TCP port accepts
    ready_pattern: str | None = None  # ... or when its stdout/stderr matches this
    ready_delay: float = 0.0
    ready_timeout: float = 10.0
    stop_signal: int = signal.SIGTERM
    stop_grace: float = 5.0

    def templates(self) -> list[tuple[tuple[str, ...], str]]:
        """Every template with the key it came from (an error names that key)."""
        parts = [(("command",), t) for t in ([self.command] if isinstance(self.command, str) else self.command)]
        parts += [(("env", name), t) for name, t in self.env.items()]
        return parts + [((key,), t) for key, t in (("cwd", self.cwd), ("ready_port", self.ready_port)) if t]


@dataclass
class WorkloadSpec:
    main: ProcessSpec
    companions: list[ProcessSpec] = field(default_factory=list)
    timeout: float | None = None
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)
    warmup: int = 0
    measure_from: str | None = None  # the measured phase begins at the workload's first stdout line matching this

    @property
    def processes(self) -> list[ProcessSpec]:
        return [*self.companions, self.main]


@dataclass
class DesignSpec:
    kind: str = "factorial"
    samples: int | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    repeat: int = 1
    order: str = "sequential"
    seed: int = 0
    constraints: list[Expression] = field(default_factory=list)


@dataclass
class Spec:
    path: Path
    name: str
    description: str
    workload: WorkloadSpec
    knobs: dict[str, Knob]
    metrics: dict[str, MetricSpec]
    design: DesignSpec
    raw: dict[str, Any]
    text: str
    warnings: list[str] = field(default_factory=list)
    sampling: SamplingSpec | None = None  # interval samples during each run

    @property
    def spec_dir(self) -> str:
        """The spec file's directory, absolute: {spec_dir} in commands."""
        return str(Path(self.path).resolve().parent)

    @property
    def hash(self) -> str:
        """Identity of what the spec asks for: comments and layout do not count."""
        canonical = json.dumps(self.raw, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class _Table:
    """A TOML table being read: typed access, errors with file:line and key path."""

    def __init__(self, data: Any, path: tuple[str, ...], reader: "_Reader"):
        self.reader = reader
        self.path = path
        if not isinstance(data, dict):
            raise reader.error(path, f"expected a table, got {_describe(data)}")
        self.data = data
        self.used: set[str] = set()

    def get(self, key: str, types: tuple[type, ...], default: Any = _MISSING, *, expected: str | None = None):
        self.used.add(key)
        if key not in self.data:
            if default is _MISSING:
                raise self.reader.error(self.path + (key,), f"missing (expected {expected or _names(types)})")
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in types:
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            raise self.error(key, f"expected {expected or _names(types)}, got {_describe(value)}")
        return value

    def table(self, key: str, default: Any = _MISSING) -> "_Table | None":
        value = self.get(key, (dict,), default)
        return None if value is None else _Table(value, self.path + (key,), self.reader)

    def error(self, key: str | None, message: str) -> SpecError:
        return self.reader.error(self.path + ((key,) if key else ()), message)

    def done(self, allowed_extra: tuple[str, ...] = ()) -> None:
        unknown = [k for k in self.data if k not in self.used and k not in allowed_extra]
        if unknown:
            known = sorted(self.used | set(allowed_extra))
            raise self.error(unknown[0], f"unknown key (expected one of: {', '.join(known)})")


class _Reader:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.positions = Positions(text)

    def error(self, keys: tuple[str, ...], message: str) -> SpecError:
        line = self.positions.line(keys)
        where = f"{self.path}:{line}" if line else str(self.path)
        dotted = ".".join(keys)
        return SpecError(f"{dotted}: {message}" if dotted else message, where=where)


def load_spec(path: str | Path, values: dict[str, list] | None = None) -> Spec:
    """Read and validate a spec file. Raises SpecError with file:line and key.

    ``values`` replaces knobs' values (``perflearn run --values rate=1000,2000``): a sweep
    whose points depend on an earlier measurement (e.g. loads as fractions of a knee) needs
    no generated spec file. The override is part of the spec's hash, so ``--resume`` sees it.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError("no such spec file", where=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read the spec ({exc})", where=str(path)) from None
    return parse_spec(text, path, values)


def parse_spec(text: str, path: str | Path = "<spec>", values: dict[str, list] | None = None) -> Spec:
    path = Path(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib says "... (at line 3, column 7)": keep its words, lead with the file and line.
        message = str(exc)
        line = ""
        if "(at line " in message:
            message, _, position = message.rpartition(" (at line ")
            line = ":" + position.split(",")[0].rstrip(")")
        raise SpecError(f"not valid TOML: {message}", where=f"{path}{line}") from None
    knobs_raw = raw.get("knobs") if isinstance(raw.get("knobs"), dict) else {}
    for knob_name, knob_values in (values or {}).items():
        knob = knobs_raw.get(knob_name)
        if not isinstance(knob, dict):
            known = ", ".join(knobs_raw) or "none"
            raise SpecError(f"--values {knob_name}: the spec has no knob {knob_name!r} (knobs: {known})", where=str(path))
        # the knob's own kind stays (a categorical knob's values are categories); a range
        # or log_range becomes the values given, its bounds and step gone with it
        kind = "categorical" if "categorical" in knob else "values"
        for key in ("values", "categorical", "range", "log_range", "step", "base", "integer"):
            knob.pop(key, None)
        knob[kind] = list(knob_values)
    reader = _Reader(path, text)
    root = _Table(raw, (), reader)

    experiment = root.table("experiment", None)
    name, description = path.stem, ""
    if experiment:
        name = experiment.get("name", (str,), path.stem)
        description = experiment.get("description", (str,), "")
        experiment.done()
        problem = experiment_name_problem(name)
        if problem:
            raise experiment.error("name", problem)

    workload = _read_workload(root.table("workload"))
    knobs = {}
    knobs_table = root.table("knobs", {})
    for knob_name in knobs_table.data:
        knobs[knob_name] = _read_knob(knob_name, knobs_table.table(knob_name), name)
    _refuse_knobs_setting_one_thing(knobs, knobs_table, name)
    metrics = {}
    metrics_table = root.table("metrics")
    if not metrics_table.data:
        raise metrics_table.error(None, "define at least one metric")
    for metric_name in metrics_table.data:
        if metric_name in knobs:
            raise metrics_table.error(metric_name, "a metric cannot have the name of a knob")
        metrics[metric_name] = _read_metric(metric_name, metrics_table.table(metric_name))
    design_table = root.table("design", {})
    design = _read_design(design_table, knobs)
    sampling_table = root.table("sampling", None)
    sampling = _read_sampling(sampling_table) if sampling_table is not None else None
    root.done()

    spec = Spec(path, name, description, workload, knobs, metrics, design, raw, text, sampling=sampling)
    _check_references(spec, reader)
    return spec


def _read_process(table: _Table, name: str) -> ProcessSpec:
    command = table.get("command", (str, list), expected="a command string or an argv list")
    shell = table.get("shell", (bool,), False)
    if isinstance(command, list):
        if not command or not all(isinstance(a, str) for a in command):
            raise table.error("command", "an argv list must be non-empty strings")
        if shell:
            raise table.error("shell", "shell = true needs the command as one string")
    else:
        if not command.strip():
            raise table.error("command", "must not be empty")
        if not shell:
            try:
                command = shlex.split(command)
            except ValueError as exc:
                raise table.error("command", f"cannot split into arguments ({exc}); quote it or set shell = true")
    for arg in ([command] if isinstance(command, str) else command):
        if "\0" in arg:  # execve cannot pass it: the run would fail, not the spec
            raise table.error("command", f"{arg!r} contains a NUL byte")
    env = table.get("env", (dict,), {})
    for var, value in env.items():
        problem = env_name_problem(var)
        if problem:
            raise table.error("env", problem)
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise table.error("env", f"{var}: expected a string or number, got {_describe(value)}")
        if "\0" in str(value):
            raise table.error("env", f"{var}: the value contains a NUL byte")
    env = {k: str(v) for k, v in env.items()}
    cwd = table.get("cwd", (str,), None)
    if cwd is not None and "\0" in cwd:
        raise table.error("cwd", "contains a NUL byte")
    process = ProcessSpec(name=name, command=command, shell=shell, cwd=cwd, env=env)
    if name != "workload":
        ready_port = table.get("ready_port", (int, str), None)
        literal = str(ready_port).isdigit() if ready_port is not None else False
        if ready_port is not None and not ("{" in str(ready_port) or (literal and 1 <= int(ready_port) <= 65535)):
            raise table.error("ready_port", f"expected a TCP port (1-65535) or a placeholder such as "
                                            f"\"{{port}}\", got {ready_port!r}")
        process.ready_port = None if ready_port is None else str(ready_port)
        process.ready_pattern = table.get("ready_pattern", (str,), None)
        process.ready_delay = _duration(table, "ready_delay", 0.0)
        process.ready_timeout = _duration(table, "ready_timeout", 10.0, positive=True)
        process.stop_grace = _duration(table, "stop_grace", 5.0)
        stop = table.get("stop_signal", (str,), "TERM")
        try:
            process.stop_signal = signal.Signals[stop if stop.startswith("SIG") else f"SIG{stop}"]
        except KeyError:
            raise table.error("stop_signal", f"unknown signal {stop!r} (e.g. TERM, INT, KILL)") from None
        if process.ready_pattern:
            try:
                re.compile(process.ready_pattern)
            except re.error as exc:
                raise table.error("ready_pattern", f"not a valid regular expression ({exc})") from None
    return process


def _read_workload(table: _Table) -> WorkloadSpec:
    main = _read_process(table, "workload")
    timeout = _duration(table, "timeout", None, positive=True)
    setup = _commands(table, "setup")
    teardown = _commands(table, "teardown")
    warmup = table.get("warmup", (int,), 0)
    if warmup < 0:
        raise table.error("warmup", "must be >= 0")
    measure_from = table.get("measure_from", (str,), None)
    if measure_from is not None:
        try:
            re.compile(measure_from)
        except re.error as exc:
            raise table.error("measure_from", f"not a valid regular expression ({exc})") from None
    companions = []
    companions_table = table.table("companions", {})
    for name in companions_table.data:
        if name == "workload":
            raise companions_table.error(name, "'workload' is the measured process; give the companion another name")
        sub = companions_table.table(name)
        companions.append(_read_process(sub, name))
        sub.done()
    table.done()
    return WorkloadSpec(main, companions, timeout, setup, teardown, warmup, measure_from)


def experiment_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an experiment, or None: it names the files `export` writes
    (``../x`` wrote outside the directory) and a row of `ls` (a blank one showed nothing)."""
    if not name.strip():
        return "must not be empty"
    if "/" in name or any(ord(c) < 32 for c in name):
        return f"{name!r} cannot name an experiment (no '/' or control characters: it names files)"
    return None


def _value_key(value: Any, cpus: bool) -> Any:
    """What a knob value sets, for telling two values apart: a number's (1, 1.0 and "1" fill a
    command alike), a CPU set's CPUs (as the runner fills and applies a list: [0, 1], [1, 0]
    and "0-1" of a CPU knob), else the value as written."""
    if cpus or isinstance(value, list):
        try:
            return "cpus", frozenset(actuators_mod.parse_cpus(value))
        except ValueError:
            pass
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return number if math.isfinite(number) else value
    return json.dumps(value, sort_keys=True)


def _refuse_knobs_setting_one_thing(knobs: dict[str, Knob], table: _Table, experiment: str) -> None:
    """Two knobs writing one setting (one environment variable, one process's affinity or
    cgroup, one sysctl): the later one's value was applied, and the data said the earlier
    one had no effect, unsaid."""
    seen: dict[tuple[str, str], str] = {}
    for knob in knobs.values():
        what = actuators_mod.build(knob, experiment).sets()
        if what is None:
            continue
        setting, target = what
        for (other_setting, other_target), other in seen.items():
            if setting == other_setting and (target == other_target or "*" in (target, other_target)):
                on = "" if target == "machine" else f" of {'every process' if '*' in (target, other_target) else target}"
                raise table.error(knob.name, f"sets the {setting}{on}, as knob {other!r} does: the later would "
                                  "overwrite the other's value in every run (vary one knob, or combine them)")
        seen[what] = knob.name


def _read_knob(name: str, table: _Table, experiment: str) -> Knob:
    if not name.isidentifier():
        raise table.error(None, "a knob name must be an identifier (letters, digits, _), to be usable as {name}")
    if name in BUILTIN_PLACEHOLDERS:
        raise table.error(None, f"{name!r} is a built-in placeholder; choose another knob name")
    if name in RUN_COLUMNS:
        raise table.error(None, f"{name!r} is a column every run has in the results; choose another knob name")
    given = [k for k in ("values", "categorical", "range", "log_range") if k in table.data]
    if len(given) != 1:
        raise table.error(None, "give exactly one of values, categorical, range, log_range")
    kind = given[0]
    if kind in ("values", "categorical"):
        values = table.get(kind, (list,))
        if not values:
            raise table.error(kind, "must list at least one value")
        for value in values:
            problem = value_problem(value)
            if problem:
                raise table.error(kind, problem)
        odd = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
        if odd:
            raise table.error(kind, f"{odd[0]} is not a finite number")
        # 1 and 1.0 are one value (they fill a command alike, and were two points of one setting); so are 1 and
        # "1", and [0, 1], [1, 0] and "0-1" of a CPU knob (session 61's audit: three categories of one setting)
        cpus = table.data.get("apply") in ("affinity", "cgroup-cpuset")
        keys = [_value_key(v, cpus) for v in values]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise table.error(kind, f"lists a value twice ({values[keys.index(key)]!r} and {values[i]!r} are one "
                                        "setting)")
        categorical = kind == "categorical" or not all(is_number(v) for v in values)
        domain = Domain("values", tuple(_freeze(v) for v in values), categorical=categorical)
    else:
        bounds = table.get(kind, (list,))
        if len(bounds) != 2 or not all(is_number(b) and math.isfinite(b) for b in bounds):
            raise table.error(kind, f"expected [low, high] finite numbers, got {bounds!r}")
        low, high = bounds
        if low > high:
            raise table.error(kind, f"low {low} is above high {high}")
        integer = table.get("integer", (bool,), isinstance(low, int) and isinstance(high, int))
        if integer and not (float(low).is_integer() and float(high).is_integer()):
            # rounding would give values outside [low, high]
            raise table.error(kind, f"an integer knob needs whole-number bounds, got {bounds!r}")
        if kind == "range":
            domain = _range_domain(table, low, high, integer)
        else:
            if low <= 0:
                raise table.error(kind, "a log range needs low > 0")
            base = table.get("base", (int, float), 2)
            if not (1 < base < math.inf):  # nan passed "base <= 1" and crashed counting the values
                raise table.error("base", f"must be a finite number > 1, got {base!r}")
            domain = Domain("log_range", low=low, high=high, base=float(base), integer=integer)
    actuator = table.get("apply", (str,), "placeholder")
    if actuator not in actuators_mod.ACTUATORS:
        raise table.error("apply", f"unknown actuator {actuator!r} (one of: {', '.join(actuators_mod.ACTUATORS)})")
    options = {}
    for option, (types, required) in actuators_mod.ACTUATORS[actuator].OPTIONS.items():
        value = table.get(option, types, _MISSING if required else None)
        if value is not None:
            options[option] = value
    role = table.get("role", (str,), "knob")
    if role not in ("knob", "context"):
        raise table.error("role", f"expected 'knob' or 'context', got {role!r}")
    default = table.get("default", (str, int, float, bool, list), None)
    problem = value_problem(default) if default is not None else None
    if problem:
        raise table.error("default", problem)
    knob = Knob(name, domain, actuator, options, role, default, table.get("unit", (str,), ""))
    table.done()
    try:
        built = actuators_mod.build(knob, experiment)
    except ValueError as exc:
        raise _option_error(table, exc) from None
    if domain.finite and domain.count() > MAX_LEVELS:
        raise table.error(kind, f"gives {domain.count():,} values, more than {MAX_LEVELS:,} "
                                f"(is the {'step' if kind == 'range' else 'base'} too small?)")
    values = domain.levels() if domain.finite else [domain.low, domain.high]
    repeated = _repeated(values) if kind != "values" and domain.finite else None
    if repeated is not None:  # integer rounding (or the 12 digits kept) made two levels one: points repeat
        raise table.error(kind, f"two of its values round to {repeated!r}: use a larger "
                                f"{'step' if kind == 'range' else 'base'}")
    for value in values + ([knob.default] if knob.default is not None else []):
        try:
            built.validate_value(value)
        except ValueError as exc:
            raise table.error(kind if value is not knob.default else "default", str(exc)) from None
    if knob.default is not None and not domain.contains(_freeze(knob.default)):
        raise table.error("default", f"{knob.default!r} is not one of the knob's values")
    return knob


# the columns every run has in the store's datasets and exports (store.dataset.RUN_COLUMNS):
# a knob or metric of that name hid the run's own (a knob `status` replaced ok/failed)
RUN_COLUMNS = ("run_id", "point_id", "rep", "status")


def _read_metric(name: str, table: _Table) -> MetricSpec:
    if name in RUN_COLUMNS:
        raise table.error(None, f"{name!r} is a column every run has in the results; choose another metric name")
    source = table.get("source", (str,), expected="a source: " + ", ".join(collectors_mod.SOURCES))
    if source not in collectors_mod.SOURCES:
        raise table.error("source", f"unknown source {source!r} (one of: {', '.join(collectors_mod.SOURCES)})")
    collector = collectors_mod.SOURCES[source]
    options = {}
    for option, (types, required) in collector.OPTIONS.items():
        value = table.get(option, types, _MISSING if required else None)
        if value is not None:
            options[option] = value
    metric = MetricSpec(name, source, table.get("unit", (str,), collector.default_unit), options,
                        table.get("required", (bool,), False))
    table.done()
    try:
        collector.validate(metric)
    except ValueError as exc:
        raise _option_error(table, exc) from None
    return metric


def _option_error(table: _Table, exc: ValueError) -> SpecError:
    """An actuator's or collector's ValueError("key: message") at that key's line; a message
    that names no key of the table is kept whole (it lost its start when cut at ': ')."""
    key, _, message = str(exc).partition(": ")
    if key in table.data and message:
        return table.error(key, message)
    return table.error(None, str(exc))


def _range_domain(table: _Table, low, high, integer: bool) -> Domain:
    """A linear range, refused where float arithmetic on it would overflow or repeat points."""
    if not math.isfinite(high - low):  # [-1e308, 1e308]: every sampled value became inf
        raise table.error("range", f"[{low}, {high}] is too wide: high - low overflows a float")
    step = table.get("step", (int, float), None)
    if step is None:
        return Domain("range", low=low, high=high, integer=integer)
    if not (0 < step < math.inf):
        raise table.error("step", "must be a finite number > 0")
    if integer and not float(step).is_integer():  # 0.5 on an integer knob gave 1, 2, 2, 2, 3
        raise table.error("step", f"an integer knob needs a whole-number step, got {step!r} (whole-number bounds "
                                  "make a knob integer; integer = false for values between them)")
    if not math.isfinite((high - low) / step):  # an infinite count cannot even be counted
        raise table.error("step", f"gives more than {MAX_LEVELS:,} values (is the step too small?)")
    return Domain("range", low=low, high=high, step=step, integer=integer)


def _read_design(table: _Table, knobs: dict[str, Knob]) -> DesignSpec:
    kind = table.get("kind", (str,), "factorial")
    if kind not in DESIGNS:
        raise table.error("kind", f"unknown design {kind!r} (one of: {', '.join(DESIGNS)})")
    design = DesignSpec(kind=kind)
    design.repeat = table.get("repeat", (int,), 1)
    if design.repeat < 1:
        raise table.error("repeat", "must be >= 1")
    design.order = table.get("order", (str,), "sequential")
    if design.order not in ORDERS:
        raise table.error("order", f"expected one of {', '.join(ORDERS)}, got {design.order!r}")
    design.seed = table.get("seed", (int,), 0)
    if design.seed < 0:  # the Latin hypercube's generator takes no negative seed
        raise table.error("seed", f"must be >= 0, got {design.seed}")
    for source in table.get("constraints", (list,), []):
        if not isinstance(source, str):
            raise table.error("constraints", f"expected expressions as strings, got {_describe(source)}")
        try:
            expression = Expression(source)
        except ValueError as exc:
            raise table.error("constraints", str(exc)) from None
        unknown = expression.names - set(knobs)
        if unknown:
            raise table.error("constraints", f"{source!r} uses {', '.join(sorted(unknown))}, which is not a knob")
        design.constraints.append(expression)
    if kind in ("random", "lhs"):
        design.samples = table.get("samples", (int,))
        if design.samples < 1:
            raise table.error("samples", "must be >= 1")
    if kind == "factorial":
        for knob in knobs.values():
            if not knob.domain.finite:
                raise table.error("kind", f"knob {knob.name!r} is a continuous range: give it a step, "
                                          "or use a random or lhs design")
    if kind == "list":
        points = table.get("points", (list,))
        if not points:
            raise table.error("points", "list at least one point")
        for i, point in enumerate(points):
            if not isinstance(point, dict):
                raise table.error("points", f"point {i + 1}: expected a table such as {{bs = 4096}}")
            unknown = set(point) - set(knobs)
            if unknown:
                raise table.error("points", f"point {i + 1}: {', '.join(sorted(unknown))} is not a knob")
            full = {}
            for knob in knobs.values():
                if knob.name in point:
                    problem = value_problem(point[knob.name])
                    if problem:
                        raise table.error("points", f"point {i + 1}: {knob.name}: {problem}")
                    value = _freeze(point[knob.name])
                elif knob.default is not None:
                    value = _freeze(knob.default)
                else:
                    raise table.error("points", f"point {i + 1}: no value for knob {knob.name!r} and it has no default")
                if not knob.domain.contains(value):
                    raise table.error("points", f"point {i + 1}: {knob.name} = {value!r} is outside the knob's domain")
                full[knob.name] = value
            design.points.append(full)
    table.done()
    return design


def _read_sampling(table: _Table) -> SamplingSpec:
    interval = _duration(table, "interval", 1.0)
    if not 0.01 <= interval <= 3600:  # NaN fails this too (it sampled in a busy loop)
        raise table.error("interval", f"must be from 10ms to 1h, got {interval:g} s")
    events = table.get("perf_events", (list,), [])
    if not all(isinstance(e, str) and e and "," not in e for e in events):
        raise table.error("perf_events", "expected a list of perf event names")
    sampling = SamplingSpec(interval, table.get("system", (bool,), True), table.get("process", (bool,), True), events)
    if not (sampling.system or sampling.process or sampling.perf_events):
        raise table.error(None, "samples nothing: enable system, process or perf_events")
    table.done()
    return sampling


def _check_references(spec: Spec, reader: _Reader) -> None:
    """Every {placeholder} must name a knob or a built-in; every target a process."""
    known = set(spec.knobs) | BUILTIN_PLACEHOLDERS
    processes = {p.name for p in spec.workload.processes}
    used: set[str] = set()
    for process in spec.workload.processes:
        keys = ("workload",) if process.name == "workload" else ("workload", "companions", process.name)
        for key, template in process.templates():
            try:
                names = placeholders(template)
            except ValueError as exc:
                raise reader.error(keys + key, f"{exc} (write literal braces as {{{{ and }}}})") from None
            unknown = names - known
            if unknown:
                raise reader.error(keys + key, f"unknown placeholder {{{sorted(unknown)[0]}}} "
                                   f"(knobs: {', '.join(spec.knobs) or 'none'}; built-in: {', '.join(sorted(BUILTIN_PLACEHOLDERS))})")
            used |= names
    for command in spec.workload.setup + spec.workload.teardown:
        try:
            unknown = placeholders(command) - {"experiment", "spec_dir"}
        except ValueError as exc:
            raise reader.error(("workload", "setup"), f"{exc} (write literal braces as {{{{ and }}}})") from None
        if unknown:
            raise reader.error(("workload", "setup"), f"setup/teardown run once, so they may only use {{experiment}} "
                                                      "and {{spec_dir}}, "
                                                      f"not {{{sorted(unknown)[0]}}}")
    for metric in spec.metrics.values():
        if "process" in metric.options and metric.options["process"] not in processes:
            raise reader.error(("metrics", metric.name, "process"), f"no process {metric.options['process']!r} "
                               f"(processes: {', '.join(sorted(processes))})")
        if "file" in metric.options:
            try:
                unknown = placeholders(metric.options["file"]) - known
            except ValueError as exc:
                raise reader.error(("metrics", metric.name, "file"), str(exc)) from None
            if unknown:
                raise reader.error(("metrics", metric.name, "file"), f"unknown placeholder {{{sorted(unknown)[0]}}}")
        if metric.source == "derived":
            names = metric.options["_expression"].names
            unknown = names - set(spec.metrics) - set(spec.knobs)
            if unknown:
                raise reader.error(("metrics", metric.name, "expr"), f"{sorted(unknown)[0]!r} is neither a metric nor a knob")
            if metric.name in names:
                raise reader.error(("metrics", metric.name, "expr"), "a derived metric cannot use itself")
    _check_derived_cycles(spec, reader)
    for knob in spec.knobs.values():
        target = knob.options.get("target")
        if target is not None and target != "*" and target not in processes:
            raise reader.error(("knobs", knob.name, "target"), f"no process {target!r} (processes: {', '.join(sorted(processes))})")
        if knob.actuator == "placeholder" and knob.name not in used and knob.role == "knob":
            spec.warnings.append(f"knob {knob.name!r} is applied nowhere: use {{{knob.name}}} in a command or set apply")


def _check_derived_cycles(spec: Spec, reader: _Reader) -> None:
    derived = {m.name: m.options["_expression"].names & set(spec.metrics) for m in spec.metrics.values() if m.source == "derived"}
    state: dict[str, int] = {}

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == 2 or name not in derived:
            return
        if state.get(name) == 1:
            raise reader.error(("metrics", name, "expr"), "derived metrics form a cycle: " + " -> ".join(chain + [name]))
        state[name] = 1
        for dep in derived[name]:
            visit(dep, chain + [name])
        state[name] = 2

    for name in derived:
        visit(name, [])


def derived_order(spec: Spec) -> list[MetricSpec]:
    """Derived metrics in an order where each comes after the ones it uses."""
    done: list[str] = []
    pending = [m for m in spec.metrics.values() if m.source == "derived"]
    while pending:
        for metric in pending:
            deps = metric.options["_expression"].names & {m.name for m in pending}
            if not deps - set(done):
                done.append(metric.name)
                pending.remove(metric)
                break
    return [spec.metrics[n] for n in done]


def _commands(table: _Table, key: str) -> list[str]:
    value = table.get(key, (str, list), [])
    commands = [value] if isinstance(value, str) else value
    if not all(isinstance(c, str) and c.strip() for c in commands):
        raise table.error(key, "expected a command string or a list of them")
    return commands


def _duration(table: _Table, key: str, default, positive: bool = False):
    value = table.get(key, (int, float, str), None)
    if value is None:
        return default
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise table.error(key, str(exc)) from None
    if positive and not seconds > 0:  # a zero timeout times every run out
        raise table.error(key, f"must be more than 0, got {value!r}")
    return seconds


def parse_values(option: str) -> tuple[str, list]:
    """``NAME=V1,V2,...`` as TOML values: numbers stay numbers, words are strings."""
    name, sep, text = option.partition("=")
    if not sep or not name.strip() or not text.strip():
        raise SpecError(f"--values {option!r}: expected NAME=V1,V2,...")
    parsed = []
    for item in _top_level_items(text):
        item = item.strip()
        try:
            parsed.append(tomllib.loads(f"v = {item}")["v"])
        except tomllib.TOMLDecodeError:
            parsed.append(item.strip('"\''))  # a bare word: a string value
    return name.strip(), parsed


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside quotes and brackets: ``[0,1],"2,3",4`` is three
    values (every comma split: `cpu=[0,1]` was '[0' and '1]', `cpu="0,1"` two points)."""
    items, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return [*items, text[start:]]


def _repeated(values: list) -> Any:
    """The first value listed twice, or None."""
    seen = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a knob value, or None. A value is a string, a number, true or
    false, or a flat CPU list such as [0, 2] or ["0-3", 6]: it fills a command and is stored
    as JSON, which a TOML date, a table or a nested list cannot be."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                return (f"{_describe(item)} inside {_describe(value)}: a list value is a CPU list "
                        "of integers or ranges such as [0, 2] or [\"0-3\"]")
            if isinstance(item, str) and "\0" in item:
                return f"{item!r} contains a NUL byte"
        return None
    if not isinstance(value, (str, int, float)):  # bool is an int
        return f"{_describe(value)} is not a knob value (expected a string, a number, true/false or a CPU list)"
    if isinstance(value, str) and "\0" in value:
        return f"{value!r} contains a NUL byte"
    return None


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _names(types: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list", dict: "a table"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"a list {value!r}"[:60]
    return f"{type(value).__name__} {value!r}"[:60]
