"""`perflearn sniff` and `perflearn load` through the CLI."""

from __future__ import annotations

import json
import os
import socket
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
    # --key-size fixed:0 and fixed:300 ran, clamped silently to 1 and 250 bytes.
    (["--key-size", "fixed:0"], '--key-size: "fixed:0": a key is 1 to 250 bytes (memcached\'s limit), not 0'),
    (["--key-size", "fixed:300"], '--key-size: "fixed:300": a key is 1 to 250 bytes (memcached\'s limit), not 300'),
    (["--key-size", "uniform:8-251"], '--key-size: "uniform:8-251": a key is 1 to 250 bytes (memcached\'s limit), not 251'),
    (["--key-size", "0"], '--key-size: "0": a key is 1 to 250 bytes'),
    (["--value-size", "uniform:0-2000000000"], '--value-size: "uniform:0-2000000000": a value is 0 to 1073741824 bytes'),
    (["--key-size", "fixed:3"], '--key-size: "fixed:3": the keys of --keys 10000 are named k0 ... k9999, up to 5 bytes'),
    # the options `perflearn load` lacked, checked by the tool as they are given
    (["--keys", "0"], "--keys: must be at least 1, got 0"),
    (["--keys", "-1"], "invalid value '-1' for '--keys <KEYS>'"),
    (["--seed", "-1"], "invalid value '-1' for '--seed <SEED>'"),
    (["--path", "/a b"], '--path: "/a b": must start with / and hold no space or control character'),
    (["--drain", "-1"], "--drain: must be a non-negative number of seconds, got -1"),
    (["--interval", "0"], "--interval: must be at least 0.001 s, got 0"),
    (["--profile", "steps", "--step-pct", "0.5"], "--step-pct: must be between 1 and 100, got 0.5"),
])
def test_load_bad_numbers_are_one_line_from_the_tool(wire_tools, args, message):
    # Refused before connecting: nothing listens on port 1. A bad value is bad usage: exit 2
    # (it was 1, as for a run that failed).
    res = CliRunner().invoke(app, ["load", "127.0.0.1:1", "-p", "memcache-binary", *args])
    assert res.exit_code == 2
    line = _one_error_line(res)
    assert line.startswith("error: perflearn-load: ") and message in line, line


@pytest.mark.parametrize("args, message", [
    (["--interval", "-1"], "perflearn-sniff: --interval: must be a positive number of seconds, got -1"),
    (["--port", "70000"], "perflearn-sniff: invalid value '70000' for '--port <PORT>': 70000 is not in 1..=65535"),
    # Port 0 selected no connection: exit 0, an empty summary.
    (["--port", "0"], "perflearn-sniff: invalid value '0' for '--port <PORT>': 0 is not in 1..=65535"),
    (["--port", "-1"], "perflearn-sniff: invalid value '-1' for '--port <PORT>'"),
    (["--timeout", "-1"], "perflearn-sniff: --timeout: must be a positive number of seconds, got -1"),
    (["--snaplen", "-5"], "perflearn sniff: --snaplen -5: must be a positive number of bytes"),
])
def test_sniff_bad_numbers_are_one_line(wire_tools, args, message):
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), *args])
    assert res.exit_code == 2
    assert message in _one_error_line(res)


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_sniff_live_duration_is_checked_before_capture(wire_tools, value):
    # Fuzzing: time.sleep() raised ValueError / OverflowError after capture had started.
    res = CliRunner().invoke(app, ["sniff", "-i", "lo", "--duration", value])
    assert res.exit_code == 2
    assert "--duration" in _one_error_line(res)


def test_sniff_a_file_that_is_no_capture_exits_2(wire_tools, tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_text("nope")
    res = CliRunner().invoke(app, ["sniff", str(bad)])
    assert res.exit_code == 2  # an input file that is wrong is bad usage (UsageError), as for a directory
    assert "not a pcap or pcapng capture" in _one_error_line(res)


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
    # the first tick began with the capture, its rate over that part of a tick
    assert 0 < ticks[0]["end"] - ticks[0]["start"] <= 0.1 + 1e-6
    assert all(abs(t["end"] - t["start"] - 0.1) < 1e-6 for t in ticks[1:])
    assert all(t["rps"] == pytest.approx(t["requests"] / (t["end"] - t["start"]), rel=1e-4) for t in ticks)
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


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def test_sniff_records_to_stdout(wire_tools):
    # `perflearn sniff FILE --records -` printed intervals and the summary, and no record.
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), "--records", "-"])
    assert res.exit_code == 0, res.output
    lines = _lines(res.stdout)
    records = [x for x in lines if x["type"] == "record"]
    assert len(records) == lines[-1]["requests"] == 197
    assert lines[-1]["type"] == "summary" and {x["type"] for x in lines} == {"record", "interval", "summary"}


def test_sniff_no_request_matched_warns_in_one_line(wire_tools):
    # --port naming no server here: "p50 0.0 us", exit 0, no hint that nothing matched.
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), "--port", "1"])
    assert res.exit_code == 0, res.output
    summary = _lines(res.stdout)[-1]
    assert summary["requests"] == 0 and summary["p95_us"] is None and summary["p50_us"] is None
    assert res.stderr.strip() == f"warning: {WIRE_DATA / 'golden.pcap'}: no request matched (354 frames read)"


def test_sniff_truncated_capture_warns_in_one_line(wire_tools, tmp_path):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes((WIRE_DATA / "golden.pcap").read_bytes()[:3000])
    res = CliRunner().invoke(app, ["sniff", str(cut)])
    assert res.exit_code == 0, res.output
    assert _lines(res.stdout)[-1]["truncated"] is True
    warnings = [x for x in res.stderr.splitlines() if x.startswith("warning:")]
    assert warnings[-1] == f"warning: {cut}: capture ends with a truncated packet (read up to the cut)"
    # the request cut off with the file: said, not left out of the percentiles silently
    assert warnings[:-1] == ["warning: 1 requests had no response timed (0 unanswered at the end, 1 dropped with "
                             "their connection or a lost stream, 0 past --timeout): the percentiles are of the 10 "
                             "answered only"]


def test_sniff_a_missing_interface_is_named_as_one(wire_tools):
    # As root it said "cannot start capture (needs root or CAP_NET_RAW): ... No such device exists".
    res = CliRunner().invoke(app, ["sniff", "-i", "nosuchif0"])
    assert res.exit_code == 2
    line = _one_error_line(res)
    assert line.startswith("error: perflearn-sniff: interface nosuchif0: no such interface (there are: ")
    assert "root" not in line


def test_cli_with_a_closed_stdout_ends_quietly(wire_tools):
    # `perflearn sniff FILE --records - | head` exited 1 (rich's own broken-pipe exit).
    proc = subprocess.Popen([sys.executable, "-m", "perflearn", "sniff", str(WIRE_DATA / "golden.pcap"), "--records", "-",
                             "--interval", "0.001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout.readline().startswith(b"{")
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()


def test_bare_realtime_takes_the_default_priority():
    from perflearn.cli.wire import REALTIME_DEFAULT, _bare_realtime

    assert _bare_realtime(["x", "--realtime", "--pm-qos"]) == ["x", f"--realtime={REALTIME_DEFAULT}", "--pm-qos"]
    assert _bare_realtime(["x", "--realtime"]) == ["x", f"--realtime={REALTIME_DEFAULT}"]
    assert _bare_realtime(["--realtime", "127.0.0.1:1"]) == [f"--realtime={REALTIME_DEFAULT}", "127.0.0.1:1"]
    assert _bare_realtime(["x", "--realtime", "5"]) == ["x", "--realtime", "5"]
    assert _bare_realtime(["x", "--realtime=-1"]) == ["x", "--realtime=-1"]


def test_load_realtime_as_the_readme_gives_it(wire_tools, memcached):
    # README: `perflearn load ... --threads 1 --cpus 1 --realtime --pm-qos` was refused:
    # "Invalid value for '--realtime'" (the CLI wanted a number, docs/wire.md says [PRIO]).
    args = ["load", memcached.address, "-p", "memcache-binary", "-r", "200", "-d", "0.2",
            "--threads", "1", "--cpus", "0", "--realtime"]
    pm_qos = os.geteuid() == 0 and os.path.exists("/dev/cpu_dma_latency")
    res = CliRunner().invoke(app, args + (["--pm-qos"] if pm_qos else []))
    if os.geteuid() != 0:  # parsed: refused by the tool (SCHED_FIFO needs root), not by the CLI
        assert res.exit_code == 1 and "SCHED_FIFO priority 10" in res.output, res.output
        return
    assert res.exit_code == 0, res.output
    sched = _lines(res.stdout)[-1]["sched"]
    assert sched["realtime_priority"] == 10 and sched["cpus"] == [0] and sched["pm_qos"] is pm_qos
    res = CliRunner().invoke(app, ["load", "--realtime", "5", memcached.address, "-p", "memcache-binary", "-r", "200",
                                   "-d", "0.2"])
    assert res.exit_code == 0, res.output
    assert _lines(res.stdout)[-1]["sched"]["realtime_priority"] == 5


def test_load_a_cpu_it_cannot_use_is_refused_before_the_start(wire_tools, memcached):
    # `--cpus 99` printed the start line, then "load: load: cannot pin to CPU 99".
    cpu = max(os.sched_getaffinity(0)) + 1
    res = CliRunner().invoke(app, ["load", memcached.address, "-p", "memcache-binary", "-r", "100", "-d", "0.2",
                                   "--cpus", str(cpu)])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.strip().startswith(f"error: perflearn-load: --cpus: cannot pin to CPU {cpu}: not one this process may use")


def test_load_nothing_answered_fails_after_its_summary(wire_tools):
    # An unreachable server gave "completed": 0, "rps": 16 and exit 0.
    with socket.socket() as mute:  # connections complete in its backlog; nothing is ever read or answered
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)
        port = mute.getsockname()[1]
        res = CliRunner().invoke(app, ["load", f"127.0.0.1:{port}", "-p", "memcache-binary", "-r", "200", "-d", "0.2",
                                       "-c", "2"])
    assert res.exit_code == 1
    summary = _lines(res.stdout)[-1]  # kept
    assert summary["type"] == "summary" and summary["sent"] > 0 and summary["completed"] == 0
    assert summary["p95_us"] is None and summary["elapsed_s"] == 0.2
    err = [x for x in res.stderr.splitlines() if x.strip()]
    assert err == [f"error: perflearn-load: 127.0.0.1:{port}: no request was answered ({summary['sent']} sent)"]


@pytest.mark.parametrize("flag", [["--filter", "tcp port 1"], ["--duration", "2"], ["--snaplen", "90"]])
def test_sniff_refuses_live_options_on_a_file(wire_tools, flag):
    """-f "tcp port 1" on a file was ignored: the whole file was analysed (session 46's review)."""
    res = CliRunner().invoke(app, ["sniff", str(WIRE_DATA / "golden.pcap"), *flag])
    assert res.exit_code == 2 and f"{flag[0]} applies to a live capture" in res.output, res.output


def test_sniff_reads_a_pipe(wire_tools):
    """`cat f | perflearn sniff -` and `perflearn sniff <(cat f)` were "capture file not found"."""
    golden = (WIRE_DATA / "golden.pcap").read_bytes()
    for argv in (["-"], ["/dev/stdin"]):
        res = subprocess.run([sys.executable, "-m", "perflearn", "sniff", *argv], input=golden, capture_output=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.splitlines()[-1])["requests"] == 197
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m perflearn sniff <(cat {WIRE_DATA / 'golden.pcap'})"],
                           capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0 and json.loads(shell.stdout.splitlines()[-1])["requests"] == 197, shell.stderr


def test_requests_without_a_timed_response_are_said(capsys):
    """A server that stopped answering read as healthy: p99 86.7 us over the 456 answered of
    3035 requests, the rest discarded with their connections, and no word of it."""
    from perflearn.cli.wire import _describe

    _describe({"requests": 456, "rps": 77.0, "p50_us": 27.4, "p99_us": 86.7, "max_us": 90.0,
               "counters": {"unanswered": 0, "discarded": 2579, "evicted": 0, "desyncs": 3}}, "interface lo")
    err = capsys.readouterr().err
    assert "2579 requests had no response timed" in err and "of the 456 answered only" in err
    assert "lost 3 streams (desyncs)" in err


def test_load_a_server_that_stops_answering_fails(wire_tools, memcached):
    """memcached stopped (SIGSTOP) after 1 s of 3 read "342 requests, p99 3559 us", exit 0:
    the 89 % never answered were in no percentile (session 46's review)."""
    import signal
    import threading

    stop = threading.Timer(0.8, lambda: os.kill(memcached.proc.pid, signal.SIGSTOP))
    stop.start()
    try:
        res = subprocess.run([sys.executable, "-m", "perflearn", "load", f"127.0.0.1:{memcached.port}", "-p",
                              "memcache-binary", "-r", "1000", "-d", "2"], capture_output=True, text=True, timeout=60)
    finally:
        stop.join()
        os.kill(memcached.proc.pid, signal.SIGCONT)
    assert res.returncode == 1, res.stderr
    summary = _lines(res.stdout)[-1]
    assert summary["unanswered"] > summary["sent"] / 2
    assert f"{summary['unanswered']} of the {summary['sent']} requests sent" in res.stderr.splitlines()[-1]
    assert "never answered" in res.stderr and "Traceback" not in res.stderr
    # its line paired the answered count with the rate sent: "58 requests, 100/s" (session 57's audit)
    assert f"{summary['requests']} answered of {summary['sent']} sent, {summary['rps']:.0f}/s sent" in res.stderr


def test_load_refuses_another_profiles_options(tmp_path):
    """--trace without --profile trace ran a constant load at --rate, unsaid; so did
    --step-seconds and --step-pct without --profile steps (session 57's audit)."""
    trace = tmp_path / "tr.txt"
    trace.write_text("1 100\n")
    for args, message in (
            (["--trace", str(trace)], "--trace: the trace profile's option, and the profile is constant"),
            (["--step-pct", "50"], "--step-pct: the steps profile's option, and the profile is constant"),
            (["--profile", "trace", "--trace", str(trace), "--step-seconds", "1"],
             "--step-seconds: the steps profile's option, and the profile is trace"),
            (["--profile", "steps", "-d", "5"], "--duration: the constant profile's option, and the profile is steps")):
        res = subprocess.run([sys.executable, "-m", "perflearn", "load", "127.0.0.1:9", "-p", "http", *args],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and message in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


def test_live_sniff_ended_by_sigterm_keeps_its_summary(wire_tools, can_capture):
    """`timeout 60 perflearn sniff -i lo ...` (SIGTERM) ended without a summary; Ctrl-C had one."""
    import signal

    sniff = subprocess.Popen([sys.executable, "-m", "perflearn", "sniff", "-i", "lo", "-f", "tcp port 9"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    sniff.send_signal(signal.SIGTERM)
    out, err = sniff.communicate(timeout=30)
    assert _lines(out)[-1]["type"] == "summary", (out, err)
    assert "Traceback" not in err


def test_native_tools_exit_2_for_bad_usage_and_1_for_a_failure(wire_tools, tmp_path):
    """perflearn's bad usage is exit 2 (UsageError): the native tools exited 1 for a bad
    value, as for a run that failed, and so did `perflearn load` and `perflearn sniff`."""
    from perflearn.errors import PerflearnError, UsageError
    from perflearn.wire import run_load, sniff_file

    sniff, load = (str(t) for t in wire_tools)
    golden = str(WIRE_DATA / "golden.pcap")
    for cmd, code in [
        ([load, "-s", "127.0.0.1:1", "-p", "redis", "--key-size", "fixed:300"], 2),
        ([load, "-s", "127.0.0.1:1", "-p", "redis", "--no-such-option"], 2),
        ([load, "-s", "127.0.0.1:1", "-p", "redis", "-d", "0.2"], 1),  # nothing listens on port 1
        ([sniff, "-r", golden, "--interval=-1"], 2),
        ([sniff, "-r", str(tmp_path)], 2),
        ([sniff, "-r", golden, "--records", "/dev/full"], 1),  # the records could not be written
    ]:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        lines = res.stderr.splitlines()
        assert res.returncode == code and len(lines) == 1, (cmd, res.returncode, res.stderr)
    # the Python faces keep the code and the tool's line
    with pytest.raises(UsageError, match=r"^perflearn-load: --value-size: \"fixed:2000000000\": a value is") as exc:
        run_load("127.0.0.1:1", "redis", rate=10, duration=0.1, extra=["--value-size", "fixed:2000000000"])
    assert exc.value.exit_code == 2
    with pytest.raises(PerflearnError, match="^perflearn-sniff: output: ") as exc:
        sniff_file(golden, extra=["--records", "/dev/full"])
    assert exc.value.exit_code == 1 and not isinstance(exc.value, UsageError)
    res = CliRunner().invoke(app, ["load", "127.0.0.1:1", "-p", "redis", "-d", "0.2"])
    assert res.exit_code == 1 and _one_error_line(res).startswith("error: perflearn-load: 127.0.0.1:1: cannot connect")


def _memcached_items(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            data += s.recv(65536)
    return int(next(x.split()[2] for x in data.decode().splitlines() if x.startswith("STAT curr_items ")))


def test_load_passes_keys_interval_and_drain_on(wire_tools, memcached):
    """perflearn-load's --keys, --path, --drain, --seed, --interval and --step-pct were not
    options of `perflearn load` ("No such option"); --step-pct is the steps profile's, passed
    on in test_load_bad_numbers_are_one_line_from_the_tool."""
    res = CliRunner().invoke(app, ["load", memcached.address, "-p", "memcache-ascii", "-r", "400", "-d", "0.5",
                                   "--keys", "3", "--key-size", "fixed:4", "--preload", "--set-ratio", "0",
                                   "--interval", "0.1", "--drain", "0.5", "--seed", "7"])
    assert res.exit_code == 0, res.output
    lines = _lines(res.stdout)
    assert lines[-1]["completed"] == lines[-1]["sent"] > 0
    assert len([x for x in lines if x["type"] == "interval"]) >= 4  # 0.1 s intervals over 0.5 s
    assert _memcached_items(memcached.port) == 3  # the preload set --keys 3, not 10 000


def test_load_passes_the_http_path_on(wire_tools, can_capture, http_server):
    from perflearn.wire import LiveSniffer

    with LiveSniffer("lo", bpf=f"tcp port {http_server.port}", ports=[http_server.port], records=True) as sniffer:
        res = CliRunner().invoke(app, ["load", http_server.address, "-p", "http", "-r", "100", "-d", "0.3", "-c", "1",
                                       "--path", "/big"])
    assert res.exit_code == 0, res.output
    records = sniffer.result.records
    assert records and all(r["resp_bytes"] > 80_000 for r in records)  # /big, not / ("hello world")
