"""Golden capture (tests/data/wire/record.sh): counts, records, tshark's http.time."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from collections import Counter

import pytest

from perflearn.errors import PerflearnError, UsageError
from perflearn.wire import sniff_file, summary_metrics

from pathlib import Path

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

WIRE_DATA = Path(__file__).parent.parent / "data" / "wire"

EXPECTED = json.loads((WIRE_DATA / "golden.expected.json").read_text())


def _records_key(r: dict) -> tuple:
    return (r["flow"], r["op"], r["t"], r["t_resp"], r["latency_us"], r["req_bytes"], r["resp_bytes"])


@pytest.mark.parametrize("name", ["golden.pcap", "golden.pcapng"])
def test_counts_match_the_clients(wire_tools, name):
    result = sniff_file(WIRE_DATA / name, records=True)
    by_proto = Counter(r["proto"] for r in result.records)
    assert dict(by_proto) == EXPECTED["responses"]
    assert result.summary["requests"] == sum(EXPECTED["responses"].values())
    assert result.counters["desyncs"] == 0
    assert result.counters["unmatched_responses"] == 0


def test_records_match_the_checked_in_golden(wire_tools):
    got = sniff_file(WIRE_DATA / "golden.pcap", records=True).records
    want = [json.loads(line) for line in (WIRE_DATA / "golden.records.jsonl").read_text().splitlines()]
    assert [_records_key(r) for r in got] == [_records_key(r) for r in want]


def _tshark_times(text: str) -> list[float]:
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        codes = parts[2].split(",")
        if parts[3] and not codes[0].startswith("1"):
            # A frame carrying several pipelined responses: tshark gives the first's time.
            out += [float(parts[3]) * 1e6] * len(codes)
    return out


def _http_latencies(wire_tools) -> list[float]:
    recs = sniff_file(WIRE_DATA / "golden.pcap", records=True).records
    return [r["latency_us"] for r in recs if r["proto"] == "http"]


def test_http_latency_matches_checked_in_tshark(wire_tools):
    ours = _http_latencies(wire_tools)
    theirs = _tshark_times((WIRE_DATA / "golden.http_time.tsv").read_text())
    assert len(ours) == len(theirs) == EXPECTED["responses"]["http"]
    for a, b in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1.0)  # tshark prints µs-resolution seconds


def test_http_latency_matches_tshark_run_now(wire_tools):
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    port = EXPECTED["ports"]["http"]
    proc = subprocess.run(
        ["tshark", "-r", str(WIRE_DATA / "golden.pcap"), "-d", f"tcp.port=={port},http", "-Y", "http.response",
         "-T", "fields", "-e", "frame.number", "-e", "tcp.stream", "-e", "http.response.code", "-e", "http.time"],
        capture_output=True, text=True, check=True)
    theirs = _tshark_times(proc.stdout)
    ours = _http_latencies(wire_tools)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a == pytest.approx(b, abs=1.0)


def test_csv_records(wire_tools, tmp_path):
    out = tmp_path / "records.csv"
    sniff_file(WIRE_DATA / "golden.pcap", extra=["--records", str(out)])
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(EXPECTED["responses"].values())
    assert {r["proto"] for r in rows} == set(EXPECTED["responses"])
    assert all(float(r["latency_us"]) >= 0 for r in rows)


def test_server_port_filter(wire_tools):
    r = sniff_file(WIRE_DATA / "golden.pcap", ports=[EXPECTED["ports"]["redis"]], records=True)
    assert {x["proto"] for x in r.records} == {"redis"}
    assert len(r.records) == EXPECTED["responses"]["redis"]


def test_forced_protocol_on_the_wrong_traffic_gives_no_false_samples(wire_tools):
    # Everything parsed as Redis: memcached and HTTP connections desynchronise, never match.
    r = sniff_file(WIRE_DATA / "golden.pcap", protocol="redis", records=True)
    assert len(r.records) == EXPECTED["responses"]["redis"]
    assert r.counters["desyncs"] > 0


def test_summary_metrics(wire_tools):
    m = summary_metrics(sniff_file(WIRE_DATA / "golden.pcap").summary)
    assert m["wire_requests"] == sum(EXPECTED["responses"].values())
    assert m["wire_p50_us"] <= m["wire_p99_us"] <= m["wire_max_us"]


def test_errors_are_one_line(wire_tools, tmp_path):
    with pytest.raises(UsageError, match="capture file not found"):
        sniff_file(tmp_path / "missing.pcap")
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"this is not a capture")
    with pytest.raises(PerflearnError, match=r"bad\.pcap: not a pcap or pcapng capture") as exc:
        sniff_file(bad)
    assert "\n" not in str(exc.value)
    with pytest.raises(UsageError):
        sniff_file(bad, protocol="smtp")


def test_truncated_capture_keeps_what_was_read(wire_tools, tmp_path):
    data = (WIRE_DATA / "golden.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) // 2 + 7])
    r = sniff_file(cut)
    assert r.summary["truncated"] is True
    assert 0 < r.summary["requests"] < sum(EXPECTED["responses"].values())
    # said on stderr too, not only in the JSON (the CLI showed nothing)
    assert r.warnings == [f"{cut}: capture ends with a truncated packet (read up to the cut)"]


LATENCIES = ("mean_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "max_us")


def test_no_request_matched_is_null_latency_and_a_warning(wire_tools):
    """--port naming no server in the capture: 0 requests, and latencies null, not 0.0
    (a spec's wire_p95 was stored as 0 for a run that matched nothing)."""
    r = sniff_file(WIRE_DATA / "golden.pcap", ports=[1])
    s = r.summary
    assert s["requests"] == 0 and s["counters"]["frames"] == 354
    assert all(s[k] is None for k in LATENCIES), s
    assert s["rps"] == 0.0  # no request over the capture's span: a rate of 0 is measured
    assert r.warnings == [f"{WIRE_DATA / 'golden.pcap'}: no request matched (354 frames read)"]
    m = summary_metrics(s)
    assert m["wire_requests"] == 0 and not set(m) & {f"wire_{k}" for k in LATENCIES}


def test_a_header_only_capture_has_no_time_span(wire_tools, tmp_path):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes((WIRE_DATA / "golden.pcap").read_bytes()[:24])  # the file header, no packet
    r = sniff_file(empty)
    s = r.summary
    assert s["start"] is None and s["end"] is None and s["rps"] is None and s["p95_us"] is None, s
    assert r.warnings == [f"{empty}: no request matched (0 frames read)"]
    assert summary_metrics(s) == {"wire_requests": 0.0, **{f"wire_{k}": 0.0 for k in
                                  ("evicted", "discarded", "unmatched_responses", "gaps", "desyncs", "flows_dropped")}}


def test_summary_metrics_drop_a_zero_latency_of_no_request():
    # as an older perflearn-sniff wrote it: 0.0 for a latency it never measured
    old = {"type": "summary", "rps": 0.0, "requests": 0, **{k: 0.0 for k in LATENCIES}}
    assert summary_metrics(old) == {"wire_rps": 0.0, "wire_requests": 0.0}


def test_a_closed_stdout_ends_the_sniffer_quietly(wire_tools):
    # `perflearn-sniff ... | head` said "perflearn-sniff: output: Broken pipe" and exited 1.
    proc = subprocess.Popen([str(wire_tools[0]), "-r", str(WIRE_DATA / "golden.pcap"), "--records", "-",
                             "--interval", "0.001"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout.readline().startswith(b"{")
    proc.stdout.close()  # 140 KB to come: more than the pipe (64 KiB) and the tool's buffer (64 KiB) hold
    assert proc.wait(timeout=30) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()


def test_ticks_count_every_request_once_before_their_interval(wire_tools):
    """--tick: contiguous ticks of the given length whose request counts add up to the
    analyzer's, each written before the interval line it ends in."""
    sniff = wire_tools[0]
    out = subprocess.run([str(sniff), "-r", str(WIRE_DATA / "golden.pcap"), "--interval", "0.2", "--tick", "0.05"],
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    ticks = [line for line in lines if line["type"] == "tick"]
    assert len(ticks) >= 4
    summary = lines[-1]
    # the first tick begins at the first frame, the others lie on the grid of 0.05 s
    assert ticks[0]["start"] == summary["start"] and 0 < ticks[0]["end"] - ticks[0]["start"] <= 0.05 + 1e-6
    assert all(t["end"] - t["start"] == pytest.approx(0.05, abs=1e-6) for t in ticks[1:])  # epoch seconds in f64
    assert all(a["end"] == b["start"] for a, b in zip(ticks, ticks[1:]))
    assert all(t["rps"] == pytest.approx(t["requests"] / (t["end"] - t["start"]), rel=1e-4) for t in ticks)
    in_ticks = sum(t["requests"] for t in ticks)
    assert 0 < in_ticks <= summary["counters"]["requests"]  # the last, partial tick is not written
    for i, line in enumerate(lines):
        if line["type"] == "interval":  # every tick that ended by this interval's end came before it
            ended = [t for t in ticks if t["end"] <= line["end"] + 1e-9]
            assert all(lines.index(t) < i for t in ended)
    bad = subprocess.run([str(sniff), "-r", str(WIRE_DATA / "golden.pcap"), "--tick=-1"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--tick" in bad.stderr and "positive" in bad.stderr


def test_intervals_and_summary_rates_are_over_the_time_they_cover(wire_tools):
    """The first interval began at the first frame but its rate divided by a whole
    interval; the summary's rate is over the answered requests' own span."""
    r = sniff_file(WIRE_DATA / "golden.pcap", records=True, interval=0.1)
    s, intervals = r.summary, r.intervals
    assert intervals[0]["start"] == s["start"]  # the first frame, not a whole 0.1 s
    for i in intervals:
        assert i["rps"] == pytest.approx(i["requests"] / (i["end"] - i["start"]), rel=1e-4), i
    span = max(x["t_resp"] for x in r.records) - min(x["t"] for x in r.records)
    assert s["rps"] == pytest.approx(s["requests"] / span, rel=1e-4)  # epoch seconds in f64


def test_redis_records_say_a_miss_and_an_error_in_status(wire_tools):
    """Redis records said "status": 0 whatever the reply; memcached binary's say 1 for a
    miss (key not found) and more for an error. The capture's GET nokey got a RESP3 null,
    NOSUCHCOMMAND an error reply."""
    recs = [x for x in sniff_file(WIRE_DATA / "golden.pcap", records=True).records if x["proto"] == "redis"]
    status = {(x["op"], x["status"], x["error"]) for x in recs if x["status"]}
    assert status == {("get", 1, False), ("nosuchcommand", 2, True)}
    miss = next(x for x in recs if x["status"] == 1)
    assert miss["resp_bytes"] == 3  # "_\r\n"
    assert sum(x["status"] == 0 and not x["error"] for x in recs) == len(recs) - 2
