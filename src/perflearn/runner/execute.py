"""One run, as a pipeline of named stages: apply knobs, start companions, run the
workload, collect metrics, clean up. Whatever happens, it returns a RunRecord
(status ok / failed / timeout / skipped) — a failure is data, not an exception.
Only KeyboardInterrupt goes through (after every process of the run is stopped).
"""

from __future__ import annotations

import fcntl
import math
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from perflearn.errors import UnsupportedError
from perflearn.experiment.actuators import Actuator, cpu_list, parse_cpus
from perflearn.experiment.collectors import Collector, Missing
from perflearn.experiment.collectors.derived import Derived
from perflearn.experiment.design import PlannedRun
from perflearn.experiment.launch import ProcessLaunch, ProcessResult, RunContext, RunResult, as_written, fill
from perflearn.experiment.sampling import Sampler
from perflearn.experiment.spec import ProcessSpec, Spec, derived_order
from perflearn.lifetime import alive
from perflearn.store import RunRecord
from perflearn.wire.locate import search_path, with_tools_on_path

from . import process as proc_mod


def default_run_root() -> Path | None:
    """Where run directories go: PERFLEARN_RUN_DIR, else /dev/shm (a disk's metadata
    operations cost milliseconds per run), else the system's temporary directory."""
    chosen = os.environ.get("PERFLEARN_RUN_DIR")
    if chosen:
        return Path(chosen)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def remove_dead_run_dirs(root: Path | None) -> int:
    """Remove the run directories that SIGKILLed runners left in ``root`` (a runner removes its
    own as each run ends; kept ones, ``perflearn-k...``, stay). A directory goes only when its
    runner's pid is gone, it is this user's, and no one holds its lock (a runner in another
    PID namespace sharing /dev/shm holds the lock of its run's directory). Returns how many."""
    removed = 0
    for path in Path(root or tempfile.gettempdir()).glob("perflearn-r*-*"):
        pid = path.name[len("perflearn-r"):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or alive(int(pid)):
            continue  # not one of ours, or its runner is still alive
        try:
            if os.lstat(path).st_uid != os.geteuid():
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(path, ignore_errors=True)
        except BlockingIOError:
            continue
        finally:
            os.close(fd)
        removed += not path.exists()
    return removed


def _locked_dir(path: Path) -> int:
    """A descriptor holding ``path``'s lock while the run uses it (the kernel lets go when the runner dies)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


class RunExecutor:
    """Runs planned runs of one spec with its built actuators and collectors."""

    def __init__(self, spec: Spec, actuators: dict[str, Actuator], collectors: list[Collector],
                 keep_run_dirs: bool = False, run_root: Path | None = None, store: str = ""):
        self.spec = spec
        self.actuators = actuators
        self.collectors = collectors
        self.keep_run_dirs = keep_run_dirs
        self.run_root = run_root or default_run_root()
        self.uses_port = any("{port}" in t for p in spec.workload.processes for _, t in p.templates()) or any(
            "{port}" in str(m.options.get("file", "")) for m in spec.metrics.values())
        self.base_env = {**with_tools_on_path(os.environ),  # perflearn-load by name, wherever built
                         proc_mod.RUNNER_VAR: str(os.getpid()), proc_mod.STORE_VAR: store}

    # -- the pipeline ---------------------------------------------------------
    def execute(self, planned: PlannedRun, measure: bool = True) -> RunRecord:
        # the runner's pid in the name: a SIGKILLed runner's directory is found and removed by the next
        # (/dev/shm is memory until reboot); "k" for a directory kept on purpose (--keep-run-dirs)
        kind = "k" if self.keep_run_dirs else "r"
        run_dir = Path(tempfile.mkdtemp(prefix=f"perflearn-{kind}{os.getpid()}-{planned.point_id}.{planned.rep}-",
                                        dir=self.run_root))
        lock = _locked_dir(run_dir)
        record = RunRecord(point_id=planned.point_id, rep=planned.rep, seq=planned.seq, status="ok",
                           started=datetime.now())
        running: list[proc_mod.Running] = []
        try:
            run = self._context(planned, run_dir)
            failure = self._apply_knobs(planned, run)
            if failure:
                record.status, record.error = failure
                return self._no_values(record)
            failure = self._start_companions(run, running)
            if failure:
                record.status, record.error = "failed", failure
                return self._no_values(record)
            sampler = Sampler(self.spec.sampling) if self.spec.sampling and measure else None
            result = self._run_workload(run, running, sampler)
            if sampler is not None:
                record.samples = sampler.stop()  # kept whatever the run's outcome
            self._stop_companions(running, result)
            record.exit_code, record.signal, record.wall_s = result.exit_code, result.signal, result.wall_s
            if self.keep_run_dirs:  # where its outputs are (--keep-run-dirs never said)
                run.notes.append(f"run directory {run_dir}")
            record.notes = "; ".join(run.notes) or None
            record.status, record.error = result.status, result.error
            if result.status != "ok":
                record.stderr_tail = proc_mod.tail(result.workload.stderr)
                return self._no_values(record)
            if measure:
                self._collect(run, result, record)
                if record.status != "ok":  # a required metric missing: a failed run keeps no values either
                    return self._no_values(record)
            return record
        finally:
            for proc in reversed(running):
                proc_mod.stop(proc, proc.launch.stop_signal, 2.0)
            if not self.keep_run_dirs:
                shutil.rmtree(run_dir, ignore_errors=True)
            os.close(lock)

    def _context(self, planned: PlannedRun, run_dir: Path) -> RunContext:
        values: dict[str, Any] = {}
        for name, value in planned.values:
            values[name] = _filled_list(value) if isinstance(value, (list, tuple)) else value
        values.update(point_id=planned.point_id, rep=planned.rep, run_dir=str(run_dir), experiment=self.spec.name,
                      spec_dir=self.spec.spec_dir)
        if self.uses_port:
            values["port"] = proc_mod.free_port()
        run = RunContext(self.spec.name, planned.seq, planned.point_id, planned.rep, values, run_dir,
                         timeout=self.spec.workload.timeout)
        for pspec in self.spec.workload.processes:
            run.processes[pspec.name] = self._launch(pspec, values)
        return run

    def _launch(self, pspec: ProcessSpec, values: dict[str, Any]) -> ProcessLaunch:
        if pspec.shell:
            quoted = {k: shlex.quote(str(as_written(v))) for k, v in values.items()}
            argv = ["/bin/sh", "-c", fill(pspec.command, quoted)]
        else:
            argv = [fill(arg, values) for arg in pspec.command]
        env = dict(self.base_env)
        env.update({k: fill(v, values) for k, v in pspec.env.items()})
        if "PATH" in pspec.env:  # the spec's own PATH finds perflearn-load by name too, as docs/spec.md says
            env["PATH"] = search_path(env["PATH"])
        cwd = fill(pspec.cwd, values) if pspec.cwd else None
        return ProcessLaunch(pspec.name, argv, env, cwd or os.getcwd(),
                             stop_signal=pspec.stop_signal, stop_grace=pspec.stop_grace)

    def _apply_knobs(self, planned: PlannedRun, run: RunContext) -> tuple[str, str] | None:
        for name, value in planned.values:
            try:
                self.actuators[name].apply(value, run)
            except UnsupportedError as exc:
                return "skipped", f"knob {name}={value!r}: {exc}"
            except Exception as exc:  # a user hook or the system refused: this run fails, the sweep goes on
                return "failed", f"knob {name}={value!r}: {exc}"
        return None

    def _start_companions(self, run: RunContext, running: list) -> str | None:
        for pspec in self.spec.workload.companions:
            try:
                proc = proc_mod.spawn(run.processes[pspec.name], run.run_dir, with_runner=True)
            except OSError as exc:
                return f"companion {pspec.name} cannot start: {_not_started(run.processes[pspec.name], exc)}"
            running.append(proc)
            port = fill(pspec.ready_port, run.values) if pspec.ready_port else None
            if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):  # "{x}x" filled
                return f"companion {pspec.name}: ready_port {pspec.ready_port!r} gave {port!r}, not a TCP port (1-65535)"
            problem = proc_mod.wait_ready(proc, None if port is None else int(port), pspec.ready_pattern, pspec.ready_delay, pspec.ready_timeout)
            if problem:
                stderr = proc_mod.tail(proc.output("stderr"), lines=3, chars=300).replace("\n", " | ")
                return f"companion {pspec.name} {problem}" + (f": {stderr}" if stderr else "")
        return None

    def _run_workload(self, run: RunContext, running: list, sampler: Sampler | None) -> RunResult:
        for collector in self.collectors:
            collector.before(run)
        launch = run.processes["workload"]
        if sampler is not None:
            launch.argv = sampler.wrap(launch.argv, run.run_dir)
        timeout = self.spec.workload.timeout
        try:
            proc = proc_mod.spawn(launch, run.run_dir)
        except OSError as exc:
            results = {"workload": ProcessResult("workload", None, None, "", "")}
            return RunResult("failed", None, None, None, None, results,  # it never ran: no wall time, not 0 s
                             error=f"cannot start the workload: {_not_started(launch, exc)}")
        running.append(proc)
        if sampler is not None:
            sampler.start(proc.pid)  # its own process group: pgid == pid
        unmarked = None
        if self.spec.workload.measure_from:
            def mark() -> None:
                for collector in self.collectors:
                    collector.mark(run)
            finished, unmarked = proc_mod.wait_marking(proc, timeout, self.spec.workload.measure_from, mark)
        else:
            finished = proc_mod.wait(proc, timeout)
        wall = time.perf_counter() - proc.started
        for collector in self.collectors:
            collector.after(run)
        status, error = "ok", None
        exit_code, sig = proc.exit_code, proc.signal
        # under perf stat (sampled, or a perf metric's): the command's own status, not perf's 0
        statuses = [sampler.workload_exit()] if sampler is not None else []
        statuses += [collector.workload_exit(run) for collector in self.collectors]
        own = next((s for s in statuses if s is not None), None) if finished else None
        if own is not None:
            exit_code, sig = own
        # under perf stat (sampled, or a perf metric's): the command's own time, not perf's start-up with it;
        # the innermost wrapper's is the shortest
        timed = [w for w in ([sampler.workload_wall()] if sampler is not None else [])
                 + [c.workload_wall(run) for c in self.collectors] if w is not None]
        if finished and timed:
            wall = min(timed)
        if not finished:
            proc_mod.stop(proc, grace=2.0)
            status, error = "timeout", f"no exit within the timeout of {timeout:g} s; process group killed"
        elif exit_code != 0:
            status, error = "failed", f"workload exited with {proc_mod.describe_status(exit_code, sig)}"
        elif unmarked:  # what was measured is not the phase the spec asked for
            status, error = "failed", f"the measured phase never began (measure_from): {unmarked}"
        proc_mod.stop(proc)  # reaps it, and kills what it left behind in its group
        results = {p.launch.name: p.result() for p in running}
        results["workload"] = replace(proc.result(), exit_code=exit_code, signal=sig)  # under perf: its child's
        return RunResult(status, wall, exit_code, sig, proc.rusage, results, error)

    def _stop_companions(self, running: list, result: RunResult) -> None:
        for proc in running:
            if proc.launch.name == "workload":
                continue
            proc_mod.stop(proc, proc.launch.stop_signal, proc.launch.stop_grace)
            result.processes[proc.launch.name] = proc.result()

    def _collect(self, run: RunContext, result: RunResult, record: RunRecord) -> None:
        known: dict[str, float | Missing] = {k: v for k, v in run.values.items() if k in self.spec.knobs}
        for collector in self.collectors:
            try:
                known.update(collector.values(run, result))
                record.samples += collector.samples(run)
            except Exception as exc:  # a collector bug must not lose the run
                for metric in collector.metrics:
                    known[metric.name] = Missing(f"collector {collector.source} failed: {type(exc).__name__}: {exc}")
        for metric in derived_order(self.spec):
            known[metric.name] = Derived.evaluate(metric, known)
        for name, metric in self.spec.metrics.items():
            value = known.get(name, Missing("not collected"))
            if not isinstance(value, Missing) and not math.isfinite(float(value)):
                value = Missing(f"not a finite number ({float(value)})")  # "inf" printed, a scale overflowing
            if isinstance(value, Missing):
                record.values[name] = None
                record.missing[name] = value.reason
                if metric.required and record.status == "ok":
                    record.status, record.error = "failed", f"required metric {name} is missing: {value.reason}"
            else:
                record.values[name] = float(value)

    def _no_values(self, record: RunRecord) -> RunRecord:
        """A run that did not complete has no measurements: every metric NULL, with why (a
        metric missing already keeps its own reason)."""
        for name in self.spec.metrics:
            record.values[name] = None
            record.missing.setdefault(name, f"run {record.status}")
        return record


def _not_started(launch, exc: OSError) -> str:
    """Why a process did not start: a missing working directory is no missing program."""
    if launch.cwd and not Path(launch.cwd).is_dir():
        return f"its cwd {str(launch.cwd)!r} is not a directory"
    return f"{exc.strerror or exc} ({launch.argv[0]!r})"


def _filled_list(value: list | tuple) -> str:
    """A list value as a command's {knob}: a CPU set as the kernel's list ("0-1" and 3 of
    ["0-1", 3] as 0,1,3; sorting the items as written crashed the run), else its items
    joined by commas."""
    try:
        return cpu_list(parse_cpus(value))
    except ValueError:
        return ",".join(map(str, value))
