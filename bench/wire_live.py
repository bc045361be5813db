#!/usr/bin/env python3
"""Live capture and load generator on loopback: perflearn-load drives memcached (binary
protocol) at several target rates while perflearn-sniff captures on lo.

For each rate (median of RUNS runs) it reports: the rate the generator held (and its
error against the target), the send-time error p99, kernel drops seen by the sniffer,
whether the sniffer's request count equals the generator's, and both views of latency
(client: from intended send time; wire: request's last byte to response's last byte).

Usage: sudo python3 bench/wire_live.py [--rates 10000,50000,100000] [--runs 3] [--seconds 5]
Needs root (capture), memcached, and make -C native/wire build.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from perflearn.wire import LiveSniffer, run_load  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_memcached(port: int) -> subprocess.Popen:
    cmd = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "256", "-c", "4096"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    proc = subprocess.Popen(cmd)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("memcached did not start")


def one(rate: float, seconds: float, port: int) -> dict:
    with LiveSniffer("lo", bpf=f"tcp port {port}", ports=[port], interval=1.0) as sniffer:
        load = run_load(f"127.0.0.1:{port}", "memcache-binary", rate=rate, duration=seconds, connections=32,
                        threads=2, extra=["--keys", "100000", "--set-ratio", "0.1", "--interval", "1"])
    w, c = sniffer.result.summary, load.summary
    return {
        "target": rate,
        "held": c["sent"] / seconds,
        "rate_err_pct": 100.0 * (c["sent"] - c["target_requests"]) / c["target_requests"],
        "send_err_p99": c["send_err_p99_us"],
        "drops": w["kernel"]["dropped"],
        "count_match": int(w["requests"] == c["completed"]),
        "client_p50": c["p50_us"], "client_p99": c["p99_us"],
        "wire_p50": w["p50_us"], "wire_p99": w["p99_us"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="10000,50000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    port = free_port()
    mc = start_memcached(port)
    rows = []
    try:
        for rate in [float(r) for r in a.rates.split(",")]:
            runs = [one(rate, a.seconds, port) for _ in range(a.runs)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            med["count_match"] = f"{sum(r['count_match'] for r in runs)}/{len(runs)}"
            rows.append(med)
    finally:
        mc.terminate()
        mc.wait()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"memcached -t 2, perflearn-load 2 threads x 32 connections (Poisson), perflearn-sniff on lo; "
          f"{a.seconds:g} s per run, median of {a.runs} runs; load average at end {' '.join(load)}.\n")
    print("| target req/s | held req/s | rate error | send err p99 µs | kernel drops | sniffer count = client count |"
          " client p50 µs | wire p50 µs | client p99 µs | wire p99 µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']:.0f} | {r['held']:.0f} | {r['rate_err_pct']:+.2f}% | {r['send_err_p99']:.1f} | "
              f"{r['drops']:.0f} | {r['count_match']} | {r['client_p50']:.1f} | {r['wire_p50']:.1f} | "
              f"{r['client_p99']:.1f} | {r['wire_p99']:.1f} |")
    print(f"\nReproduce: sudo python3 bench/wire_live.py --rates {a.rates} --runs {a.runs} --seconds {a.seconds:g}")


if __name__ == "__main__":
    main()
