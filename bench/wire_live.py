#!/usr/bin/env python3
"""Live capture and load generator on loopback: perflearn-load drives memcached (binary
protocol) at several target rates while perflearn-sniff captures on lo.

For each rate (median of RUNS runs) it reports: the rate the generator held (and its
error against the target), the send-time error p99, kernel drops seen by the sniffer,
whether the sniffer's request count equals the generator's, and both views of latency
(client: from intended send time; wire: request's last byte to response's last byte).

Placement: by default everything shares both cores. --others-cpus 0 pins memcached, the
sniffer and this script to CPU 0; --load-cpus 1 pins the generator's send threads to CPU 1;
--realtime P runs them SCHED_FIFO; --pm-qos makes the generator hold the CPUs' wake-up
latency at 0 (idle vCPUs poll instead of halting); the heading states what was used.

Usage: sudo python3 bench/wire_live.py [--rates 10000,50000,100000] [--runs 3] [--seconds 5]
           [--others-cpus 0] [--load-cpus 1] [--realtime 10] [--spin-us 100] [--pm-qos]
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


def one(rate: float, seconds: float, port: int, a: argparse.Namespace) -> dict:
    with LiveSniffer("lo", bpf=f"tcp port {port}", ports=[port], interval=1.0) as sniffer:
        load = run_load(f"127.0.0.1:{port}", "memcache-binary", rate=rate, duration=seconds, connections=32,
                        threads=a.threads, cpus=a.load_cpus, realtime=a.realtime, spin_us=a.spin_us, pm_qos=a.pm_qos,
                        extra=["--keys", "100000", "--set-ratio", "0.1", "--interval", "1"])
    w, c = sniffer.result.summary, load.summary
    return {
        "target": rate,
        "held": c["sent"] / seconds,
        "rate_err_pct": 100.0 * (c["sent"] - c["target_requests"]) / c["target_requests"],
        "send_err_p50": c["send_err_p50_us"],
        "send_err_p99": c["send_err_p99_us"],
        # The generator's floor per send: on loopback write(2) delivers the request.
        "write_p50": c["write_p50_us"], "write_p99": c["write_p99_us"],
        # Sends later than 20 µs, by cause, per thousand sends.
        "late_wakeup": 1000.0 * c["send_late"]["late_wakeup"] / max(c["sent"], 1),
        "busy": 1000.0 * c["send_late"]["busy"] / max(c["sent"], 1),
        "behind_writes": 1000.0 * c["send_late"]["behind_writes"] / max(c["sent"], 1),
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
    ap.add_argument("--threads", type=int, default=2, help="generator send threads")
    ap.add_argument("--others-cpus", help="pin memcached, the sniffer and this script here, e.g. 0")
    ap.add_argument("--load-cpus", help="pin the generator's send threads here, e.g. 1")
    ap.add_argument("--realtime", type=int, help="SCHED_FIFO priority of the send threads")
    ap.add_argument("--spin-us", type=float, help="generator spin margin (µs)")
    ap.add_argument("--pm-qos", action="store_true", help="generator holds CPU wake-up latency at 0 (perflearn-load --pm-qos)")
    a = ap.parse_args()
    if a.others_cpus:
        # Inherited by memcached and the sniffer; the generator's send threads re-pin.
        os.sched_setaffinity(0, {int(c) for c in a.others_cpus.split(",")})
    port = free_port()
    mc = start_memcached(port)
    rows = []
    try:
        for rate in [float(r) for r in a.rates.split(",")]:
            runs = [one(rate, a.seconds, port, a) for _ in range(a.runs)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            med["count_match"] = f"{sum(r['count_match'] for r in runs)}/{len(runs)}"
            rows.append(med)
    finally:
        mc.terminate()
        mc.wait()
    load = open("/proc/loadavg").read().split()[:3]
    where = (f"memcached and perflearn-sniff on CPU {a.others_cpus}" if a.others_cpus
             else "memcached and perflearn-sniff on any CPU")
    gen = (f"send threads pinned to CPU {a.load_cpus}" if a.load_cpus else "send threads not pinned")
    gen += f", SCHED_FIFO {a.realtime}" if a.realtime else ", SCHED_OTHER"
    gen += f", spin {a.spin_us:g} µs" if a.spin_us is not None else ", default spin"
    gen += ", PM QoS 0 µs (idle CPUs poll)" if a.pm_qos else ""
    print(f"memcached -t 2, perflearn-load {a.threads} threads x 32 connections (Poisson; {gen}), {where}; "
          f"{a.seconds:g} s per run, median of {a.runs} runs; load average at end {' '.join(load)}.\n")
    print("| target req/s | held req/s | rate error | send err p50 µs | send err p99 µs | write(2) p50 / p99 µs |"
          " late >20 µs per 1000: wake-up / busy / behind writes | kernel drops | sniffer count = client count | client p50 µs | wire p50 µs | client p99 µs | wire p99 µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']:.0f} | {r['held']:.0f} | {r['rate_err_pct']:+.2f}% | {r['send_err_p50']:.1f} | "
              f"{r['send_err_p99']:.1f} | {r['write_p50']:.1f} / {r['write_p99']:.1f} | {r['late_wakeup']:.1f} / {r['busy']:.1f} / {r['behind_writes']:.1f} | "
              f"{r['drops']:.0f} | {r['count_match']} | {r['client_p50']:.1f} | {r['wire_p50']:.1f} | "
              f"{r['client_p99']:.1f} | {r['wire_p99']:.1f} |")
    opts = "".join(f" --{k.replace('_', '-')} {v}" for k, v in
                   [("threads", a.threads), ("others_cpus", a.others_cpus), ("load_cpus", a.load_cpus),
                    ("realtime", a.realtime), ("spin_us", a.spin_us)] if v is not None)
    opts += " --pm-qos" if a.pm_qos else ""
    print(f"\nReproduce: sudo python3 bench/wire_live.py --rates {a.rates} --runs {a.runs} --seconds {a.seconds:g}{opts}")


if __name__ == "__main__":
    main()
