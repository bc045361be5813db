"""How often a steady load looks like a rise to Heimdall's in-interval reaction.

    python bench/manage_ticks.py [--seconds 25] [--tick-ms 20] CORES,LEVEL,RATE ...

For each CORES,LEVEL,RATE (e.g. 2,0.5,76000): memcached in the manager's cgroups at that
configuration, perflearn-load at a constant RATE (the live script's request mix), the
sniffer's 20 ms ticks. Per 1-s interval (the first two skipped: warm-up), the reaction's
threshold from the previous interval (its rate and tick dispersion, as
``Heimdall.react``): how many intervals had one tick over it, and how many two in a
row. Needs root (cgroups, capture) and the native tools (`make native`).
"""

from __future__ import annotations

import argparse

import numpy as np

from perflearn.manage.config import ConfigSpace, Configuration
from perflearn.manage.live import LiveService
from perflearn.manage.heimdall import rise_threshold, tick_dispersion
from perflearn.runner.process import free_port


def measure(cores: int, level: float, rate: float, seconds: int, tick_s: float) -> list[tuple[float, list[float]]]:
    port = free_port()
    load = ["--server", f"127.0.0.1:{port}", "--protocol", "memcache-binary", "--rate", f"{rate:g}",
            "--duration", str(seconds), "--preload", "--connections", "8", "--drain", "1", "--value-size", "fixed:4096"]
    live = LiveService(f"memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0", port, ConfigSpace.make(2, 4), 1.0,
                       "memcache-binary", load, tick_s=tick_s)
    intervals = []
    try:
        live.apply(Configuration(cores, level))
        for i in range(seconds - 3):
            ticks: list[float] = []
            seen = live.observe(float(i), react=ticks.append)
            if seen is not None:
                intervals.append((seen.rps, ticks))
    finally:
        live.close()
    return intervals


def false_rises(intervals, tick_s: float) -> tuple[int, int, int, np.ndarray]:
    dispersion, previous, one, two, counts = 1.0, None, 0, 0, []
    for rps, ticks in intervals[2:]:
        c = np.asarray(ticks) * tick_s
        counts.extend(c)
        if previous is not None:
            over = c > rise_threshold(previous * tick_s, dispersion)
            one += bool(over.any())
            two += bool((over[1:] & over[:-1]).any())
        dispersion, previous = tick_dispersion(list(c), dispersion), rps
    return len(intervals) - 3, one, two, np.asarray(counts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("points", nargs="+", help="CORES,LEVEL,RATE")
    ap.add_argument("--seconds", type=int, default=25)
    ap.add_argument("--tick-ms", type=float, default=20.0)
    a = ap.parse_args()
    tick_s = a.tick_ms / 1e3
    print("| cores | level | req/s | intervals | one tick over | two in a row | tick variance/mean | largest tick / mean |")
    print("|---|---|---|---|---|---|---|---|")
    for point in a.points:
        cores, level, rate = point.split(",")
        n, one, two, c = false_rises(measure(int(cores), float(level), float(rate), a.seconds, tick_s), tick_s)
        print(f"| {cores} | {level} | {float(rate):.0f} | {n} | {one} | {two} | {c.var() / c.mean():.2f} | {c.max() / c.mean():.2f} |")


if __name__ == "__main__":
    main()
