"""The run loop: plan, check the machine, run every point not yet recorded, store
each run in its own transaction, and leave the system as it found it.

Measurements never overlap: runs go one at a time. A SIGKILLed runner loses at
most the run in flight; ``resume=True`` continues where it stopped, and refuses a
changed spec unless ``allow_changed_spec``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from perflearn.errors import PerflearnError, RunnerError, SpecError, StoreError, Terminated, UnsupportedError
from perflearn.experiment import actuators as actuators_mod
from perflearn.experiment import collectors as collectors_mod
from perflearn.experiment.design import PlannedRun, plan, point_key
from perflearn.experiment.launch import fill, placeholders
from perflearn.experiment.spec import Spec
from perflearn.lifetime import signals_held, stop_signals, terminate
from perflearn.store import ExperimentInfo, KnobInfo, MetricInfo, ResultsStore, RunRecord
from perflearn.wire.locate import BIN_ENV, TOOLS, search_path, with_tools_on_path

from . import originals
from .execute import RunExecutor, remove_dead_run_dirs
from .process import reap_orphans
from .host import host_metadata


class Interrupted(PerflearnError):
    exit_code = 130  # 128 + SIGINT; 143 (128 + SIGTERM) when SIGTERM stopped it, as a shell says


STOP_AFTER_FAILURES = 5  # first runs of an invocation failing alike before the sweep stops


class _SameFailures:
    """Watches the first runs of an invocation: when ``limit`` of them, at two points or
    more, fail alike (status, error and stderr's last line) before any run is ok, the
    cause is the set-up, not a point, and the other runs would fail the same way."""

    def __init__(self, limit: int):
        self.limit, self.points, self.alike = limit, set(), 0
        self.watching = limit > 0
        self.signature: tuple | None = None  # of the first failure

    def stop(self, record: RunRecord) -> str | None:
        if not self.watching:
            return None
        tail = (record.stderr_tail or "").strip().splitlines()
        signature = (record.status, record.error, tail[-1] if tail else "")
        if record.status == "ok" or signature != (self.signature or signature):
            self.watching = False  # something works, or failures differ: from here on they are the points'
            return None
        self.signature = signature
        self.alike += 1
        self.points.add(record.point_id)
        if self.alike >= self.limit and len(self.points) >= 2:
            return f"{record.status}: {record.error or 'no error'}" + (f"; stderr: {signature[2]}" if signature[2] else "")
        return None


class Observer:
    """What a front end hears from the runner (the CLI draws progress from it)."""

    def warning(self, message: str) -> None: ...
    def started(self, experiment: ExperimentInfo, total: int, todo: list[PlannedRun]) -> None: ...
    def run_started(self, planned: PlannedRun) -> None: ...
    def run_finished(self, planned: PlannedRun, record: RunRecord) -> None: ...


@dataclass
class Outcome:
    experiment: str
    planned: int
    already: int  # recorded before this invocation
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def ran(self) -> int:
        return sum(self.by_status.values())


def check_machine(spec: Spec) -> tuple[dict[str, actuators_mod.Actuator], list[collectors_mod.Collector], list[str]]:
    """Build actuators and collectors and check this machine can apply and measure
    everything the spec asks for. Raises UnsupportedError/SpecError before the sweep."""
    warnings = list(spec.warnings)
    built: dict[str, actuators_mod.Actuator] = {}
    for knob in spec.knobs.values():
        actuator = actuators_mod.build(knob, spec.name)
        try:
            actuator.check()
        except UnsupportedError as exc:
            raise UnsupportedError(f"knob {knob.name} (apply = {knob.actuator}): {exc.message}",
                                   where=str(spec.path)) from None
        warnings += [w for w in actuator.warnings() if w not in warnings]  # two emulate knobs: said once
        built[knob.name] = actuator
    collectors = collectors_mod.build(list(spec.metrics.values()))
    for collector in collectors:
        try:
            warnings += collector.check()
        except UnsupportedError as exc:
            raise UnsupportedError(exc.message, where=str(spec.path)) from None
        except ValueError as exc:
            raise SpecError(str(exc), where=str(spec.path)) from None
    return built, collectors, warnings


def missing_programs(spec: Spec) -> list[str]:
    """What the spec's processes would fail to start, one line each, found as the launch
    finds them: a name on the process's PATH (its own ``env`` PATH where it sets one), a
    path with a slash from its ``cwd``. {spec_dir} and {experiment} are known now; a
    program, PATH or cwd chosen by a knob is known only per run."""
    known = {"spec_dir": spec.spec_dir, "experiment": spec.name}
    missing = []
    for pspec in spec.workload.processes:
        own_path = pspec.env.get("PATH")
        if pspec.shell or any(placeholders(t) - set(known) for t in (pspec.command[0], own_path or "", pspec.cwd or "")):
            continue
        program = fill(pspec.command[0], known)
        cwd = fill(pspec.cwd, known) if pspec.cwd else None
        who = "workload" if pspec.name == "workload" else f"companion {pspec.name}"
        if "/" in program:
            file = Path(cwd or Path.cwd()) / program
            if not file.exists():
                missing.append(f"{who}: program {program!r} not found (no such file"
                               + (f" from cwd {cwd})" if cwd else ")"))
            elif not (file.is_file() and os.access(file, os.X_OK)):  # every run failed "Permission denied"
                missing.append(f"{who}: program {program!r} is not an executable file")
            continue
        path = search_path(fill(own_path, known) if own_path is not None else os.environ.get("PATH"))
        if cwd:  # the launch looks in a relative entry (or an empty one: ".") from the process's cwd
            path = os.pathsep.join(e if os.path.isabs(e) else os.path.join(cwd, e) for e in path.split(os.pathsep))
        if shutil.which(program, path=path) is None:
            how = (f"run `make -C native/wire build` or set {BIN_ENV}" if program in TOOLS
                   else "is it installed and on " + ("the PATH its env sets?" if own_path is not None else "PATH?"))
            missing.append(f"{who}: program {program!r} not found ({how})")
    return missing


def _check_executables(spec: Spec) -> None:
    missing = missing_programs(spec)
    if missing:
        raise SpecError(missing[0], where=str(spec.path))


def _set_up(spec: Spec) -> None:
    """The spec's set-up commands, then its programs checked (the set-up may build them)."""
    _run_commands(spec.workload.setup, spec, "setup")
    _check_executables(spec)


def _run_commands(commands: list[str], spec: Spec, what: str) -> None:
    for command in commands:
        command = fill(command, {"experiment": shlex.quote(spec.name), "spec_dir": shlex.quote(spec.spec_dir)})
        done = subprocess.run(command, shell=True, capture_output=True, text=True,
                              env=with_tools_on_path(os.environ))  # as the runs'
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or [""])[-1]
            raise RunnerError(f"{what} command {command!r} exited {done.returncode}: {tail}", where=str(spec.path))


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP stop the sweep as cleanly as Ctrl-C (processes stopped, knobs
    restored); a SIGHUP ignored from the start (``nohup``) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    previous = {s: signal.signal(s, terminate) for s in stop_signals()}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _knob_infos(spec: Spec) -> list[KnobInfo]:
    infos = []
    for knob in spec.knobs.values():
        domain = {k: v for k, v in vars(knob.domain).items() if v not in (None, (), False)}
        infos.append(KnobInfo(knob.name, knob.role, "categorical" if knob.categorical else "numeric",
                              knob.actuator, domain, knob.unit))
    return infos


@contextmanager
def _one_sweep_at_a_time(store: ResultsStore) -> Iterator[None]:
    """Hold the store's sweep lock: runs never overlap, and the runner lets go of the store
    file between runs (for readers), so the file's own lock no longer keeps a second runner
    out. An advisory lock on a file of its own (a second descriptor of the store file would
    drop DuckDB's lock when closed); the kernel releases it however the runner ends. The
    file is removed when the sweep ends (one was left in the temporary directory for every
    store ever swept: 203 of them after a day of tests), so a runner that opened it just
    before takes the lock of a removed file: it checks that it holds the one at the path."""
    import fcntl
    import hashlib
    import os
    import tempfile

    path = str(getattr(store, "path", "") or "")
    if not path or path == ":memory:":
        yield
        return
    resolved = str(Path(path).resolve())
    lock = Path(tempfile.gettempdir()) / f"perflearn-sweep-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}.lock"
    while True:
        f = open(lock, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise StoreError(f"another perflearn run ({holder}) is measuring into this store, and runs never overlap: "
                             "wait for it, or give another --store", where=path) from None
        if _same_file(f, lock):
            break
        f.close()  # removed by the sweep that held it as this one opened it: the path's own, again
    try:
        f.truncate(0)
        f.write(f"pid {os.getpid()}")
        f.flush()
        yield
    finally:
        lock.unlink(missing_ok=True)  # while still held: whoever opens the path next makes a new file
        f.close()


def _same_file(f, path: Path) -> bool:
    """Whether the open file ``f`` is the one at ``path`` still."""
    try:
        return os.path.samestat(os.fstat(f.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def _put_back(actuators, held) -> None:
    for actuator in actuators.values():
        actuator.restore()
    originals.release(held)


def run_experiment(spec: Spec, store: ResultsStore, *, resume: bool = False, allow_changed_spec: bool = False,
                   observer: Observer | None = None, keep_run_dirs: bool = False,
                   stop_after_failures: int = STOP_AFTER_FAILURES, resume_command: str | None = None) -> Outcome:
    """Run the spec's planned runs not stored yet, storing each as it ends. Stops (RunnerError,
    runs stored) when the first ``stop_after_failures`` runs, at two points or more, all fail
    alike (0: never). ``resume_command``: what an interrupted run tells the user to type to
    go on (the CLI's own arguments: another --name, --values or --store). One sweep of a
    store at a time (StoreError for a second)."""
    with _one_sweep_at_a_time(store):
        return _run_experiment(spec, store, resume, allow_changed_spec, observer, keep_run_dirs, stop_after_failures,
                               resume_command)


def _run_experiment(spec: Spec, store: ResultsStore, resume: bool, allow_changed_spec: bool,
                    observer: Observer | None, keep_run_dirs: bool, stop_after_failures: int,
                    resume_command: str | None) -> Outcome:
    observer = observer or Observer()
    planned = plan(spec)
    existing = store.experiment(spec.name)
    if existing is not None and not resume:
        raise StoreError(f"experiment {spec.name!r} exists already ({len(store.recorded(existing))} runs); "
                         "continue it with --resume, or name a new one with --name", where=getattr(store, "path", None))
    if existing is not None and existing.spec_hash != spec.hash and not allow_changed_spec:
        raise StoreError(f"the spec of {spec.name!r} changed since it was started ({existing.spec_hash} -> {spec.hash}: "
                         "its file, or the --values given, which a resume repeats); pass --allow-changed-spec to "
                         "continue anyway, or --name to start a new experiment",
                         where=str(spec.path))
    if existing is not None and existing.source != "run":
        raise StoreError(f"experiment {spec.name!r} was imported, not run; choose another --name",
                         where=getattr(store, "path", None))

    points = {r.point_id: r.point for r in planned}
    if existing is not None:  # before anything is changed: a refused resume left the changed spec's metrics behind
        stored = store.points(existing)
        clash = next((pid for pid, values in sorted(points.items()) if stored.get(pid, point_key(values)) != point_key(values)),
                     None)
        if clash is not None:
            raise StoreError(f"point {clash} of {spec.name!r} was stored with other knob values (points are positions in "
                             "the knobs' value lists: a list changed but at its end cannot be continued); give --name "
                             "for a new experiment", where=getattr(store, "path", None))
    actuators, collectors, warnings = check_machine(spec)
    for warning in warnings:
        observer.warning(warning)

    set_up = False
    if existing is None:  # the name is taken only once the set-up works (a typo must not use it up)
        with _sigterm_as_interrupt():
            _set_up(spec)
        set_up = True
    if existing is not None and existing.spec_hash != spec.hash:  # --allow-changed-spec: what it adds is seen too
        before = {m.name for m in existing.metrics} | {k.name for k in existing.knobs}
        existing = store.extend_experiment(existing, _knob_infos(spec),
                                           [MetricInfo(m.name, m.source, m.unit) for m in spec.metrics.values()])
        added = [n for n in [*(k.name for k in existing.knobs), *(m.name for m in existing.metrics)] if n not in before]
        if added:
            observer.warning(f"the changed spec adds {', '.join(added)}: missing (NULL) in the "
                             f"{len(store.recorded(existing))} runs stored before")
    experiment = existing or store.create_experiment(
        spec.name, "run", _knob_infos(spec),
        [MetricInfo(m.name, m.source, m.unit) for m in spec.metrics.values()],
        description=spec.description, spec_text=spec.text, spec_hash=spec.hash,
        spec_path=str(Path(spec.path).resolve()), host=host_metadata(),
    )
    store.add_points(experiment, [(pid, point_key(values), values) for pid, values in sorted(points.items())])
    recorded = store.recorded(experiment)
    todo = [r for r in planned if (r.point_id, r.rep) not in recorded]
    outcome = Outcome(spec.name, len(planned), len(planned) - len(todo))
    observer.started(experiment, len(planned), todo)
    if not todo:  # a killed runner's changes are put back all the same
        _put_back(actuators, originals.take(actuators, observer.warning))
        return outcome

    store_id = str(getattr(store, "path", ""))
    if store_id and store_id != ":memory:":
        store_id = str(Path(store_id).resolve())
        leftovers = reap_orphans(store_id)
        if leftovers:
            observer.warning(f"stopped {leftovers} process group(s) left running by a killed runner of this store")
    executor = RunExecutor(spec, actuators, collectors, keep_run_dirs=keep_run_dirs, store=store_id)
    reaped = remove_dead_run_dirs(executor.run_root)
    if reaped:
        observer.warning(f"removed {reaped} run directory(ies) that killed runners left in {executor.run_root}")
    warmed: set[int] = set()
    alike = _SameFailures(stop_after_failures)
    held: list = []
    try:
        with _sigterm_as_interrupt():
            held = originals.take(actuators, observer.warning)  # a killed runner's changes are put back too
            try:
                if not set_up:
                    _set_up(spec)
                for run in todo:
                    with signals_held():
                        store.release()  # `ls`, `show`, `fit` may read it while the run is measured
                    warm_failed = []
                    if run.point_id not in warmed:
                        warmed.add(run.point_id)
                        warmups = [executor.execute(run, measure=False) for _ in range(spec.workload.warmup)]
                        # a warmup that failed was dropped unsaid: its point measured cold (session 61's audit)
                        warm_failed = [f"warmup run {i + 1} of {len(warmups)} {w.status}: {w.error or 'no reason'}"
                                       for i, w in enumerate(warmups) if w.status != "ok"]
                        for line in warm_failed:
                            observer.warning(f"point {run.point_id}: {line}")
                    observer.run_started(run)
                    record = executor.execute(run)
                    if warm_failed:
                        record.notes = "; ".join([*([record.notes] if record.notes else []), *warm_failed])
                    with signals_held():  # a finished run is stored whole, then the signal stops the sweep
                        store.record_run(experiment, record)
                    outcome.by_status[record.status] = outcome.by_status.get(record.status, 0) + 1
                    observer.run_finished(run, record)
                    cause = alike.stop(record)
                    if cause:
                        raise RunnerError(
                            f"stopped: the first {outcome.ran} runs, at {len(alike.points)} points, failed alike ({cause}); "
                            f"they are stored. Fix the cause and rerun under a new --name, or go on with --resume "
                            f"(the failed runs stay); --stop-after-failures 0 never stops", where=str(spec.path))
            except KeyboardInterrupt as exc:
                terminated = isinstance(exc, Terminated)
                stopped = Interrupted(
                    f"{exc.why if terminated else 'interrupted'} after {outcome.ran} of {len(todo)} "
                    "runs; every finished run is stored and the one in flight was dropped; continue with: "
                    f"{resume_command or f'perflearn run {spec.path} --resume'}")
                if terminated:
                    stopped.exit_code = exc.exit_code
                raise stopped from None
    finally:
        _put_back(actuators, held)
        try:
            _run_commands(spec.workload.teardown, spec, "teardown")
        except RunnerError as exc:
            observer.warning(str(exc))
    return outcome
