"""Runner overhead per run (plan, spawn, collect, store) beyond the workload itself.

A `true` workload over 500 runs, timed through perflearn's runner (into a DuckDB
file, one transaction per run), against hyperfine running `true` 500 times in
the same session. Prints a Markdown table of medians over --repeats sessions.

    python bench/runner_overhead.py [--runs 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perflearn.experiment.spec import parse_spec
from perflearn.runner.runner import run_experiment
from perflearn.store import open_store

SPEC = """
[experiment]
name = "overhead"
[workload]
command = "true {{i}}"
[knobs.i]
range = [1, {runs}]
step = 1
[metrics.wall]
source = "time"
[metrics.exit]
source = "exit"
"""


def perflearn_per_run(runs: int, directory: Path) -> float:
    spec = parse_spec(SPEC.format(runs=runs), directory / "overhead.toml")
    with open_store(directory / f"bench-{time.time_ns()}.duckdb") as store:
        started = time.perf_counter()
        outcome = run_experiment(spec, store)
        elapsed = time.perf_counter() - started
    assert outcome.by_status == {"ok": runs}, outcome.by_status
    return elapsed / runs


def hyperfine_per_run(runs: int, directory: Path) -> float:
    out = directory / "hyperfine.json"
    subprocess.run(["hyperfine", "-N", "--runs", str(runs), "--export-json", str(out), "true"],
                   check=True, capture_output=True)
    return json.loads(out.read_text())["results"][0]["mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            ours.append(perflearn_per_run(args.runs, Path(tmp)))
            theirs.append(hyperfine_per_run(args.runs, Path(tmp)))
    ms = lambda xs: statistics.median(xs) * 1e3
    overhead = [a - b for a, b in zip(ours, theirs)]
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; {args.runs} runs x {args.repeats} sessions\n")
    print("| measure | median per run (ms) | min | max |")
    print("|---|---|---|---|")
    print(f"| perflearn run (`true`, stored) | {ms(ours):.2f} | {min(ours)*1e3:.2f} | {max(ours)*1e3:.2f} |")
    print(f"| hyperfine -N `true` (reference) | {ms(theirs):.2f} | {min(theirs)*1e3:.2f} | {max(theirs)*1e3:.2f} |")
    print(f"| **runner overhead** (difference) | **{ms(overhead):.2f}** | {min(overhead)*1e3:.2f} | {max(overhead)*1e3:.2f} |")


if __name__ == "__main__":
    main()
