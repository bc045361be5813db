"""What one more thread costs a single-threaded TCP ping-pong, and what the socket shim's
delay-line thread costs it with a shared or an own descriptor table (BENCHMARKS.md,
session 20).

Each round runs, back to back, the native reference (each end waits L itself before each
send, no emulator) alone, with one idle thread per end sharing the descriptor table, with
one that has a table of its own (`emu_osu_tcp --idle-thread shared|own`), and the
emulator at latency L with its delay-line thread on either table
(`PERFLEARN_EMU_HELPER_TABLE`). Printed: per receiver kind and L, the median over rounds
of each variant's 8-byte half round trip minus the plain reference's in the same round,
and in how many rounds it was higher.

    python bench/emu_idle_thread.py [--rounds 15]   # needs `make -C native/emu build`; root for PM QoS
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emu_accuracy as ea  # noqa: E402  (its neighbour in bench/)

ITERS = 20000


def half_rtt(kind: str, L_ns: int, *, idle: str | None = None, table: str | None = None) -> float:
    """Median 8-byte half round trip in ns: the native reference (table None), or the
    emulator at latency L with its delay-line thread on ``table``."""
    cmd = ea.lat_cmd(kind, iters=ITERS)
    if table is None:
        extra = ["--delay-ns", str(L_ns)] + (["--idle-thread", idle] if idle else [])
        return ea.run(cmd + extra)[8] * 1000
    return ea.run(cmd, {"latency": f"{L_ns}ns", "helper_table": table}, ea.lib("tcp"))[8] * 1000


VARIANTS = {
    "idle thread, shared table": dict(idle="shared"),
    "idle thread, own table": dict(idle="own"),
    "emulator, shared table": dict(table="shared"),
    "emulator, own table (default)": dict(table="own"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--latency-ns", default="2000,10000")
    args = ap.parse_args()
    qos = ea.PmQos(True)
    print(f"# {qos.describe()}; {args.rounds} rounds, {ITERS} ping-pongs of 8 B a run")
    print("| receivers | L | variant | minus the plain native reference (median) | higher in |")
    print("|---|---|---|---|---|")
    try:
        for kind in ("tcp", "tcp-poll"):
            for L in (int(v) for v in args.latency_ns.split(",")):
                diffs: dict[str, list[float]] = {name: [] for name in VARIANTS}
                for _ in range(args.rounds):  # interleaved, so the machine's drift hits every variant
                    plain = half_rtt(kind, L)
                    for name, how in VARIANTS.items():
                        diffs[name].append(half_rtt(kind, L, **how) - plain)
                for name, d in diffs.items():
                    higher = sum(v > 0 for v in d)
                    print(f"| {'polling' if kind == 'tcp-poll' else 'sleeping'} | {L / 1000:g} us | {name} | "
                          f"{statistics.median(d):+.0f} ns | {higher} of {len(d)} |", flush=True)
    finally:
        qos.close()


if __name__ == "__main__":
    main()
