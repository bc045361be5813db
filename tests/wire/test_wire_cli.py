"""`perflearn sniff` and `perflearn load` through the CLI."""

from __future__ import annotations

import json
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
    assert "give a capture file or --interface" in res.output


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
