"""The run loop: failures are data, timeouts kill the whole group, resume never reruns."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.errors import RunnerError, SpecError, StoreError
from perflearn.experiment.spec import load_spec
from perflearn.runner.runner import Observer, run_experiment
from perflearn.store import open_store


def run(path, store=None, **kwargs):
    store = store or open_store(":memory:")
    return run_experiment(load_spec(path), store, **kwargs), store


def failure(path) -> str:
    """The error of the spec's one run, which must have failed."""
    outcome, store = run(path)
    assert outcome.by_status == {"failed": 1}
    return store.runs("spec")["error"].iloc[0]


def test_failed_run_is_stored_with_exit_code_and_stderr(write_spec):
    path = write_spec("""
        [workload]
        command = "echo out {x}; echo 'broken pipe somewhere' >&2; exit {x}"
        shell = true
        [knobs.x]
        values = [0, 3]
        [metrics.v]
        source = "regex"
        pattern = 'out (\\d+)'
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1, "failed": 1}
    runs = store.runs("spec").set_index("point_id")
    assert runs.loc[2, "status"] == "failed" and runs.loc[2, "exit_code"] == 3
    assert "exited with code 3" in runs.loc[2, "error"] and "broken pipe" in runs.loc[2, "stderr_tail"]
    ds = store.dataset("spec")
    assert ds.frame.set_index("point_id").loc[2, "v"] != ds.frame.set_index("point_id").loc[2, "v"]  # NaN
    reasons = store.measurements("spec")
    assert reasons[reasons["value"].isna()]["missing_reason"].str.contains("run failed").all()


def test_timeout_kills_the_whole_process_group(write_spec, tmp_path, alive):
    pidfile = tmp_path / "child.pid"
    path = write_spec(f"""
        [workload]
        command = "sleep 60 & echo $! > {pidfile}; wait"
        shell = true
        timeout = "0.5s"
        [metrics.t]
        source = "time"
    """)
    started = time.monotonic()
    outcome, store = run(path)
    assert outcome.by_status == {"timeout": 1}
    assert time.monotonic() - started < 10
    assert not alive(int(pidfile.read_text()))  # the grandchild is gone too
    assert "timeout of 0.5 s" in store.runs("spec")["error"][0]


@pytest.mark.parametrize("command, shown", [
    ("no-such-program-xyz --flag", "'no-such-program-xyz'"),
    # a spec copied away from the repository: every run of a 176-run sweep failed the same
    # way before {spec_dir} was filled in for this check (session 18)
    ("{spec_dir}/../no-such-dir/load --rate 5", "'.*/no-such-dir/load'"),
])
def test_missing_program_is_refused_before_the_sweep(write_spec, command, shown):
    path = write_spec(f"""
        [workload]
        command = "{command}"
        [metrics.t]
        source = "time"
    """)
    store = open_store(":memory:")
    with pytest.raises(SpecError, match=f"program {shown} not found"):
        run(path, store)
    assert store.experiment("spec") is None  # the name is not used up: fixed, the spec runs under it
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0 and "not found" in result.output  # setup may build it: a warning


def test_a_failing_setup_takes_no_name_and_a_resumed_one_runs_it_again(write_spec, tmp_path):
    marker = tmp_path / "built"
    path = write_spec(f"""
        [workload]
        command = "true"
        setup = ["test -e {marker} || (touch {marker}; exit 3)"]
        [metrics.t]
        source = "time"
    """)
    store = open_store(":memory:")
    with pytest.raises(RunnerError, match="setup command .* exited 3"):
        run(path, store)
    assert store.experiment("spec") is None and marker.exists()
    outcome, _ = run(path, store)  # the same name, as if never tried
    assert outcome.ran == 1


def test_regex_that_never_matches_is_null_with_reason_and_required_fails(write_spec):
    path = write_spec("""
        [workload]
        command = "echo hello"
        [metrics.loose]
        source = "regex"
        pattern = 'nothing (\\d+)'
        [metrics.strict]
        source = "regex"
        pattern = 'nothing (\\d+)'
        required = true
        [metrics.t]
        source = "time"
    """)
    assert "required metric strict is missing" in failure(path)
    # a failed run keeps no values (its time was stored beside the failure, session 46's review)
    _, store = run(path)
    m = store.measurements("spec").set_index("metric")
    assert m["value"].isna().all(), m
    assert m.loc["t", "missing_reason"] == "run failed" and "did not match" in m.loc["strict", "missing_reason"]


def test_optional_missing_metric_keeps_the_run_ok(write_spec):
    path = write_spec("""
        [workload]
        command = "echo hello"
        [metrics.t]
        source = "time"
        [metrics.loose]
        source = "regex"
        pattern = 'nothing (\\d+)'
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1}
    m = store.measurements("spec").set_index("metric")
    assert m.loc["t", "value"] > 0
    assert m.loc["loose", "value"] != m.loc["loose", "value"] and "did not match" in m.loc["loose", "missing_reason"]


def test_companion_that_dies_fails_the_run(write_spec):
    path = write_spec("""
        [workload]
        command = "true"
        [workload.companions.server]
        command = "sh -c 'echo cannot bind >&2; exit 4'"
        ready_port = "{port}"
        ready_timeout = "3s"
        [metrics.t]
        source = "time"
    """)
    error = failure(path)
    assert "companion server exited with code 4 before it was ready" in error and "cannot bind" in error


def with_sleeping_server(write_spec, pidfile, workload: str):
    """A spec whose companion ``server`` writes its pid to ``pidfile``, then sleeps a minute."""
    return write_spec(f"""
        [workload]
        command = "{workload}"
        [workload.companions.server]
        command = "echo $$ > {pidfile}; echo ready; exec sleep 60"
        shell = true
        ready_pattern = "ready"
        [metrics.t]
        source = "time"
    """)


def test_companion_is_stopped_after_the_workload(write_spec, tmp_path, alive):
    pidfile = tmp_path / "server.pid"
    path = with_sleeping_server(write_spec, pidfile, "true")
    outcome, _ = run(path)
    assert outcome.by_status == {"ok": 1}
    assert not alive(int(pidfile.read_text()))


def test_resume_skips_stored_runs_and_refuses_changed_spec(write_spec, store_path, tmp_path):
    log = tmp_path / "ran.log"
    text = f"""
        [workload]
        command = "echo {{x}} >> {log}"
        shell = true
        [knobs.x]
        values = [1, 2, 3]
        [metrics.t]
        source = "time"
        [design]
        repeat = 2
    """
    path = write_spec(text)
    with open_store(store_path) as store:
        run(path, store)
        with pytest.raises(StoreError, match="exists already"):
            run(path, store)
        outcome, _ = run(path, store, resume=True)
        assert outcome.ran == 0 and outcome.already == 6
    assert len(log.read_text().split()) == 6
    write_spec(text.replace("[1, 2, 3]", "[1, 2, 3, 4]"))
    with open_store(store_path) as store:
        with pytest.raises(StoreError, match="spec of 'spec' changed"):
            run(path, store, resume=True)
        outcome, _ = run(path, store, resume=True, allow_changed_spec=True)
        assert outcome.ran == 2  # only the new point's runs
        assert len(store.recorded(store.experiment("spec"))) == 8


def test_warmup_runs_are_not_stored(write_spec, tmp_path):
    log = tmp_path / "ran.log"
    path = write_spec(f"""
        [workload]
        command = "echo {{x}} >> {log}"
        shell = true
        warmup = 2
        [knobs.x]
        values = [1, 2]
        [metrics.t]
        source = "time"
    """)
    outcome, store = run(path)
    assert outcome.ran == 2 and len(store.runs("spec")) == 2
    assert log.read_text().split() == ["1", "1", "1", "2", "2", "2"]


SIX_SHORT_RUNS = """
    [workload]
    command = "sleep 0.3{x}"
    [knobs.x]
    values = [1, 2, 3, 4, 5, 6]
    [metrics.t]
    source = "time"
"""


def test_sigint_stops_cleanly_and_resume_completes(write_spec, store_path, tmp_path):
    path = write_spec(SIX_SHORT_RUNS)
    cmd = [sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "--name", "named", "-q"]
    # a test run from a background shell inherits SIGINT ignored, and Python then keeps it
    # ignored: give the runner the disposition of a foreground program, where Ctrl-C comes from
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=restore)
    first = proc.stderr.readline()  # "experiment 'spec': 6 runs planned ..." once the sweep starts
    assert "runs planned" in first
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted after" in stderr and "--resume" in stderr and "Traceback" not in stderr
    with open_store(store_path) as store:
        stored = len(store.recorded(store.experiment("named")))
    assert 1 <= stored < 6
    # the command the message gives goes on with this experiment: its --name and --store too
    hint = shlex.split(stderr.split("continue with: ", 1)[1].strip())
    assert hint[:2] == ["perflearn", "run"] and "--resume" in hint
    done = subprocess.run([sys.executable, "-m", *hint, "-q"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with open_store(store_path) as store:
        assert sorted(store.recorded(store.experiment("named"))) == [(p, 0) for p in range(1, 7)]


def test_sweep_stops_when_its_first_runs_fail_alike_at_several_points(write_spec, tmp_path):
    """A broken set-up fails every run the same way: the sweep stops after 5, all stored."""
    path = write_spec("""
        [workload]
        command = "echo 'cannot bind: address in use' >&2; exit 7 # x={x}"
        shell = true
        [knobs.x]
        values = [1, 2, 3, 4, 5, 6, 7, 8]
        [metrics.t]
        source = "time"
    """)
    store = tmp_path / "s.duckdb"
    result = CliRunner().invoke(app, ["run", str(path), "-s", str(store), "-q"])
    assert result.exit_code != 0
    err = result.output.strip().splitlines()[-1]
    assert err.startswith("error:") and result.output.count("error:") == 1, result.output
    assert "the first 5 runs, at 5 points, failed alike" in err and "cannot bind: address in use" in err
    with open_store(store, read_only=True) as s:
        runs = s.runs("spec")
    assert len(runs) == 5 and (runs["status"] == "failed").all()
    result = CliRunner().invoke(app, ["run", str(path), "-s", str(store), "-q", "--resume", "--stop-after-failures", "0"])
    assert result.exit_code == 0, result.output
    with open_store(store, read_only=True) as s:
        assert len(s.runs("spec")) == 8


@pytest.mark.parametrize("command", [
    # one point's repeats failing (a bad setting) is that point's result, not the set-up's
    "if [ {x} = 1 ]; then exit 3; fi; echo ok",
    # failures that differ (here by the point's value) are the points', not one cause
    "echo 'bad value {x}' >&2; exit 3",
])
def test_sweep_goes_on_when_failures_are_the_points(write_spec, command):
    path = write_spec(f"""
        [workload]
        command = "{command}"
        shell = true
        [knobs.x]
        values = [1, 2, 3]
        [metrics.t]
        source = "time"
        [design]
        repeat = 6
    """)
    outcome, store = run(path)
    assert outcome.ran == 18


def test_a_metric_that_is_not_finite_is_missing_not_stored(write_spec):
    """A regex matching 'inf', or a scale overflowing, stored inf as a measurement (fuzzing, session 19)."""
    path = write_spec("""
        [workload]
        command = "echo v=inf w=1e308"
        [metrics.v]
        source = "regex"
        pattern = 'v=(\\S+)'
        [metrics.w]
        source = "regex"
        pattern = 'w=(\\S+)'
        scale = 10
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1}
    m = store.measurements("spec").set_index("metric")
    assert m["value"].isna().all()
    assert m.loc["v", "missing_reason"] == "not a finite number (inf)"


def test_a_companions_cpu_time_over_the_workload(write_spec):
    """proc file = "process": the CPU seconds a companion used while the workload ran,
    over its threads and what it started; an idle one used none; one that exited is missing."""
    companions = {"busy": "echo ready; sh -c 'while :; do :; done'", "idle": "echo ready; exec sleep 60",
                  "gone": "echo ready; sleep 0.2"}
    spec = '[workload]\ncommand = "sleep 0.6"\n'
    for name, command in companions.items():
        spec += (f'[workload.companions.{name}]\ncommand = "{command}"\nshell = true\nready_pattern = "ready"\n'
                 f'[metrics.{name}_cpu]\nsource = "proc"\nfile = "process"\nprocess = "{name}"\nkey = "cpu"\n')
    path = write_spec(spec)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1}
    m = store.measurements("spec").set_index("metric")
    assert 0.1 < m.loc["busy_cpu", "value"] < 1.0  # its child spun for the 0.6 s (one CPU at most)
    assert m.loc["idle_cpu", "value"] < 0.05
    assert m.loc["gone_cpu", "value"] != m.loc["gone_cpu", "value"]
    assert "had exited when the workload ended" in m.loc["gone_cpu", "missing_reason"]


def test_proc_counters_cover_the_measured_phase_only(write_spec):
    """measure_from: a companion's CPU seconds from the workload's start line on, not
    over the warm-up before it."""
    path = write_spec("""
        [workload]
        command = "sleep 0.8; echo measuring; sleep 0.3"
        shell = true
        measure_from = "^measuring$"
        [workload.companions.busy]
        command = "echo ready; while :; do :; done"
        shell = true
        ready_pattern = "ready"
        [metrics.busy_cpu]
        source = "proc"
        file = "process"
        process = "busy"
        key = "cpu"
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1}
    cpu = store.measurements("spec").set_index("metric").loc["busy_cpu", "value"]
    assert 0.02 < cpu < 0.6  # the 0.3 s after the line (one CPU at most), not the 1.1 s of the run


@pytest.mark.parametrize("command, pattern, shown", [
    ("echo warming up", "^measuring", "its stdout had no line matching '^measuring'"),
    ("echo " + "a" * 40 + "b", "(a+)+$", "matching '(a+)+$' on its stdout ran out of time"),
])
def test_a_workload_that_never_starts_its_phase_fails_the_run(write_spec, command, pattern, shown):
    """No line matches measure_from (or matching it backtracks past the timeout): the run
    failed, saying so, not a measurement of the wrong phase, and no hang."""
    path = write_spec(f"""
        [workload]
        command = "{command}"
        measure_from = '{pattern}'
        timeout = "2s"
        [metrics.t]
        source = "time"
    """)
    error = failure(path)
    assert "the measured phase never began (measure_from)" in error and shown in error


@pytest.mark.parametrize("metric, shown", [
    ('file = "process"\nprocess = "workload"\nkey = "cpu"', "its own CPU time is source = \"rusage\""),
    ('file = "process"\nprocess = "server"\nkey = "ctxt"', "a process has cpu, cpu.user"),
    ('file = "stat"\nprocess = "server"\nkey = "ctxt"', "only with it"),
    ('file = "process"\nprocess = "nobody"\nkey = "cpu"', "no process 'nobody'"),
])
def test_process_counters_are_refused_where_they_cannot_work(write_spec, metric, shown):
    body = "\n        ".join(metric.splitlines())
    path = write_spec(f"""
        [workload]
        command = "true"
        [workload.companions.server]
        command = "sleep 5"
        [metrics.c]
        source = "proc"
        {body}
    """)
    with pytest.raises(SpecError, match=re.escape(shown)):
        load_spec(path)


def test_a_companion_ends_with_a_runner_killed_outright(write_spec, tmp_path, alive, reap):
    """SIGKILL runs none of the runner's cleanup; its companion gets its stop signal anyway."""
    pidfile, workload = tmp_path / "server.pid", []
    path = with_sleeping_server(write_spec, pidfile, "sleep 30")
    runner = subprocess.Popen([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(tmp_path / "s.duckdb"),
                               "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    reap(runner)
    deadline = time.monotonic() + 60
    while len(workload) < 2 and time.monotonic() < deadline:  # the companion's sleep, and the workload's
        assert runner.poll() is None, runner.stderr.read()
        time.sleep(0.1)
        workload = subprocess.run(["pgrep", "-P", str(runner.pid), "-x", "sleep"], capture_output=True,
                                  text=True).stdout.split()
    reap(*workload)  # the workload ends by itself: not left to run on after the test
    server = int(pidfile.read_text())
    runner.kill()
    runner.wait()
    assert not alive(server)


def test_the_store_can_be_read_while_a_sweep_runs(write_spec, store_path):
    """A running sweep held the store's file for its whole length: `ls`, `show` and `fit`
    were refused ("in use by another perflearn process") until it ended."""
    path = write_spec("""
        [workload]
        command = "sleep 2.{x}"
        [knobs.x]
        values = [1, 2, 3, 4]
        [metrics.t]
        source = "time"
    """)
    sweep = subprocess.Popen([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q"],
                             stderr=subprocess.PIPE, text=True)
    try:
        assert "runs planned" in sweep.stderr.readline()
        time.sleep(3.0)  # the first run is stored, the second under way
        listed = subprocess.run([sys.executable, "-m", "perflearn", "ls", "--store", str(store_path)],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "spec" in listed.stdout, listed.stderr
        shown = subprocess.run([sys.executable, "-m", "perflearn", "show", "spec", "--store", str(store_path), "--runs"],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0 and " ok " in shown.stdout, shown.stderr
        # but a second runner is kept out (the released file no longer did: both measured at once)
        second = subprocess.run([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path),
                                 "--resume", "-q"], capture_output=True, text=True, timeout=60)
        assert second.returncode != 0 and f"another perflearn run (pid {sweep.pid})" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
        assert sweep.poll() is None  # read during the sweep, not after it
    finally:
        _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 0, err
    with open_store(store_path, read_only=True) as store:
        assert len(store.recorded(store.experiment("spec"))) == 4


def test_a_metric_a_changed_spec_adds_is_seen_and_missing_in_the_runs_before(write_spec):
    """--resume --allow-changed-spec stored the new metric's values where no dataset looked."""
    base = """
        [experiment]
        name = "grow"
        [workload]
        command = "echo v {a}"
        [knobs.a]
        values = [1, 2]
        [metrics.v]
        source = "regex"
        pattern = 'v (\\d+)'
    """
    store = open_store(":memory:")
    run(write_spec(base), store)
    grown = write_spec(base.replace("values = [1, 2]", "values = [1, 2, 3]")
                       + '\n        [metrics.w]\n        source = "regex"\n        pattern = \'v (\\d+)\'\n')
    outcome, _ = run(grown, store, resume=True, allow_changed_spec=True)
    assert outcome.ran == 1
    frame = store.dataset("grow").frame.sort_values("a")
    assert frame["w"].isna().tolist() == [True, True, False] and frame["w"].iloc[2] == 3
    assert frame["v"].tolist() == [1, 2, 3]
    # a value put first moves every point: refused, and before the store is touched (the
    # changed spec's metric was added to the experiment all the same, session 46's review)
    moved = write_spec(base.replace("values = [1, 2]", "values = [0, 1, 2, 3]")
                       + '\n        [metrics.u]\n        source = "regex"\n        pattern = \'v (\\d+)\'\n')
    with pytest.raises(StoreError, match="point 1 of 'grow' was stored with other knob values"):
        run(moved, store, resume=True, allow_changed_spec=True)
    assert "u" not in store.dataset("grow").metrics


def test_a_missing_working_directory_is_named_not_blamed_on_the_program(write_spec, tmp_path):
    """cwd that does not exist read "cannot start 'pwd': No such file or directory"."""
    path = write_spec(f"""
        [workload]
        command = "pwd"
        cwd = "{tmp_path}/gone/{{x}}"
        [knobs.x]
        values = [1]
        [metrics.t]
        source = "time"
    """)
    assert failure(path) == f"cannot start the workload: its cwd '{tmp_path}/gone/1' is not a directory"
    _, store = run(path)
    assert store.runs("spec")["wall_s"].isna().all()  # it never ran: no wall time (it read 0 s)


def test_show_runs_says_why_in_the_workloads_words(write_spec, store_path):
    from typer.testing import CliRunner

    from perflearn.cli.app import app

    path = write_spec("""
        [workload]
        command = ["sh", "-c", "echo ping: unknown host nowhere >&2; exit 2"]
        [metrics.t]
        source = "time"
    """)
    run(path, open_store(store_path))
    shown = CliRunner().invoke(app, ["show", "spec", "--runs", "--store", str(store_path)], terminal_width=200)
    assert "workload exited with code 2: ping: unknown host nowhere" in shown.output, shown.output


@pytest.mark.parametrize("name, why", [("../../tmp/evil", "cannot name an experiment"), ("  ", "must not be empty"),
                                       ("a\tb", "cannot name an experiment")])
def test_an_experiment_name_that_cannot_name_files_is_refused(write_spec, store_path, name, why):
    """`--name ../../tmp/evil` was stored, and `export` wrote /tmp/evil.csv."""
    from typer.testing import CliRunner

    from perflearn.cli.app import app

    path = write_spec("""
        [workload]
        command = "true"
        [metrics.t]
        source = "time"
    """)
    for argv in (["run", str(path)], ["import", str(path), "-m", "t"]):
        result = CliRunner().invoke(app, [*argv, "--name", name, "--store", str(store_path)])
        assert result.exit_code == 2 and why in result.output and "Traceback" not in result.output, result.output
    assert not store_path.exists() or "evil" not in CliRunner().invoke(app, ["ls", "--store", str(store_path)]).output


def test_kept_run_directories_are_named_in_the_runs_notes(write_spec, tmp_path, monkeypatch):
    """--keep-run-dirs kept them and never said where."""
    monkeypatch.setenv("PERFLEARN_RUN_DIR", str(tmp_path))
    path = write_spec("""
        [workload]
        command = ["echo", "kept"]
        [metrics.t]
        source = "time"
    """)
    _, store = run(path, keep_run_dirs=True)
    note = store.runs("spec")["notes"].iloc[0]
    from pathlib import Path

    kept = Path(note.removeprefix("run directory "))
    assert note.startswith("run directory ") and kept.parent == tmp_path and (kept / "workload.stdout").read_text() == "kept\n"


@pytest.mark.parametrize("signame, status, why", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_sigterm_stops_cleanly_and_exits_143(write_spec, store_path, signame, status, why):
    """A batch scheduler's SIGTERM stops the sweep as Ctrl-C does, and the exit status says which (128 + 15);
    so does SIGHUP, an ssh session that dropped (it killed the runner outright, knobs unrestored)."""
    path = write_spec(SIX_SHORT_RUNS)
    proc = subprocess.Popen([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q"],
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # even under nohup
    assert "runs planned" in proc.stderr.readline()
    time.sleep(0.8)
    proc.send_signal(getattr(signal, signame))
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == status, stderr
    assert f"{why} after" in stderr and "--resume" in stderr and "Traceback" not in stderr
    with open_store(store_path) as store:
        assert 1 <= len(store.recorded(store.experiment("spec"))) < 6


@pytest.mark.skipif(not __import__("perflearn.wire.locate", fromlist=["x"])._BUILD_DIR.joinpath("perflearn-load").exists(),
                    reason="needs native/wire built")
def test_a_spec_anywhere_names_perflearn_load(write_spec, monkeypatch):
    """The examples reached the load generator by {spec_dir}/../../native/...: a spec copied
    elsewhere failed to start. Its processes and set-up find perflearn-load by name; where
    it is not found, that is the one line before the sweep."""
    path = write_spec("""
        [workload]
        command = "perflearn-load --version"
        setup = "perflearn-load --version > /dev/null"
        [knobs.x]
        values = [1]
        [metrics.v]
        source = "regex"
        pattern = 'perflearn-load (\\d+)\\.'
    """)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no build directory on it
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 1} and store.dataset("spec").frame["v"].iloc[0] == 0
    own = write_spec(path.read_text().replace('[knobs.x]', 'env = { PATH = "/usr/bin:/bin" }\n[knobs.x]'), "own.toml")
    outcome, store = run(own)  # a PATH of the spec's own finds it too (it was refused, "not found")
    assert outcome.by_status == {"ok": 1}, store.runs("spec")["error"].tolist()
    monkeypatch.setenv("PERFLEARN_WIRE_BIN", str(path.parent / "nowhere"))
    with pytest.raises(RunnerError, match="setup command 'perflearn-load --version > /dev/null' exited 127"):
        run(path)
    bare = write_spec(path.read_text().replace('setup = "perflearn-load --version > /dev/null"\n', ""), "bare.toml")
    with pytest.raises(SpecError, match=r"program 'perflearn-load' not found \(run `make -C native/wire build`"):
        run(bare)


def test_a_program_is_looked_for_as_its_launch_finds_it(write_spec, tmp_path):
    """The check before the sweep looked for ./serve.sh from perflearn's directory, not the
    process's cwd, and for a name on perflearn's PATH, not the one the process's env sets:
    both specs were refused though their runs would start."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "serve.sh").write_text("#!/bin/sh\necho served 7\n")
    (tools / "serve.sh").chmod(0o755)
    metric = """
        [knobs.x]
        values = [1]
        [metrics.v]
        source = "regex"
        pattern = 'served (\\d+)'
    """
    from_cwd = write_spec(f"""
        [workload]
        command = "./serve.sh"
        cwd = "{tools}"
    """ + metric, "cwd.toml")
    on_own_path = write_spec(f"""
        [workload]
        command = "serve.sh"
        env = {{ PATH = "{tools}:/usr/bin:/bin" }}
    """ + metric, "path.toml")
    relative = write_spec(f"""
        [workload]
        command = "serve.sh"
        cwd = "{tmp_path}"
        env = {{ PATH = "tools:/usr/bin:/bin" }}
    """ + metric, "relative.toml")  # a relative PATH entry is looked in from the process's cwd, as exec looks
    for path in (from_cwd, on_own_path, relative):
        outcome, store = run(path)
        assert outcome.by_status == {"ok": 1}, path.name
    elsewhere = write_spec(f"""
        [workload]
        command = "./serve.sh"
        cwd = "{tmp_path}"
    """ + metric, "elsewhere.toml")
    with pytest.raises(SpecError, match=f"program './serve.sh' not found \\(no such file from cwd {tmp_path}\\)"):
        run(elsewhere)


def test_a_list_value_fills_a_command_as_its_cpus(write_spec):
    """["0-1", 3] filled {cpus} by sorting its items as written: the run crashed (exit 70,
    "'<' not supported between instances of 'str' and 'int'"). It fills as 0,1,3."""
    path = write_spec(f"""
        [workload]
        command = '''{sys.executable} -c "print('n=' + '{{cpus}}'.replace(',', ''))"'''
        [knobs.cpus]
        categorical = [["0-1", 3], [2]]
        [metrics.n]
        source = "regex"
        pattern = 'n=(\\d+)'
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 2}, store.runs("spec")["error"].tolist()
    assert sorted(store.dataset("spec").frame["n"]) == [2, 13]


def test_a_program_that_is_no_executable_is_refused_before_the_sweep(write_spec, tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\necho 1\n")  # not chmod +x: every run failed "Permission denied"
    path = write_spec(f"""
        [workload]
        command = "{script}"
        [knobs.x]
        values = [1]
        [metrics.v]
        source = "time"
    """)
    with pytest.raises(SpecError, match="is not an executable file"):
        run(path)


def test_a_failed_warmup_is_said_and_noted_on_the_run(write_spec, tmp_path):
    """A warmup run that failed was dropped unsaid: its point was measured cold."""
    marker = tmp_path / "warm"
    path = write_spec(f"""
        [workload]
        command = "if [ -e {marker} ]; then echo v=1; else touch {marker}; exit 4; fi"
        shell = true
        warmup = 1
        [knobs.x]
        values = [1]
        [metrics.v]
        source = "regex"
        pattern = 'v=(\\d+)'
    """)
    warnings = []

    class Collect(Observer):
        def warning(self, message):
            warnings.append(message)

    outcome, store = run(path, observer=Collect())
    assert outcome.by_status == {"ok": 1}
    warm = [w for w in warnings if "warmup" in w]
    assert warm == ["point 1: warmup run 1 of 1 failed: workload exited with code 4"], warnings
    assert "warmup run 1 of 1 failed" in store.runs("spec")["notes"].iloc[0]


def test_true_and_false_fill_commands_as_written(write_spec):
    """TOML's true reached commands and the environment as Python's True."""
    path = write_spec("""
        [workload]
        command = 'test {on} = true -o {on} = false && test "$ON" = {on} && echo v=1'
        shell = true
        [knobs.on]
        categorical = [true, false]
        apply = "env"
        [metrics.v]
        source = "regex"
        pattern = 'v=(\\d+)'
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"ok": 2}, store.runs("spec")["error"].tolist()  # "True" failed the test


def test_a_sweep_removes_its_lock_file_and_a_second_is_still_kept_out(tmp_path):
    """The sweep lock's file was left in the temporary directory for every store ever swept."""
    import os
    import tempfile
    from pathlib import Path

    from perflearn.runner import runner

    class Store:
        path = str(tmp_path / "s.duckdb")

    before = set(Path(tempfile.gettempdir()).glob("perflearn-sweep-*.lock"))
    with runner._one_sweep_at_a_time(Store()):
        held = set(Path(tempfile.gettempdir()).glob("perflearn-sweep-*.lock")) - before
        assert len(held) == 1 and next(iter(held)).read_text() == f"pid {os.getpid()}"
        with pytest.raises(StoreError, match="runs never overlap"):
            with runner._one_sweep_at_a_time(Store()):
                pass
    assert not next(iter(held)).exists()
    with runner._one_sweep_at_a_time(Store()):  # free again, and removed again
        assert next(iter(held)).exists()
    assert not next(iter(held)).exists()


def test_a_lock_file_removed_as_it_was_opened_is_not_taken(tmp_path):
    """The file of a lock released (and removed) between a second sweep's open and its flock:
    locking it kept nobody out, so the second sweep locks the path's file instead."""
    from perflearn.runner import runner

    path = tmp_path / "lock"
    path.write_text("")
    with open(path) as f:
        assert runner._same_file(f, path)
        path.unlink()
        assert not runner._same_file(f, path)
        path.write_text("")
        assert not runner._same_file(f, path)
