"""Sampling overhead on the workload: a fixed CPU-bound job pinned to one CPU, timed with
and without interval sampling (system + process signals), alternating, medians.

    python bench/detect_sampling_overhead.py [--runs 7] [--interval 1s]

It also measures what one sampling tick costs directly (the CPU time of reading the
system's and a workload's signals, the workload being a process with a setsid'ed child),
as a share of one CPU at the interval: an upper bound of the overhead that does not
drown in the run-to-run noise of a VM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perflearn.experiment.sampling import Sampler, SamplingSpec
from perflearn.experiment.spec import parse_spec
from perflearn.experiment.units import parse_duration
from perflearn.runner.runner import run_experiment
from perflearn.store import open_store

SPEC = """
[experiment]
name = "overhead-{mode}"
[workload]
command = ["taskset", "-c", "0", "python3", "-c", "s = 0\\nfor i in range(40_000_000): s += i"]
[knobs.i]
range = [1, {runs}]
step = 1
[metrics.wall]
source = "time"
{sampling}
"""


def times(mode: str, runs: int, interval: str, directory: Path) -> list[float]:
    sampling = f'[sampling]\ninterval = "{interval}"\n' if mode == "sampled" else ""
    spec = parse_spec(SPEC.format(mode=mode, runs=runs, sampling=sampling), directory / f"{mode}.toml")
    with open_store(":memory:") as store:
        run_experiment(spec, store)
        return store.dataset(spec.name).frame["wall"].tolist()


def tick_cost(ticks: int = 200) -> tuple[float, int]:
    """CPU seconds of one sampling tick (median over ``ticks``) and the number of
    processes on the node while measuring."""
    child = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n"
             "time.sleep(60)\n")
    workload = subprocess.Popen([sys.executable, "-c", child], process_group=0)
    try:
        time.sleep(0.3)
        sampler = Sampler(SamplingSpec(1.0))
        costs = []
        for _ in range(ticks):
            start = time.process_time()
            sampler._read(workload.pid)
            costs.append(time.process_time() - start)
        processes = sum(1 for entry in os.scandir("/proc") if entry.name.isdigit())
        return statistics.median(costs), processes
    finally:
        os.killpg(workload.pid, 9)
        workload.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--interval", default="1s")
    args = parser.parse_args()
    plain, sampled = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):  # alternate, so that drift hits both alike
            plain += times("plain", 1, args.interval, Path(tmp))
            sampled += times("sampled", 1, args.interval, Path(tmp))
    a, b = statistics.median(plain), statistics.median(sampled)
    print(f"| sampling | median workload time (s) | runs |\n|---|---|---|")
    print(f"| none | {a:.3f} | {len(plain)} |\n| every {args.interval} (system + process) | {b:.3f} | {len(sampled)} |")
    print(f"\noverhead: {(b / a - 1) * 100:+.2f}%")
    cost, processes = tick_cost()
    interval = parse_duration(args.interval)
    print(f"\none tick (system + process signals, {processes} processes on the node): {cost * 1e3:.2f} ms of CPU, "
          f"{cost / interval * 100:.2f}% of one CPU at {args.interval}")


if __name__ == "__main__":
    main()
