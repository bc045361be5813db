"""A live service that stops answering, or exits, under the manager: never read as one
that meets its target."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.manage.journal import COLUMNS
from perflearn.manage.live import unanswered_floor


def brute_floor(answered: int, unanswered: int, arrivals, start: float, end: float, q: float) -> float:
    """The definition: each request's latency at least its lower bound (an answered one's
    is unknown, so 0; an unanswered one's, its wait so far, the latest arrivals taken as
    the unanswered), and the q quantile of the latencies (the ceil(q n)-th smallest) at
    least that of the bounds."""
    waits = [end - tick_end for tick_end, count in sorted(arrivals, reverse=True) for _ in range(count)]
    waits = (waits + [end - start] * unanswered)[:unanswered]
    bounds = sorted([0.0] * answered + waits)
    return bounds[math.ceil(q * len(bounds)) - 1]


def test_a_service_that_answers_none_waits_as_long_as_its_requests():
    ticks = [(0.1 * (k + 1), 100) for k in range(10)]  # 100 requests in each tenth of the interval
    assert unanswered_floor(0, 1000, ticks, 0.0, 1.0, 0.95) == pytest.approx(0.9)
    # more waiting than arrived in the interval: the rest arrived before it began
    assert unanswered_floor(0, 500, [(1.0, 100)], 0.0, 1.0, 0.95) == pytest.approx(1.0)


def test_an_interval_that_answered_nothing_has_no_latency_unless_its_waits_bound_it():
    """A p95 of 0 counted as met: an interval with no answer and only a fresh request waiting
    (the previous policy's last one, at the mark) has no latency; long waits still bound it."""
    from perflearn.manage.live import interval_latency

    tick = {"type": "tick", "start": 0.0, "end": 1.0, "requests": 1}
    p95, p99, note = interval_latency({"start": 0.0, "end": 1.0, "requests": 0, "outstanding": 1}, [tick])
    assert math.isnan(p95) and math.isnan(p99) and "no request answered" in note
    p95, _, note = interval_latency({"start": 0.0, "end": 1.0, "requests": 0, "outstanding": 0}, [])
    assert math.isnan(p95) and "no request in the interval" in note
    early = [{"start": 0.0, "end": 0.1, "requests": 500}, {"start": 0.1, "end": 1.0, "requests": 0}]
    p95, _, note = interval_latency({"start": 0.0, "end": 1.0, "requests": 0, "outstanding": 500}, early)
    assert p95 == pytest.approx(0.9) and "500 requests unanswered" in note
    p95, _, note = interval_latency({"start": 0.0, "end": 1.0, "requests": 100, "outstanding": 0, "p95_us": 250}, [])
    assert p95 == pytest.approx(250e-6) and note is None


def test_a_few_requests_in_flight_move_no_quantile():
    ticks = [(0.02 * (k + 1), 760) for k in range(50)]  # 38 000 req/s, answered in about 100 µs
    assert unanswered_floor(38_000, 4, ticks, 0.0, 1.0, 0.95) == 0.0
    assert unanswered_floor(38_000, 4, ticks, 0.0, 1.0, 0.99) == 0.0
    # the latest 100 of 1 000 unanswered may be answered at once: no bound; 200 bound p95 at one tick
    tenths = [(0.1 * (k + 1), 100) for k in range(10)]
    assert unanswered_floor(900, 100, tenths, 0.0, 1.0, 0.95) == 0.0
    assert unanswered_floor(800, 200, tenths, 0.0, 1.0, 0.95) == pytest.approx(0.1)


def test_the_floor_is_the_quantile_of_the_lower_bounds():
    rng = np.random.default_rng(7)
    for _ in range(300):
        ticks = [(float(e), int(c)) for e, c in zip(np.sort(rng.uniform(0, 1, rng.integers(0, 8))),
                                                    rng.integers(0, 50, 8))]
        answered, unanswered = int(rng.integers(0, 200)), int(rng.integers(0, 200))
        if answered + unanswered == 0:
            continue
        for q in (0.5, 0.95, 0.99):
            got = unanswered_floor(answered, unanswered, ticks, 0.0, 1.0, q)
            assert got == pytest.approx(brute_floor(answered, unanswered, ticks, 0.0, 1.0, q)), (ticks, answered,
                                                                                                 unanswered, q)


SERVICE = "memcached -u root -l 127.0.0.1 -p {port} -t 1 -U 0"
needs_memcached = pytest.mark.skipif(shutil.which("memcached") is None, reason="needs memcached")


def run_manage(tmp_path, action, *policies: str, after: float, on: str = "memcached", step_seconds: float = 2,
               interval: float = 1.0):
    """``perflearn manage`` with ``policies`` on a real memcached (2-s steps of 1-s intervals
    unless told, 8 000 req/s at most) while ``action(pid)`` is done to the process ``on`` (memcached or perflearn-load,
    a child of this one) ``after`` seconds after it started; the command's result and its CSV."""
    from perflearn.experiment import cgroups

    if cgroups.version() is None:
        pytest.skip("needs cgroups")
    done = threading.Event()

    def act():
        while not done.is_set():  # the service, once it runs
            found = subprocess.run(["pgrep", "-P", str(os.getpid()), "-x", on], capture_output=True, text=True).stdout.split()
            if found:
                time.sleep(after)
                action(int(found[0]))
                return
            time.sleep(0.1)

    helper = threading.Thread(target=act, daemon=True)
    helper.start()
    csv = tmp_path / "live.csv"
    try:
        result = CliRunner().invoke(app, ["manage", "--service", SERVICE, "--cores", "1", "--levels", "2",
                                          "--max-rps", "8000", "--target-ms", "2", "--step-seconds", str(step_seconds),
                                          "--interval", str(interval), "--csv", str(csv), *policies])
    finally:
        done.set()
        helper.join(timeout=30)
    return result, csv


@pytest.mark.slow
@needs_memcached
def test_a_service_that_stops_answering_misses(tmp_path):
    def pause(pid):  # SIGSTOP: the kernel still takes its requests, it answers none for 3 s
        os.kill(pid, signal.SIGSTOP)
        time.sleep(3)
        os.kill(pid, signal.SIGCONT)

    result, csv = run_manage(tmp_path, pause, "-p", "static", after=4, step_seconds=1)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    said = frame[frame["note"].fillna("").str.contains("unanswered at the interval's end")]
    shown = frame[["t", "rps", "p95", "note"]].to_string()
    assert (said["p95"] > said["target"]).all(), shown  # each a miss
    assert (said["p95"] > 0.5).sum() >= 2, shown  # the whole seconds it was stopped: by most of a second


@pytest.mark.slow
@needs_memcached
def test_a_service_that_exits_ends_the_run_and_keeps_what_was_measured(tmp_path):
    from perflearn.store import open_store

    store = tmp_path / "s.duckdb"
    result, csv = run_manage(tmp_path, lambda pid: os.kill(pid, signal.SIGKILL), "--interleave", "--handover", "0",
                             "-p", "static", "-p", "ondemand", "--store", str(store), "--name", "died", after=4,
                             step_seconds=1)
    assert result.exit_code == 1, result.output
    assert "the service ended with signal SIGKILL during the run" in result.output and "Traceback" not in result.output
    frame = pd.read_csv(csv)  # the turns taken before it, both policies'
    assert set(frame["policy"]) == {"static", "ondemand"} and 2 <= len(frame) < 2 * 11  # cut short: 11 intervals a pass
    with open_store(store, read_only=True) as db:  # the last interval the service ran is said to be partial: one
        notes = db.runs("died")["notes"].fillna("")  # pass's, whose turn it was
    assert notes.map(lambda n: "the pass ended after this interval" in (n.splitlines() or [""])[-1]).sum() == 1, notes


@pytest.mark.slow
@needs_memcached
def test_a_load_generator_that_fails_ends_the_run(tmp_path):
    from perflearn.store import open_store

    store = tmp_path / "s.duckdb"
    result, _ = run_manage(tmp_path, lambda pid: os.kill(pid, signal.SIGKILL), "-p", "static", "--store", str(store),
                           "--name", "gone", after=4, on="perflearn-load", step_seconds=1)
    assert result.exit_code == 1, result.output
    assert "perflearn-load ended with signal SIGKILL during the run" in result.output and "Traceback" not in result.output
    with open_store(store, read_only=True) as db:  # stored as failed, its last interval said to be partial
        run = db.runs("gone").iloc[0]  # (its 426 req/s of 6 400 read as an interval met, unsaid)
    assert run["status"] == "failed" and "perflearn-load ended" in run["error"]
    last = run["notes"].splitlines()[-1]
    assert "the pass ended after this interval (the service or the load generator ended)" in last, run["notes"]


def test_a_service_that_exits_at_start_says_what_it_wrote(tmp_path):
    from perflearn.experiment import cgroups

    if cgroups.version() is None:
        pytest.skip("needs cgroups")
    earlier = tmp_path / "earlier.csv"  # an earlier run's intervals: it was left a header only (session 58's audit)
    earlier.write_text("t,rps\n1,2000\n")
    result = CliRunner().invoke(app, ["manage", "--service", "sh -c 'echo no such option {port} >&2; exit 3'",
                                      "--cores", "1", "--levels", "2", "--max-rps", "1000", "--target-ms", "2",
                                      "--step-seconds", "1", "-p", "static", "--csv", str(earlier)])
    assert result.exit_code == 2, result.output
    assert "the service ended with code 3 before accepting on port" in result.output
    assert "no such option" in result.output and "Traceback" not in result.output
    assert earlier.read_text() == "t,rps\n1,2000\n"  # no interval: nothing replaced


@pytest.mark.slow
@needs_memcached
def test_a_manager_killed_outright_keeps_its_intervals_and_leaves_nothing_running(tmp_path, alive, reap):
    """SIGKILL: no cleanup of the manager's runs, yet --csv has every interval ended, and its
    service, load generator and capture end with it, so the next manager removes its cgroup."""
    import sys

    from perflearn.experiment import cgroups

    if cgroups.version() is None:
        pytest.skip("needs cgroups")
    csv = tmp_path / "live.csv"
    manager = subprocess.Popen([sys.executable, "-m", "perflearn", "manage", "--service", SERVICE, "--cores", "1",
                                "--levels", "2", "--max-rps", "8000", "--target-ms", "2", "--step-seconds", "1",
                                "--interval", "0.5", "--interleave", "-p", "static", "-p", "ondemand", "--csv", str(csv)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(tmp_path)})  # its work directory outlives it
    reap(manager)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and manager.poll() is None:  # a few turns in
        if csv.exists() and len(csv.read_text().splitlines()) > 1 + 6:
            break
        time.sleep(0.2)
    assert manager.poll() is None, manager.stderr.read()
    children = subprocess.run(["pgrep", "-P", str(manager.pid)], capture_output=True, text=True).stdout.split()
    reap(*children)  # a failed test leaves nothing either
    names = {open(f"/proc/{c}/comm").read().strip() for c in children}
    assert {"memcached", "perflearn-load", "perflearn-sniff"} <= names, names
    manager.kill()
    manager.wait()
    assert not [c for c in children if alive(int(c))], "children of the killed manager still run"
    frame = pd.read_csv(csv)
    assert len(frame) >= 6 and set(frame["policy"]) == {"static", "ondemand"}, frame
    assert list(frame.columns) == COLUMNS and (frame["rps"] > 0).any()
    stale = [name for name in cgroups.remove_stale("manage") if f"-{manager.pid}-" in name]
    assert stale == [f"manage-{manager.pid}-service"], stale
    # and its work directory and the sniffer's mark directory, which the next manager removes
    from perflearn.manage.live import remove_stale_work_directories

    left = sorted(d.name for d in tmp_path.glob(f"perflearn-manage-{manager.pid}-*"))
    assert len(left) == 2 and sum("-mark-" in name for name in left) == 1, left
    assert remove_stale_work_directories(tmp_path) == left, left
    assert not list(tmp_path.glob("perflearn-manage-*"))
    # the intervals kept only in --csv go to the store afterwards: two passes cut short
    recorded = subprocess.run([sys.executable, "-m", "perflearn", "manage", "--from-csv", str(csv), "--store",
                               str(tmp_path / "s.duckdb"), "--step-seconds", "1", "--interval", "0.5"],
                              capture_output=True, text=True)
    assert recorded.returncode == 0, recorded.stderr
    from perflearn.store import open_store

    with open_store(tmp_path / "s.duckdb", read_only=True) as results:
        runs, samples = results.dataset("manage-live").frame, results.samples("manage-live")
    assert sorted(runs["policy"]) == ["ondemand", "static"] and (runs["status"] == "failed").all()
    assert sorted(samples.loc[samples["metric"] == "service_interval", "value"]) == \
        sorted(frame["service_interval"].astype(float))


@pytest.mark.slow
@needs_memcached
def test_a_capture_that_dies_ends_the_run_at_once_and_the_pass_is_stored(tmp_path):
    """A killed perflearn-sniff left the loop running blind at maximum for the rest of the
    pass, saying nothing, then failing with "exited with status -9"; the pass in flight
    was missing from --store."""
    from perflearn.store import open_store

    store = tmp_path / "m.duckdb"
    started = time.monotonic()
    result, csv = run_manage(tmp_path, lambda pid: os.kill(pid, signal.SIGKILL), "-p", "static", "--store", str(store),
                             after=3, on="perflearn-sniff", step_seconds=1)
    assert result.exit_code == 1, result.output
    assert "perflearn-sniff ended with signal SIGKILL during the run" in result.output
    assert "Traceback" not in result.output and time.monotonic() - started < 20  # the pass is 11 s of load
    frame = pd.read_csv(csv)
    assert len(frame) < 11 and frame["note"].fillna("").str.contains("stalled").sum() <= 1  # the interval it died in
    with open_store(store, read_only=True) as s:
        runs = s.runs(s.experiments()["name"].iloc[0])
    assert list(runs["status"]) == ["failed"]  # kept, as cut short


@pytest.mark.slow
@needs_memcached
def test_a_service_that_forks_ends_with_the_manager(tmp_path):
    """Only the service's direct child was stopped: a memcached started by a shell ran on in
    the manager's cgroup, which could not be removed."""
    from perflearn.experiment import cgroups

    if cgroups.version() is None:
        pytest.skip("needs cgroups")
    marker = "-c 1017"  # this test's memcached, told apart from any other
    command = f"sh -c 'memcached -u root -l 127.0.0.1 -p {{port}} -t 1 {marker}; echo done'"
    result = CliRunner().invoke(app, ["manage", "--service", command, "--cores", "1", "--levels", "2",
                                      "--max-rps", "2000", "--target-ms", "2", "--step-seconds", "0.5",
                                      "--interval", "0.5", "-p", "static"])  # its length no matter: 5.5 s
    assert result.exit_code == 0, result.output
    left = subprocess.run(["pgrep", "-f", f"memcached -u root .* {marker}"], capture_output=True, text=True).stdout
    assert left.strip() == "", f"still running: {left}"


@pytest.mark.slow
@needs_memcached
def test_a_capture_stopped_for_a_while_leaves_every_later_interval_at_its_own_load(tmp_path):
    """The loop read intervals by count: a 6-s SIGSTOP of perflearn-sniff gave stalls at
    1.5 intervals each, so the rest of the pass was labelled one interval off (each step's
    first interval read the step before). Intervals are now placed on the load's clock.
    At half that time scale here: 3 s stopped, 0.5-s intervals of 1-s steps."""

    def pause(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(3.0, os.kill, (pid, signal.SIGCONT)).start()

    result, csv = run_manage(tmp_path, pause, "-p", "static", after=3.5, on="perflearn-sniff", step_seconds=1,
                             interval=0.5)
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    assert list(frame["service_interval"]) == list(range(22))  # every interval of the trace, once
    stalled = frame["note"].fillna("").str.contains("stalled")
    assert 4 <= stalled.sum() <= 8, frame[["service_interval", "offered_rps", "rps", "note"]]
    # a stalled interval's rate and latency are unknown (its rate read 0 req/s, and it was charged full load);
    # the service's usage was measured all the same, and it is no configuration's latency to learn from
    assert frame["rps"][stalled].isna().all() and frame["p95"][stalled].isna().all()
    assert (frame["utilisation"][stalled] < 1.0).all() and not frame["settled"][stalled].any()
    assert f"static: the latency stream stalled (no rate or latency known: a miss where load was offered) in " \
           f"{stalled.sum()} of 22 intervals" in " ".join(result.output.split())
    # the backlog the capture read when it ran again went to the intervals its frames were stamped in (those
    # given up as stalled), not to the one it resumed in (8 000 requests too many)
    after = frame[frame.index > stalled[stalled].index.max()]
    assert len(after) >= 7
    # the kernel's buffer filled meanwhile: what it dropped is said, in the interval the capture resumed in
    # (and the next, on a slow host, where draining the backlog took longer than an interval: CI once read
    # drops in both), and the interval after a losing one may read low too, said as well; none later
    notes = after["note"].fillna("")
    lost = notes.str.contains("the capture lost")
    losing = notes.str.contains("the capture was losing packets in the kernel in the interval before")
    assert not lost.iloc[2:].any() and not losing.iloc[3:].any(), after[["offered_rps", "rps", "note"]]
    assert after["note"][lost | losing].str.contains("maximum configuration applied").all()  # low rates not followed
    # each later interval holds its own step (steps of 1 600 req/s; an interval a step off read 1 600 away).
    # The bound is half a step: the first interval after the resume, catching up, once read 432 away (at 1-s
    # intervals; those that read low for the kernel's drops are said and left out above).
    off = (after["rps"] - after["offered_rps"]).abs()[~(lost | losing)]
    assert off.max() < 800, frame[["service_interval", "offered_rps", "rps", "note"]]


@pytest.mark.slow
@needs_memcached
def test_a_step_of_the_wall_clock_moves_no_interval(tmp_path):
    """A step of the wall clock (NTP, a VM resumed) mid-pass: perflearn-sniff kept its times
    on the wall clock, so at -2 s four 0.5-s intervals stalled and the next held all their
    requests (25 878 req/s at 6 400 offered, session 50, by hand). The capture and the loop
    now keep to the monotonic clock: no stall, each interval at its own load, each step said."""

    def step_wall_clock(seconds: float) -> None:
        time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME) + seconds)

    try:
        step_wall_clock(0.0)
    except PermissionError:
        pytest.skip("stepping the wall clock needs CAP_SYS_TIME")
    stepped = []

    def step_back_then_forward(_pid: int) -> None:
        step_wall_clock(-2.0)
        stepped.append(-2.0)
        time.sleep(3.0)
        step_wall_clock(+2.0)
        stepped.append(+2.0)

    try:  # 1-s steps of 1-s intervals: each interval a load of its own
        result, csv = run_manage(tmp_path, step_back_then_forward, "-p", "static", after=3.5, on="perflearn-sniff",
                                 step_seconds=1)
    finally:
        if sum(stepped):
            step_wall_clock(-sum(stepped))  # leave the clock as it was
    assert stepped == [-2.0, 2.0] and result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    assert list(frame["service_interval"]) == list(range(11))
    notes = frame["note"].fillna("")
    assert not notes.str.contains("stalled").any(), frame[["offered_rps", "rps", "note"]]
    assert notes.str.contains("the wall clock stepped -2.000 s").sum() == 1
    assert notes.str.contains("the wall clock stepped \\+2.000 s").sum() == 1
    off = (frame["rps"] - frame["offered_rps"]).abs()
    assert off.max() < 400, frame[["service_interval", "offered_rps", "rps", "note"]]


@pytest.mark.slow
@needs_memcached
def test_a_manager_stopped_for_a_while_records_what_it_missed_in_its_places(tmp_path, when_written):
    """The manager itself stopped (SIGSTOP; a starved host) while the service, the load and
    the capture ran on: the intervals it missed are recorded in their places, measured but
    not decided on, and every later one keeps its own load (0.5-s intervals of 1-s steps:
    the trace's 22 intervals in half the time of the default's)."""
    import sys

    from perflearn.experiment import cgroups

    if cgroups.version() is None:
        pytest.skip("needs cgroups")
    csv = tmp_path / "live.csv"
    manager = subprocess.Popen([sys.executable, "-m", "perflearn", "manage", "--service", SERVICE, "--cores", "1",
                                "--levels", "2", "--max-rps", "8000", "--target-ms", "2", "--step-seconds", "1",
                                "--interval", "0.5", "--csv", str(csv), "-p", "static"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)

    def stop_for_a_while(proc) -> None:
        proc.send_signal(signal.SIGSTOP)
        time.sleep(4)
        proc.send_signal(signal.SIGCONT)

    output = when_written(manager, csv, lambda text: len(text.splitlines()) > 6, stop_for_a_while)
    assert manager.returncode == 0, output
    frame = pd.read_csv(csv)
    assert list(frame["service_interval"]) == list(range(22))
    notes = frame["note"].fillna("")
    missed = notes.str.contains("the loop fell behind: measured, not decided on")
    assert missed.sum() >= 1 and not notes.str.contains("stalled").any(), frame[["offered_rps", "rps", "note"]]
    measured = frame[frame["rps"] > 0]
    assert ((measured["rps"] - measured["offered_rps"]).abs() < 400).all(), frame[["offered_rps", "rps", "note"]]


@pytest.mark.slow
@needs_memcached
def test_a_killed_managers_cpu_governors_are_put_back_by_the_next(tmp_path, cpufreq_tree):
    """A manager killed outright on a cpufreq machine left its CPUs in the userspace governor
    at its last frequency; the next manager puts the governors back (kept on disk as a
    runner keeps a cpufreq knob's). This machine has no cpufreq: sysfs trees laid out as
    the kernel's are mounted over its CPUs' in a private mount namespace, where both run."""
    import sys

    from perflearn.experiment import cgroups

    if cgroups.version() is None or shutil.which("unshare") is None:
        pytest.skip("needs cgroups and unshare")
    cpus = sorted(os.sched_getaffinity(0))
    cpufreq_tree(tmp_path, cpus)
    mounts = " && ".join(f"mount --bind {tmp_path / f'cpu{cpu}'} /sys/devices/system/cpu/cpu{cpu}" for cpu in cpus)
    csv = tmp_path / "live.csv"
    manage = (f"{sys.executable} -m perflearn manage --service '{SERVICE}' --cores 1 --levels 3 --max-rps 4000 "
              f"--target-ms 2 --step-seconds 0.5 --interval 0.5 -p static")  # one pass each: at the maximum, a frequency all the same

    def start(*extra: str) -> subprocess.Popen:
        return subprocess.Popen(["unshare", "-m", "sh", "-c", f"{mounts} && exec {manage} {' '.join(extra)}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    governors = [tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor" for cpu in cpus]
    first = start("--csv", str(csv))
    deadline = time.monotonic() + 60
    while not (csv.exists() and len(csv.read_text().splitlines()) > 4) and first.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    if first.poll() is not None and "mount" in (out := first.communicate()[0]):
        pytest.skip(f"cannot mount in a private namespace here: {out.strip()}")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert governors[0].read_text().strip() == "userspace"  # the speed knob: left where the killed one set it
    second = start()
    output, _ = second.communicate(timeout=90)
    assert second.returncode == 0, output
    originals = ",".join(f"{cpu}:performance" for cpu in cpus)
    assert f"was left at a killed runner's value; it will be put back to {originals}" in output
    assert all(g.read_text().strip() == "performance" for g in governors)
    assert "speed level = CPU frequency (cpufreq userspace, up to 2400 MHz)" in output
