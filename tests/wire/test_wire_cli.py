"""`perflearn sniff` and `perflearn load` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perflearn.cli import app

WIRE_DATA = Path(__file__).parent.parent / "data" / "wire"


def test_sniff_file_prints_json_lines(wire_tools):
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap")])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert lines[-1]["type"] == "summary"
    expected = json.loads((WIRE_DATA / "golden.expected.json").read_text())
    assert lines[-1]["requests"] == sum(expected["responses"].values())


def test_sniff_needs_one_source(wire_tools):
    res = CliRunner().invoke(app, ["sniff"])
    assert res.exit_code == 2
    assert "give a capture file or --interface (neither was given)" in res.output
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), "-i", "lo"])
    assert res.exit_code == 2
    assert "give a capture file or --interface, not both" in res.output


def test_sniff_names_a_directory(wire_tools, tmp_path):
    res = CliRunner().invoke(app, ["sniff", str(tmp_path)])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {tmp_path}: is a directory, not a capture file"


def _one_error_line(res) -> str:
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    return lines[0]


# Fuzzing: a negative value reached clap as a flag, and the wrapper showed the last line
# of clap's usage text ("For more information, try '--help'.").
@pytest.mark.parametrize("args, message", [
    (["-r", "-5"], "--rate: must be a positive number, got -5"),
    (["-d", "-1"], "--duration: must be a positive number of seconds, got -1"),
    (["-c", "-1"], "invalid value '-1' for '--connections <CONNECTIONS>': invalid digit found in string"),
    (["--set-ratio", "-0.5"], "--set-ratio: must be between 0 and 1, got -0.5"),
    (["--set-ratio", "2"], "--set-ratio: must be between 0 and 1, got 2"),
    (["--profile", "steps", "--step-seconds", "0"], "--step-seconds: must be a positive number of seconds, got 0"),
    (["-d", "0"], "--duration: must be a positive number of seconds, got 0"),
    (["-r", "1e12", "-d", "0.5"], "--rate: 1000000000000 requests/s is more than 1 send thread(s) can issue"),
    (["-r", "1e7", "-d", "0.5"], "use at least 10 --threads and --connections"),
])
def test_load_bad_numbers_are_one_line_from_the_tool(wire_tools, args, message):
    # Refused before connecting: nothing listens on port 1.
    res = CliRunner().invoke(app, ["load", "127.0.0.1:1", "-p", "memcache-binary", *args])
    assert res.exit_code == 1
    line = _one_error_line(res)
    assert line.startswith("error: perflearn-load: ") and message in line, line


@pytest.mark.parametrize("args, message", [
    (["--interval", "-1"], "perflearn-sniff: --interval: must be a positive number of seconds, got -1"),
    (["--port", "70000"], "perflearn-sniff: invalid value '70000' for '--port <PORT>': 70000 is not in 0..=65535"),
    (["--port", "-1"], "perflearn-sniff: invalid value '-1' for '--port <PORT>'"),
    (["--timeout", "-1"], "perflearn-sniff: --timeout: must be a positive number of seconds, got -1"),
    (["--snaplen", "-5"], "perflearn sniff: --snaplen -5: must be a positive number of bytes"),
])
def test_sniff_bad_numbers_are_one_line(wire_tools, args, message):
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), *args])
    assert res.exit_code != 0
    assert message in _one_error_line(res)


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_sniff_live_duration_is_checked_before_capture(wire_tools, value):
    # Fuzzing: time.sleep() raised ValueError / OverflowError after capture had started.
    res = CliRunner().invoke(app, ["sniff", "-i", "lo", "--duration", value])
    assert res.exit_code == 2
    assert "--duration" in _one_error_line(res)


def test_sniff_bad_file_exits_1(wire_tools, tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_text("nope")
    res = CliRunner().invoke(app, ["sniff", str(bad)])
    assert res.exit_code == 1
    assert "not a pcap or pcapng capture" in res.output


@pytest.mark.slow
def test_load_command(wire_tools, memcached):
    res = CliRunner().invoke(app, ["load", memcached.address, "-p", "memcache-binary", "-r", "500", "-d", "0.5"])
    assert res.exit_code == 0, res.output
    summary = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")][-1]
    assert summary["type"] == "summary" and summary["completed"] == summary["sent"] > 0


def test_load_command_pins_send_threads(wire_tools, memcached):
    res = CliRunner().invoke(app, ["load", memcached.address, "-p", "memcache-binary", "-r", "500", "-d", "0.3",
                                   "--cpus", "0", "--spin-us", "20"])
    assert res.exit_code == 0, res.output
    summary = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")][-1]
    assert summary["sched"]["cpus"] == [0] and summary["sched"]["spin_us"] == 20


@pytest.mark.parametrize("args", [["--tick", "0.02"], ["-i", "lo", "--tick", "0"], ["-i", "lo", "--tick", "2"]])
def test_sniff_rejects_bad_tick(wire_tools, args):
    src = [str(WIRE_DATA / "golden.pcap")] if "-i" not in args else []
    res = CliRunner().invoke(app, ["sniff", *src, *args])
    assert res.exit_code == 2
    assert "--tick" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_sniff_live_ticks(wire_tools, memcached):
    """Live on loopback with --tick: contiguous tick lines, each before the interval it
    ends in, counting the load's requests."""
    import threading

    from perflearn.wire import run_load

    port = int(memcached.address.rsplit(":", 1)[1])
    loader = threading.Timer(0.8, run_load, (memcached.address,), {"protocol": "memcache-binary", "rate": 2000, "duration": 1.0})
    loader.start()
    res = CliRunner().invoke(app, ["sniff", "-i", "lo", "--port", str(port), "--tick", "0.1", "--duration", "2.5"])
    loader.join()
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    ticks = [x for x in lines if x["type"] == "tick"]
    intervals = [x for x in lines if x["type"] == "interval"]
    assert len(ticks) >= 10 and intervals
    assert all(abs(t["end"] - t["start"] - 0.1) < 1e-6 for t in ticks)
    assert all(a["end"] == b["start"] for a, b in zip(ticks, ticks[1:]))
    for i, line in enumerate(lines):  # every tick that ended by an interval's end came before it
        if line["type"] == "interval":
            assert all(lines.index(t) < i for t in ticks if t["end"] <= line["end"] + 1e-9)
    assert sum(t["requests"] for t in ticks) >= 1500  # 2000/s for 1 s


def test_load_ends_with_perflearn_killed_outright(wire_tools, memcached, alive, reap):
    """`perflearn load` SIGKILLed runs no cleanup; its perflearn-load stops loading the service anyway."""
    cli = subprocess.Popen([sys.executable, "-m", "perflearn", "load", memcached.address, "-p", "memcache-binary",
                            "-r", "500", "-d", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reap(cli)
    deadline, found = time.monotonic() + 30, []
    while not found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = subprocess.run(["pgrep", "-P", str(cli.pid), "-x", "perflearn-load"], capture_output=True,
                               text=True).stdout.split()
    assert found, "perflearn-load did not start"
    reap(*found)
    cli.kill()
    cli.wait()
    assert not alive(int(found[0]))
