"""Sampling overhead on the workload: a fixed CPU-bound job pinned to one CPU, timed with
and without interval sampling (system + process signals), alternating, medians.

    python bench/detect_sampling_overhead.py [--runs 7] [--interval 1s]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from perflearn.experiment.spec import parse_spec
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


if __name__ == "__main__":
    main()
