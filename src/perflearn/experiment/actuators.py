"""Actuators apply a knob's value: to a command, an environment, a process's CPUs,
a cgroup, the CPU frequency, a sysctl, a NIC's interrupt coalescing, or through a user hook.

Each actuator declares its options (checked when the spec is read), checks the
machine before the sweep (``check``: raises UnsupportedError when the machine lacks
the feature), applies a value for one run (``apply``) and puts the system back
after the experiment (``restore``).
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perflearn.errors import UnsupportedError
from perflearn.wire.locate import with_tools_on_path

from . import cgroups
from .knobs import Knob, is_number
from .launch import RunContext, as_written, env_name_problem, fill

if TYPE_CHECKING:
    from .cpufreq import CpuFreq


MAX_CPU_ID = 65535


def parse_cpus(value: Any) -> set[int]:
    """CPU set from 3, [0, 2], ["0-3", 6] or "0-3,6"; never empty. Raises ValueError."""
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple)) for v in value):
            raise ValueError(f"not a CPU list: {list(value)!r} (a list of lists)")
        cpus = set().union(*(_parse_cpu_item(v) for v in value))
    else:
        cpus = _parse_cpu_item(value)
    if not cpus:  # an empty set pinned nothing: the run went unpinned, silently
        raise ValueError(f"empty CPU list: {list(value) if isinstance(value, tuple) else value!r}")
    return cpus


def _parse_cpu_item(value: Any) -> set[int]:
    """CPUs of 3 or "0-3,6" (possibly none)."""
    if isinstance(value, bool):
        raise ValueError(f"not a CPU list: {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= MAX_CPU_ID:
            raise ValueError(f"CPU {value} is not a CPU id (0 to {MAX_CPU_ID})")
        return {value}
    if not isinstance(value, str):
        raise ValueError(f"not a CPU list: {value!r} (expected e.g. 3, [0, 2] or \"0-3,6\")")
    cpus: set[int] = set()
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"not a CPU list: {value!r} (expected e.g. 3, [0, 2] or \"0-3,6\")")
        if int(high or low) > MAX_CPU_ID:  # "0-100000000000" would be listed, for minutes
            raise ValueError(f"CPU {int(high or low)} in {value!r} is beyond any machine (at most {MAX_CPU_ID})")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def cpu_list(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


class Actuator:
    kind: ClassVar[str]
    # option -> (accepted types, required)
    OPTIONS: ClassVar[dict[str, tuple[tuple[type, ...], bool]]] = {}

    def __init__(self, knob: Knob, experiment: str):
        self.knob = knob
        self.experiment = experiment
        self.options = knob.options

    @property
    def target(self) -> str:
        return self.options.get("target", "workload")

    def sets(self) -> tuple[str, str] | None:
        """What this knob writes and on which process ("*": every one; "machine"), or None
        for nothing another knob could write too. Two knobs writing one setting left the
        later one's value, and the data said the earlier had no effect (session 61's audit)."""
        return None

    def validate_value(self, value: Any) -> None:
        """Raise ValueError when ``value`` cannot be applied (known before the sweep)."""

    def check(self) -> None:
        """Raise UnsupportedError when this machine cannot apply the knob."""

    def warnings(self) -> list[str]:
        """What the user should know before the sweep (one line each); the sweep goes on."""
        return []

    def apply(self, value: Any, run: RunContext) -> None:
        raise NotImplementedError

    def restore(self) -> None:
        """Put the system back as it was before the experiment."""

    def _process(self, run: RunContext):
        return run.processes[self.target]


class Placeholder(Actuator):
    """The value only fills ``{name}`` in commands (done for every knob)."""

    kind = "placeholder"

    def apply(self, value: Any, run: RunContext) -> None:
        pass


class Env(Actuator):
    kind = "env"
    OPTIONS = {"var": ((str,), False), "target": ((str,), False)}

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        problem = env_name_problem(self.options.get("var", knob.name.upper()))
        if problem:
            raise ValueError(f"var: {problem}")

    def sets(self) -> tuple[str, str]:
        return f"environment variable {self.options.get('var', self.knob.name.upper())}", self.target

    def apply(self, value: Any, run: RunContext) -> None:
        var = self.options.get("var", self.knob.name.upper())
        targets = run.processes.values() if self.target == "*" else [self._process(run)]
        for process in targets:
            process.env[var] = str(as_written(value))


class Affinity(Actuator):
    """CPU affinity of one process (sched_setaffinity before exec; children inherit it)."""

    kind = "affinity"
    OPTIONS = {"target": ((str,), False)}

    def validate_value(self, value: Any) -> None:
        cpus = parse_cpus(value)
        allowed = os.sched_getaffinity(0)
        if not cpus <= allowed:
            raise ValueError(f"CPUs {cpu_list(cpus - allowed)} are not available here (allowed: {cpu_list(allowed)})")

    def sets(self) -> tuple[str, str]:
        return "CPU affinity", self.target

    def apply(self, value: Any, run: RunContext) -> None:
        self._process(run).cpus = parse_cpus(value)


class _CgroupActuator(Actuator):
    controller: ClassVar[str]

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        self._group: cgroups.Group | None = None

    def _create(self) -> cgroups.Group:
        # one group per process, whatever the controller: in cgroup v2 a process is in exactly one
        return cgroups.create(f"{_safe(self.experiment)}-{_safe(self.target)}", {self.controller})

    def check(self) -> None:
        # Prove the group can be made, and take it away again: `validate` checks and never
        # restores, and left an empty group behind. The first apply makes it for the sweep.
        self._create().remove()

    def sets(self) -> tuple[str, str]:
        return f"cgroup {self.controller}", self.target

    def apply(self, value: Any, run: RunContext) -> None:
        if self._group is None:
            self._group = self._create()
        self._set(self._group, value)
        process = self._process(run)
        for procs in self._group.procs_files:
            if procs not in process.cgroup_procs:
                process.cgroup_procs.append(procs)

    def restore(self) -> None:
        if self._group is not None:
            self._group.remove()
            self._group = None


class CgroupCpuset(_CgroupActuator):
    """The CPUs a process (and all it starts) may run on, as a cgroup cpuset. With
    ``count = true`` the value is a number of CPUs: the first N the runner may use."""

    kind = "cgroup-cpuset"
    controller = "cpuset"
    OPTIONS = {"target": ((str,), False), "count": ((bool,), False)}

    def _cpus(self, value: Any) -> set[int]:
        if self.options.get("count"):
            allowed = sorted(os.sched_getaffinity(0))
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= len(allowed):
                raise ValueError(f"with count = true a value is a number of CPUs from 1 to {len(allowed)}, got {value!r}")
            return set(allowed[:value])
        return parse_cpus(value)

    def validate_value(self, value: Any) -> None:
        cpus = self._cpus(value)
        allowed = os.sched_getaffinity(0)
        if not cpus <= allowed:
            raise ValueError(f"CPUs {cpu_list(cpus - allowed)} are not available here (allowed: {cpu_list(allowed)})")

    def _set(self, group: cgroups.Group, value: Any) -> None:
        group.set_cpus(cpu_list(self._cpus(value)))


class CgroupQuota(_CgroupActuator):
    """CPU bandwidth in CPUs' worth of time (0.5 = half a core; 0 = unlimited), CFS quota."""

    kind = "cgroup-quota"
    controller = "cpu"
    OPTIONS = {"target": ((str,), False), "period_us": ((int,), False)}

    def validate_value(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"a CPU quota is a number of CPUs >= 0 (0 = unlimited), got {value!r}")
        if value and value * self.options.get("period_us", 100_000) < 1000:
            raise ValueError(f"quota {value} CPUs is below the kernel's 1 ms minimum per period")

    def _set(self, group: cgroups.Group, value: Any) -> None:
        group.set_quota(float(value), int(self.options.get("period_us", 100_000)))

    def warnings(self) -> list[str]:
        # a quota above the CPUs the runs may use caps nothing: 5 on 2 CPUs measures 2 again
        domain, cpus = self.knob.domain, len(os.sched_getaffinity(0))
        if domain.kind == "values":
            over = ", ".join(f"{v:g}" for v in sorted({float(v) for v in domain.values if is_number(v) and v > cpus}))
        else:
            over = f"up to {domain.high:g}" if domain.high is not None and domain.high > cpus else ""
        if not over:
            return []
        return [f"knob {self.knob.name!r}: a quota above the {cpus} CPUs the runs may use here ({over}) caps "
                "nothing, as unlimited (0) does"]


def _network_namespace() -> str:
    """The network namespace a net.* sysctl or a NIC belongs to: ip netns exec runs another
    one's, with a value and an original of its own."""
    try:
        return f" in network namespace {os.stat('/proc/self/ns/net').st_ino}"
    except OSError:
        return ""


class MachineSetting(Actuator):
    """A knob that changes a setting of the machine, which outlives the runner: read before
    the first change (``capture``), written per run (``_set``), put back at the end."""

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        self._original: str | None = None

    def setting(self) -> str:
        """What is changed, e.g. ``sysctl vm.swappiness``."""
        raise NotImplementedError

    def sets(self) -> tuple[str, str]:
        return self.setting(), "machine"

    def key(self) -> str:
        """What is changed, wherever it is (names the originals' file)."""
        return self.setting()

    def current(self) -> str:
        raise NotImplementedError

    def _set(self, value: str) -> None:
        """Write ``value``; UnsupportedError when the machine refuses it."""
        raise NotImplementedError

    def capture(self) -> str:
        """Read the setting now: ``restore`` will put it back to this."""
        self._original = self.current()
        return self._original

    def adopt(self, original: str) -> None:
        """``restore`` will put the setting back to ``original`` (read by a runner that was killed)."""
        self._original = original

    @property
    def captured(self) -> bool:
        """Whether ``restore`` has an original to put back."""
        return self._original is not None

    def apply(self, value: Any, run: RunContext) -> None:
        if self._original is None:
            self.capture()
        self._set(str(value))

    def restore(self) -> None:
        if self._original is not None:
            try:
                self._set(self._original)
            except UnsupportedError:
                pass
            self._original = None


class Sysctl(MachineSetting):
    kind = "sysctl"
    OPTIONS = {"key": ((str,), True)}

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        key = self.options["key"]
        # a key names a file under /proc/sys, never one elsewhere ("../../tmp/x" wrote to /tmp)
        if not key or any(part in ("", "..") for part in key.replace("/", ".").split(".")):
            raise ValueError(f"key: not a sysctl name such as net.core.somaxconn, got {key!r}")
        self.path = Path("/proc/sys") / key.replace(".", "/")

    def check(self) -> None:
        if not self.path.exists():
            raise UnsupportedError(f"sysctl {self.options['key']} does not exist on this kernel ({self.path})")
        if not os.access(self.path, os.W_OK):
            raise UnsupportedError(f"sysctl {self.options['key']} is not writable here (run as root?)")

    def setting(self) -> str:
        return f"sysctl {self.options['key']}"

    def key(self) -> str:
        return self.setting() + (_network_namespace() if self.options["key"].startswith("net.") else "")

    def current(self) -> str:
        return self.path.read_text().strip()

    def _set(self, value: str) -> None:
        try:
            self.path.write_text(value)
        except OSError as exc:
            raise UnsupportedError(f"sysctl {self.options['key']}={value}: {exc.strerror}") from None


# ethtool -c prints "rx-usecs: 8"; -C takes the same names.
COALESCE_PARAMS = (
    "adaptive-rx", "adaptive-tx", "rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq",
    "tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq", "sample-interval",
)


class EthtoolCoalesce(MachineSetting):
    """NIC interrupt coalescing (ethtool -C IFACE PARAM VALUE), where the NIC supports it."""

    kind = "ethtool-coalesce"
    OPTIONS = {"iface": ((str,), True), "param": ((str,), True)}

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        if self.options["param"] not in COALESCE_PARAMS:
            raise ValueError(f"param: unknown coalescing parameter {self.options['param']!r} "
                             f"(one of {', '.join(COALESCE_PARAMS)})")

    def current(self) -> str:
        iface, param = self.options["iface"], self.options["param"]
        try:
            shown = subprocess.run(["ethtool", "-c", iface], capture_output=True, text=True, timeout=10)
        except FileNotFoundError:
            raise UnsupportedError("ethtool is not installed") from None
        if shown.returncode != 0:
            reason = (shown.stderr.strip().splitlines() or ["unknown error"])[-1]
            raise UnsupportedError(f"interrupt coalescing on {iface} is not supported here ({reason})")
        for line in shown.stdout.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == param:
                value = value.strip()
                if value in ("n/a", ""):
                    break
                return value
        raise UnsupportedError(f"{iface} does not support coalescing parameter {param}")

    def check(self) -> None:
        self.current()

    def setting(self) -> str:
        return f"ethtool-coalesce {self.options['iface']} {self.options['param']}"

    def key(self) -> str:
        return self.setting() + _network_namespace()

    def _set(self, value: str) -> None:
        iface, param = self.options["iface"], self.options["param"]
        done = subprocess.run(["ethtool", "-C", iface, param, value], capture_output=True, text=True, timeout=10)
        # ethtool exits 80 ("unmodified") when the value is already set: not an error.
        if done.returncode not in (0, 80):
            raise UnsupportedError(f"ethtool -C {iface} {param} {value}: {done.stderr.strip()}")


class Hook(Actuator):
    """A user's shell command (with ``{value}`` and every placeholder) or Python entry point."""

    kind = "hook"
    OPTIONS = {"command": ((str,), False), "entry_point": ((str,), False), "restore": ((str,), False)}

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        has_command, has_entry = "command" in self.options, "entry_point" in self.options
        if has_command == has_entry:
            raise ValueError("a hook takes exactly one of command or entry_point")
        if has_entry and not _is_entry_point(self.options["entry_point"]):
            raise ValueError(f"entry_point: expected module.path:function, got {self.options['entry_point']!r}")
        self._function = None
        self._applied = False

    def check(self) -> None:
        entry = self.options.get("entry_point")
        if entry:
            module, _, name = entry.partition(":")
            try:
                self._function = getattr(importlib.import_module(module), name)
            except Exception as exc:  # the user's module may raise anything while it imports
                raise UnsupportedError(f"entry point {entry!r} cannot be loaded "
                                       f"({type(exc).__name__}: {exc})") from None
            if not callable(self._function):
                raise UnsupportedError(f"entry point {entry!r} is not a function")

    def apply(self, value: Any, run: RunContext) -> None:
        self._applied = True
        if "command" in self.options:
            command = fill(self.options["command"], {**run.values, "value": shlex.quote(str(as_written(value)))})
            done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=300,
                                  env=with_tools_on_path(os.environ))  # as the runs'
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or [""])[-1]
                raise RuntimeError(f"hook of knob {self.knob.name!r} exited {done.returncode}: {tail}")
        else:
            if self._function is None:
                self.check()
            self._function(value, dict(run.values))

    def restore(self) -> None:
        if self._applied and "restore" in self.options:
            subprocess.run(self.options["restore"], shell=True, capture_output=True, timeout=300)


class Emulate(Actuator):
    """Interconnect emulation below an unmodified program (native/emu): the knob is one of
    LogGP's ``latency`` (L, a delay like a wire's), ``overhead`` (o, sender CPU time per
    message) or ``bandwidth`` (1/G, pacing). Several emulate knobs on one process combine.
    Values: durations ("2us", or seconds) and rates ("10Gbit", or bit/s)."""

    kind = "emulate"
    OPTIONS = {"param": ((str,), True), "target": ((str,), False), "peers": ((str, list), False),
               "ports": ((int, list), False), "threshold": ((int, str), False), "layer": ((str,), False)}
    PARAMS = ("latency", "overhead", "bandwidth")

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        if self.options["param"] not in self.PARAMS:
            raise ValueError(f"param: expected one of {', '.join(self.PARAMS)}, got {self.options['param']!r}")
        self.filters = {k: self.options[k] for k in ("peers", "ports", "threshold", "layer") if k in self.options}

    def _environment(self, settings: dict[str, Any]) -> dict[str, str]:
        from perflearn.emulate import environment

        return environment(**settings, **self.filters)

    def validate_value(self, value: Any) -> None:
        from perflearn.errors import PerflearnError

        try:
            self._environment({self.options["param"]: value})
        except PerflearnError as exc:
            if isinstance(exc, UnsupportedError):
                return  # the library is not built yet: check() says so before the sweep
            raise ValueError(exc.message) from None

    def check(self) -> None:
        self._environment({})  # raises UnsupportedError when the library is not built

    def sets(self) -> tuple[str, str]:
        return f"emulated {self.options['param']}", self.target

    def warnings(self) -> list[str]:
        return [f"{name} (inherited from the environment) is not passed to the runs: a sweep's emulation is its "
                f"knobs' alone" for name in _inherited_emulation(os.environ)]

    def apply(self, value: Any, run: RunContext) -> None:
        process = self._process(run)
        process.emulation[self.options["param"]] = value
        for name in _inherited_emulation(process.env):  # one would apply to every run, unrecorded
            del process.env[name]
        preload = process.env.get("LD_PRELOAD", "")
        variables = self._environment(process.emulation)
        if preload and variables.get("LD_PRELOAD") and variables["LD_PRELOAD"] not in preload.split(":"):
            variables["LD_PRELOAD"] = f"{variables['LD_PRELOAD']}:{preload}"  # keep the user's own preloads
        process.env.update(variables)


def _inherited_emulation(environ) -> list[str]:
    """The emulator's settings in ``environ`` (not the library's location, which is perflearn's own)."""
    from perflearn.emulate import ENV_LIB, ENV_MPI_LIB

    return [k for k in environ if k.startswith("PERFLEARN_EMU_") and k not in (ENV_LIB, ENV_MPI_LIB)]


class CpuFrequency(MachineSetting):
    """CPU frequency in MHz through cpufreq's userspace governor (``cpus``: which CPUs,
    default all this process may use). The setting is the machine's: the governors are
    put back afterwards, by the next runner when this one was killed (``originals``; a
    killed runner left its CPUs in userspace at its last frequency)."""

    kind = "cpufreq"
    OPTIONS = {"cpus": ((str, int, list), False)}

    def __init__(self, knob: Knob, experiment: str):
        super().__init__(knob, experiment)
        cpus = self.options.get("cpus")
        try:
            self.cpus = sorted(parse_cpus(cpus) if cpus is not None else os.sched_getaffinity(0))
        except ValueError as exc:
            raise ValueError(f"cpus: {exc}") from None
        self._freq = None

    def sets(self) -> tuple[str, str]:  # its setting() is the machine's governor: knobs of other CPUs may be two
        return f"CPU frequency of CPUs {cpu_list(set(self.cpus))}", "machine"

    def validate_value(self, value: Any) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"a frequency in MHz must be a positive number, got {value!r}")

    def check(self) -> None:
        from .cpufreq import CpuFreq

        self._freq = CpuFreq(self.cpus)

    @property
    def cpufreq(self) -> CpuFreq:
        """The CPUs' cpufreq (``check`` first)."""
        if self._freq is None:
            self.check()
        return self._freq

    def setting(self) -> str:
        # the machine's, not these CPUs': a sweep over CPU 0 and a manager over CPUs 0-1 find each other's
        return "cpufreq governor (every CPU)"

    def current(self) -> str:
        """Every CPU's governor, as "0:schedutil,1:schedutil"."""
        from .cpufreq import all_governors

        return ",".join(f"{cpu}:{governor}" for cpu, governor in all_governors().items())

    def apply(self, value: Any, run: RunContext) -> None:
        if self._original is None:
            self.capture()
        self.cpufreq.set_khz(int(float(value) * 1000), self.cpus)

    def _set(self, value: str) -> None:
        """Put the governors ``current`` read back (a frequency is set by ``apply``)."""
        from .cpufreq import put_back_governors

        governors = dict(part.split(":", 1) for part in value.split(",") if ":" in part)
        put_back_governors({int(cpu): governor for cpu, governor in governors.items() if cpu.isdigit() and governor})
        if self._freq is not None:
            self._freq.forget()  # what it saved itself is no older than the original


def _is_entry_point(entry: str) -> bool:
    """``package.module:function``: absolute (a relative ".mod" has no package to be relative to)."""
    module, sep, name = entry.partition(":")
    return bool(sep) and name.isidentifier() and all(part.isidentifier() for part in module.split("."))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


ACTUATORS: dict[str, type[Actuator]] = {
    cls.kind: cls
    for cls in (Placeholder, Env, Affinity, CgroupCpuset, CgroupQuota, CpuFrequency, Sysctl, EthtoolCoalesce, Hook,
                Emulate)
}


def build(knob: Knob, experiment: str) -> Actuator:
    return ACTUATORS[knob.actuator](knob, experiment)
