"""perflearn-load on its own: rates, profiles and errors."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from perflearn.errors import PerflearnError, UsageError
from perflearn.wire import LoadFailed, run_load

pytestmark = pytest.mark.slow


def test_uniform_arrivals_send_the_target_count(wire_tools, memcached):
    r = run_load(memcached.address, "memcache-binary", rate=1000, duration=1.0, connections=2,
                 extra=["--arrivals", "uniform"])
    assert abs(r.summary["sent"] - 1000) <= 1
    assert r.summary["completed"] == r.summary["sent"]
    assert r.summary["unanswered"] == 0


def test_steps_profile_goes_up_and_down(wire_tools, memcached):
    r = run_load(memcached.address, "memcache-ascii", rate=1000, profile="steps", connections=2,
                 extra=["--step-seconds", "0.5", "--step-pct", "50", "--arrivals", "uniform", "--interval", "0.5"])
    sent = [i["sent"] for i in r.intervals]
    # 0%, 50%, 100%, 50%, 0% of 1000/s, half a second each
    assert sent[0] == 0 and sent[-1] == 0
    assert max(sent) == sent[2]
    assert abs(r.summary["sent"] - 1000) <= 3


def test_trace_profile(wire_tools, redis, tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("0 200\n0.5 600\n1.0 0\n")
    r = run_load(redis.address, "redis", profile="trace", connections=2,
                 extra=["--trace", str(trace), "--arrivals", "uniform", "--preload", "--keys", "100"])
    assert abs(r.summary["sent"] - 400) <= 2
    assert r.summary["errors"] == 0


def test_connection_refused_is_one_line(wire_tools):
    with pytest.raises(PerflearnError, match="cannot connect") as exc:
        run_load("127.0.0.1:1", "redis", rate=10, duration=0.1)
    assert "\n" not in str(exc.value)
    with pytest.raises(UsageError):
        run_load("127.0.0.1:1", "smtp")


def test_pinning_and_realtime_are_applied_and_recorded(wire_tools, memcached):
    import os

    realtime = 5 if os.geteuid() == 0 else None
    r = run_load(memcached.address, "memcache-binary", rate=500, duration=0.5, connections=4, threads=2,
                 cpus="0", realtime=realtime, spin_us=50)
    sched = r.summary["sched"]
    assert sched["cpus"] == [0, 0]  # both send threads on CPU 0
    assert sched["realtime_priority"] == realtime
    assert sched["spin_us"] == 50
    # Real-time threads have no timer slack; the others ask for 1 ns instead of 50 µs.
    assert sched["timer_slack_ns"] == (0 if realtime else 1)
    assert r.summary["completed"] == r.summary["sent"] > 0
    assert sched["pm_qos"] is False
    late = r.summary["send_late"]
    assert set(late) == {"late_wakeup", "busy", "behind_writes"}
    assert sum(late.values()) <= r.summary["sent"]


def test_pm_qos_is_held_and_recorded(wire_tools, memcached):
    import os

    if os.geteuid() != 0 or not os.path.exists("/dev/cpu_dma_latency"):
        with pytest.raises(PerflearnError, match="--pm-qos"):
            run_load(memcached.address, "memcache-binary", rate=200, duration=0.3, connections=1, pm_qos=True)
        return
    r = run_load(memcached.address, "memcache-binary", rate=200, duration=0.3, connections=1, pm_qos=True)
    assert r.summary["sched"]["pm_qos"] is True and r.summary["completed"] > 0


def test_default_run_is_not_pinned(wire_tools, memcached):
    r = run_load(memcached.address, "memcache-binary", rate=200, duration=0.3, connections=1)
    assert r.summary["sched"]["cpus"] == []
    assert r.summary["sched"]["realtime_priority"] is None
    assert r.summary["sched"]["timer_slack_ns"] == 1


@pytest.mark.parametrize("args, where", [
    ({"cpus": "3-1"}, "--cpus"),
    ({"cpus": "a"}, "--cpus"),
    ({"realtime": 0}, "--realtime"),
    ({"spin_us": -1}, "--spin-us"),
])
def test_bad_scheduling_options_are_one_line(wire_tools, args, where):
    with pytest.raises(PerflearnError, match=where) as exc:
        run_load("127.0.0.1:1", "redis", rate=10, duration=0.1, **args)
    assert "\n" not in str(exc.value)


def test_pinning_to_a_missing_cpu_is_one_line(wire_tools, memcached):
    with pytest.raises(PerflearnError, match="cannot pin to CPU 1000") as exc:
        run_load(memcached.address, "memcache-binary", rate=10, duration=0.1, connections=1, cpus="1000")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("lead", ["-1", "61", "nan"])
def test_a_start_announced_too_far_ahead_or_behind_is_one_line(wire_tools, lead):
    with pytest.raises(PerflearnError, match="--start-in: must be between 0 and 60 seconds") as exc:
        run_load("127.0.0.1:1", "redis", rate=10, duration=0.1, extra=[f"--start-in={lead}"])
    assert "\n" not in str(exc.value)


def test_negative_numbers_reach_the_tools_own_check(wire_tools):
    for kwargs, message in [({"rate": -5}, "--rate: must be a positive number"),
                            ({"connections": -1}, "invalid value '-1' for '--connections <CONNECTIONS>'"),
                            ({"duration": -1}, "--duration: must be a positive number of seconds")]:
        args = {"rate": 10, "duration": 0.1, **kwargs}
        with pytest.raises(PerflearnError, match=message) as exc:
            run_load("127.0.0.1:1", "redis", **args)
        assert "\n" not in str(exc.value) and "--help" not in str(exc.value)


def test_a_rate_that_cannot_be_met_stops_at_the_duration(wire_tools, memcached):
    # Fuzzing: -r 1e7 -d 0.5 caught up for 10.8 s (590 MB), then reported "duration_s": 0.5.
    # One thread, one write(2) per request, can issue about 900 000 a second here (once all
    # 450 000 of a 0.5-s run, session 58), so it asks for the most one thread may (1 million)
    # on a CPU it shares with a busy loop: half a CPU, far short on any machine.
    busy = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        time.sleep(0.2)  # the loop is pinned and running
        t0 = time.monotonic()
        r = run_load(memcached.address, "memcache-binary", rate=1e6, duration=0.5, connections=1, cpus="0",
                     extra=["--arrivals", "uniform", "--drain", "0.5"])
        elapsed = time.monotonic() - t0
    finally:
        busy.kill()
        busy.wait()
    assert elapsed < 0.5 + 0.5 + 0.5  # duration, drain, start and slack
    s = r.summary
    assert s["unsent"] > 0 and abs(s["sent"] + s["unsent"] - s["target_requests"]) <= 2
    # the rate actually sent: over the time it ran (a little past the 0.5 s profile), not the profile's
    assert s["duration_s"] == 0.5 and 0.5 <= s["elapsed_s"] < 1.0
    assert s["rps"] == pytest.approx(s["sent"] / s["elapsed_s"])


def test_a_server_that_dies_fails_the_run_and_its_rate_is_over_the_time_it_ran(wire_tools, memcached):
    # memcached killed 1 s into `-d 3`: exit 0, "duration_s": 3.0, "rps": 659 (sent / 3 s).
    import threading

    def on_line(obj):
        if obj["type"] == "start":
            threading.Timer(0.3, memcached.proc.kill).start()

    with pytest.raises(LoadFailed) as exc:
        run_load(memcached.address, "memcache-binary", rate=2000, duration=30, connections=4, on_line=on_line)
    s = exc.value.result.summary  # the summary is kept
    assert s["broken_connections"] == 4 and s["duration_s"] == 30
    assert 0 < s["elapsed_s"] < 30 and s["rps"] == pytest.approx(s["sent"] / s["elapsed_s"])
    assert s["sent"] < 2000 * 30 / 2  # it stopped, far short of the profile
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"perflearn-load: {memcached.address}: 4 of 4 connections broke")
    assert f"{s['sent']} requests sent, {s['completed']} answered; the load stopped after" in message


def test_a_rate_met_is_over_the_profile(wire_tools, memcached):
    r = run_load(memcached.address, "memcache-binary", rate=500, duration=0.5, connections=2)
    s = r.summary
    assert s["elapsed_s"] == s["duration_s"] == 0.5 and s["rps"] == s["sent"] / 0.5
    assert s["broken_connections"] == 0 and s["completed"] == s["sent"] > 0


def test_realtime_true_is_the_tools_default_priority(wire_tools, memcached):
    import os

    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root")
    r = run_load(memcached.address, "memcache-binary", rate=200, duration=0.2, connections=1, realtime=True)
    assert r.summary["sched"]["realtime_priority"] == 10
