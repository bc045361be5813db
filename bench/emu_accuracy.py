"""Interconnect emulator accuracy: target vs measured, orthogonality, zero-knob cost,
and a tbf qdisc on a veth pair (network namespaces) as the kernel bandwidth reference.

    python bench/emu_accuracy.py [--runs 5] [--quick] [--grid] [--no-mpi] [--no-tbf] [--no-pm-qos]

--grid adds both knobs at once, latency {2, 10, 50} us x bandwidth {1, 5} Gbit/s: the
1 MiB bandwidth under each pair, and the added 8 B latency under each pair.

Prints a Markdown table: medians of --runs runs (each run's own value is the
median over its iterations).  Added latency and overhead: the median over runs of
(emulated - zero-knob baseline), the two run back to back.  TCP latency is measured twice:
"tcp" with receivers that sleep in recv, "tcp-poll" with receivers that poll (recv with
MSG_DONTWAIT), as MPI's progress engine and osu_latency over MPI do.  Needs `make -C native/emu build`; tbf needs root.

On an idle virtual machine a blocked receiver's vCPU halts, and waking it costs tens of
microseconds, so a loopback ping-pong takes either ~3 or ~38 us from run to run. As
cyclictest does, the run holds /dev/cpu_dma_latency at 0 (PM QoS: idle CPUs poll instead
of halting) where it can write it; --no-pm-qos measures without.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "native" / "emu" / "build"
SOCK = BUILD / "libperflearn_emu.so"
MPI = BUILD / "libperflearn_emu_mpi.so"
TCP = BUILD / "emu_osu_tcp"
MPIP = BUILD / "emu_osu_mpi"
RATE_UNITS = {"Gbit": 1e9, "Mbit": 1e6}


def parse(text: str) -> dict[int, float]:
    rows = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        size, _mean, med = line.split()
        rows[int(size)] = float(med)
    return rows


def run(cmd, knobs=None, preload=None, ns=None) -> dict[int, float]:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    for k, v in (knobs or {}).items():
        env[f"PERFLEARN_EMU_{k.upper()}"] = v
    full = [str(c) for c in cmd]
    if ns:
        full = ["ip", "netns", "exec", ns, *full]
    out = subprocess.run(full, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(full)}\n{out.stderr[-1500:]}")
    return parse(out.stdout)


def median_of(n, fn):
    vals = [fn() for _ in range(n)]
    return statistics.median(vals), vals


def rate_bps(text: str) -> float:
    for unit, mul in RATE_UNITS.items():
        if text.endswith(unit):
            return float(text[: -len(unit)]) * mul
    raise ValueError(text)


def lat_cmd(kind, size=8, iters=3000):
    base = ["latency", "--min", str(size), "--max", str(size), "--iters", str(iters), "--warmup", "300"]
    # TCP: the two ends pinned to CPUs 0 and 1, as mpirun binds its two ranks to cores: unpinned,
    # the native baseline itself is bimodal by placement (one CPU or two, 2.5 vs 4.7 us in session 5)
    pin = ["--cpus", "0,1"] if (os.cpu_count() or 1) >= 2 else []
    if kind == "mpi":
        return ["mpirun", "-n", "2", MPIP, *base]
    # tcp-poll: receivers poll (recv with MSG_DONTWAIT), as MPI's progress engine does
    return [TCP, *base, *pin] + (["--busy", "1"] if kind == "tcp-poll" else [])


def added_once(kind, L, knobs):
    """Emulated minus zero-knob 8 B latency, the two run back to back, so that the
    machine's drift (the baseline moves by 10-20 % over minutes here) hits both."""
    return run(lat_cmd(kind), knobs, L)[8] - run(lat_cmd(kind), {}, L)[8]


def added_of(n, kind, L, knobs):
    """Median over n runs of ``added_once``."""
    return statistics.median(added_once(kind, L, knobs) for _ in range(n))


def bw_cmd(kind, size=1 << 20, iters=6):
    base = ["bw", "--min", str(size), "--max", str(size), "--large-iters", str(iters), "--iters", str(iters),
            "--warmup", "1"]  # fmt: skip
    return [TCP, *base] if kind == "tcp" else ["mpirun", "-n", "2", MPIP, *base]


class PmQos:
    """Hold /dev/cpu_dma_latency at 0 while open (the kernel drops the request on close)."""

    PATH = "/dev/cpu_dma_latency"

    def __init__(self, wanted: bool):
        self.fd = None
        if wanted:
            try:
                self.fd = os.open(self.PATH, os.O_WRONLY)
                os.write(self.fd, struct.pack("i", 0))
            except OSError:
                self.fd = None

    def describe(self) -> str:
        return "idle CPUs poll (cpu_dma_latency 0)" if self.fd is not None else "idle CPUs may halt (no PM QoS request)"

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def lib(kind):
    return MPI if kind == "mpi" else SOCK


class Tbf:
    """Two network namespaces joined by a veth pair; tbf on the sender's side."""

    A, B, VA, VB = "plemu_a", "plemu_b", "plemu_va", "plemu_vb"
    IA, IB = "10.203.0.1", "10.203.0.2"

    def __enter__(self):
        self.down()
        sh = lambda *c: subprocess.run(c, check=True, capture_output=True)  # noqa: E731
        sh("ip", "netns", "add", self.A)
        sh("ip", "netns", "add", self.B)
        sh("ip", "link", "add", self.VA, "type", "veth", "peer", "name", self.VB)
        sh("ip", "link", "set", self.VA, "netns", self.A)
        sh("ip", "link", "set", self.VB, "netns", self.B)
        for ns, dev, ip in ((self.A, self.VA, self.IA), (self.B, self.VB, self.IB)):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def shape(self, rate_bits: float):
        subprocess.run(["tc", "-n", self.A, "qdisc", "del", "dev", self.VA, "root"], capture_output=True)
        subprocess.run(["tc", "-n", self.A, "qdisc", "add", "dev", self.VA, "root", "tbf", "rate",
                        f"{int(rate_bits)}bit", "burst", "256kb", "latency", "100ms"], check=True)  # fmt: skip

    def bw(self, size=1 << 20, iters=6) -> float:
        port = "47201"
        srv = subprocess.Popen(["ip", "netns", "exec", self.B, str(TCP), "bw", "--min", str(size), "--max", str(size),
                                "--large-iters", str(iters), "--iters", str(iters), "--warmup", "1",
                                "--serve", port], stdout=subprocess.DEVNULL)  # fmt: skip
        try:
            time.sleep(0.2)
            return run([TCP, "bw", "--min", size, "--max", size, "--large-iters", iters, "--iters", iters,
                        "--warmup", "1", "--connect", f"{self.IB}:{port}"], ns=self.A)[size]  # fmt: skip
        finally:
            srv.wait(60)

    def down(self):
        for ns in (self.A, self.B):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __exit__(self, *exc):
        self.down()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a smaller grid")
    ap.add_argument("--grid", action="store_true", help="latency x bandwidth, both knobs at once")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--no-tbf", action="store_true")
    ap.add_argument("--no-tcp", action="store_true")
    ap.add_argument("--no-pm-qos", action="store_true", help="let idle CPUs halt (see the module's docstring)")
    a = ap.parse_args()
    qos = PmQos(not a.no_pm_qos)
    n = a.runs
    kinds = ([] if a.no_tcp else ["tcp", "tcp-poll"]) + ([] if a.no_mpi or not MPI.is_file() or not shutil.which("mpirun") else ["mpi"])
    lats = ["10us", "50us"] if a.quick else ["2us", "10us", "50us"]
    rates = ["1Gbit", "4Gbit"] if a.quick else ["1Gbit", "2Gbit", "5Gbit"]
    use_tbf = not a.no_tbf and os.geteuid() == 0 and shutil.which("tc")
    rows = []
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M")

    for kind in kinds:
        L = lib(kind)
        # zero-knob cost: runs with and without the preload interleaved, so drift hits both
        pairs = [(run(lat_cmd(kind))[8], run(lat_cmd(kind), {}, L)[8]) for _ in range(n)]
        nopre = statistics.median(p[0] for p in pairs)
        base = statistics.median(p[1] for p in pairs)
        # the cost is the median of the pairs' differences: the columns' own medians can come
        # from different minutes of a machine whose speed drifts
        rows.append((kind, "zero-knob cost, 8 B latency", f"{nopre:.3f} us (no preload)", f"{base:.3f} us",
                     f"{statistics.median(b - a for a, b in pairs) * 1000:+.0f} ns"))  # fmt: skip
        for lat in lats:
            target = int(lat[:-2])
            # the native reference: the same program, no emulator, each end waiting L (the emulator's own
            # calibrated wait) before each send, so every message comes L later.  What the machine
            # itself adds to a message that comes later (a peer idle longer wakes slower on a VM) is in
            # it too, so (emulated - reference) is the emulator's own error
            trip = []
            for _ in range(n):
                b = run(lat_cmd(kind), {}, L)[8]
                trip.append((run(lat_cmd(kind), {"latency": lat}, L)[8] - b,
                             run(lat_cmd(kind) + ["--delay-ns", str(target * 1000)])[8] - b))
            added = statistics.median(t[0] for t in trip)
            ref = statistics.median(t[1] for t in trip)
            rows.append((kind, f"latency +{lat}, 8 B", f"+{target:.3f} us", f"+{added:.3f} us",
                         f"{(added - target) / target * 100:+.2f}%"))  # fmt: skip
            rows.append((kind, f"native reference: the program waits {lat} before each send, no emulator",
                         f"+{target:.3f} us", f"+{ref:.3f} us", f"{(ref - target) / target * 100:+.2f}%"))  # fmt: skip
            own = statistics.median(t[0] - t[1] for t in trip)
            rows.append((kind, f"latency +{lat} minus the native reference (the emulator's own error)", "0 ns",
                         f"{own * 1000:+.0f} ns", f"{own / target * 100:+.2f}%"))  # fmt: skip
        if kind == "tcp-poll":
            continue  # bandwidth does not depend on how the receiver waits: measured under tcp
        pairs = [(run(bw_cmd(kind, iters=20))[1 << 20], run(bw_cmd(kind, iters=20), {}, L)[1 << 20]) for _ in range(n)]
        nb = statistics.median(p[0] for p in pairs)
        bwbase = statistics.median(p[1] for p in pairs)
        rows.append((kind, "unlimited bandwidth, 1 MiB", "-", f"{bwbase:.0f} MB/s", "-"))
        for rate in rates:
            target = rate_bps(rate) / 8e6
            m, _ = median_of(n, lambda: run(bw_cmd(kind), {"bandwidth": rate}, L)[1 << 20])
            rows.append((kind, f"bandwidth {rate}, 1 MiB", f"{target:.1f} MB/s", f"{m:.1f} MB/s",
                         f"{(m - target) / target * 100:+.2f}%"))  # fmt: skip
        m64, _ = median_of(n, lambda: run(bw_cmd(kind, 65536, 20), {"bandwidth": "1Gbit"}, L)[65536])
        rows.append((kind, "bandwidth 1Gbit, 64 KiB", "125.0 MB/s", f"{m64:.1f} MB/s", f"{(m64 - 125) / 125 * 100:+.2f}%"))
        if a.grid:  # both knobs at once: each must hold as if the other were off
            for rate in ("1Gbit", "5Gbit"):
                t = rate_bps(rate) / 8e6
                for lat in lats:
                    both = {"bandwidth": rate, "latency": lat}
                    m, _ = median_of(n, lambda: run(bw_cmd(kind), both, L)[1 << 20])
                    rows.append((kind, f"grid: bandwidth {rate} + latency {lat}, 1 MiB", f"{t:.1f} MB/s",
                                 f"{m:.1f} MB/s", f"{(m - t) / t * 100:+.2f}%"))  # fmt: skip
                    target = int(lat[:-2])
                    added = added_of(n, kind, L, both)
                    rows.append((kind, f"grid: latency {lat} + bandwidth {rate}, 8 B", f"+{target:.3f} us",
                                 f"+{added:.3f} us", f"{(added - target) / target * 100:+.2f}%"))  # fmt: skip
        # orthogonality
        r = rates[0]
        t = rate_bps(r) / 8e6
        m, _ = median_of(n, lambda: run(bw_cmd(kind), {"bandwidth": r, "latency": "50us"}, L)[1 << 20])
        rows.append((kind, f"bandwidth {r} + latency 50us, 1 MiB", f"{t:.1f} MB/s", f"{m:.1f} MB/s",
                     f"{(m - t) / t * 100:+.2f}%"))  # fmt: skip
        added = added_of(n, kind, L, {"bandwidth": "1Gbit"})
        rows.append((kind, "latency 8 B with bandwidth 1Gbit", f"{base:.3f} us", f"{base + added:.3f} us",
                     f"{added * 1000:+.0f} ns"))  # fmt: skip
        # overhead as LogGP o: paid once per message by the sender, never overlapped:
        # a ping-pong's half round trip grows by o, and a window of 64 small sends
        # grows by 64 o (the time per message grows by o)
        added = added_of(n, kind, L, {"overhead": "10us"})
        rows.append((kind, "overhead 10us: added half round trip, 8 B", "+10.000 us", f"+{added:.3f} us",
                     f"{(added - 10) / 10 * 100:+.2f}%"))  # fmt: skip
        w0, _ = median_of(n, lambda: run(bw_cmd(kind, 64, 50), {}, L)[64])
        w1, _ = median_of(n, lambda: run(bw_cmd(kind, 64, 50), {"overhead": "10us"}, L)[64])
        added = 64 / w1 - 64 / w0  # MB/s -> us per 64-byte message
        rows.append((kind, "overhead 10us: added time per message, window of 64 x 64 B", "+10.000 us",
                     f"+{added:.3f} us", f"{(added - 10) / 10 * 100:+.2f}%"))  # fmt: skip
        rows.append((kind, "zero-knob cost, 1 MiB bandwidth", f"{nb:.0f} MB/s (no preload)", f"{bwbase:.0f} MB/s",
                     f"{(statistics.median(b / a for a, b in pairs) - 1) * 100:+.2f}%"))  # fmt: skip

    if use_tbf:
        with Tbf() as tbf:
            for rate in rates:
                tbf.shape(rate_bps(rate))
                target = rate_bps(rate) / 8e6
                m, _ = median_of(n, tbf.bw)
                rows.append(("tbf/veth", f"bandwidth {rate}, 1 MiB (kernel reference)", f"{target:.1f} MB/s",
                             f"{m:.1f} MB/s", f"{(m - target) / target * 100:+.2f}%"))  # fmt: skip

    qos.close()
    print(f"Interconnect emulator, medians of {n} runs; started {started}, load average {load:.2f} at start and "
          f"{os.getloadavg()[0]:.2f} at the end (2 cores, shared with other jobs); {qos.describe()}.")
    print(f"Reproduce: python bench/emu_accuracy.py --runs {n}{' --quick' if a.quick else ''}"
          f"{' --no-pm-qos' if a.no_pm_qos else ''}\n")
    print("| layer | setting | target | measured | error |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
