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
