"""LAMMPS Lennard-Jones melt (Debian's lammps, Open MPI, 2 ranks) vs emulated
bandwidth and latency, with perflearn's PMPI shim.

    python examples/emulate-lammps/run.py [--steps 500] [--out DIR]

Writes results.csv and lammps_sensitivity.png.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
from pathlib import Path

from perflearn.emulate import environment

HERE = Path(__file__).parent
LATENCIES = ["0", "5us", "20us", "100us"]
BANDWIDTHS = ["0", "10Gbit", "1Gbit", "100Mbit"]
IN = """units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 10 0 10 0 10
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify every 20 delay 0 check no
fix 1 all nve
thermo 500
run {steps}
"""


def run(steps: int, latency: str, bandwidth: str, workdir: Path, reps: int = 3) -> float:
    """Median loop time of `reps` runs."""
    times = sorted(run_once(steps, latency, bandwidth, workdir) for _ in range(reps))
    return times[len(times) // 2]


def run_once(steps: int, latency: str, bandwidth: str, workdir: Path) -> float:
    env = {**os.environ, **environment(latency=latency, bandwidth=bandwidth, layer="mpi"),
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1"}  # fmt: skip
    (workdir / "in.melt").write_text(IN.format(steps=steps))
    out = subprocess.run(["mpirun", "-n", "2", "lmp", "-in", "in.melt", "-log", "none"], cwd=workdir, env=env,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    m = re.search(r"Loop time of ([0-9.eE+-]+)", out)
    assert m, out[-500:]
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--out", type=Path, default=HERE)
    a = ap.parse_args()
    rows = []
    for lat in LATENCIES:
        rows.append({"latency": lat, "bandwidth": "0", "loop_s": run(a.steps, lat, "0", a.out)})
        print(rows[-1], flush=True)
    for bw in BANDWIDTHS[1:]:
        rows.append({"latency": "0", "bandwidth": bw, "loop_s": run(a.steps, "0", bw, a.out)})
        print(rows[-1], flush=True)
    (a.out / "in.melt").unlink(missing_ok=True)
    with open(a.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    lat = [r for r in rows if r["bandwidth"] == "0"]
    axes[0].plot([r["latency"] for r in lat], [r["loop_s"] for r in lat], marker="o")
    axes[0].set_xlabel("added latency L")
    bw = [rows[0]] + [r for r in rows if r["bandwidth"] != "0"]
    axes[1].plot([r["bandwidth"] if r["bandwidth"] != "0" else "native" for r in bw], [r["loop_s"] for r in bw],
                 marker="o")  # fmt: skip
    axes[1].set_xlabel("link bandwidth")
    for ax in axes:
        ax.set_ylabel(f"LAMMPS LJ melt loop time, {a.steps} steps (s)")
        ax.grid(alpha=0.3)
    fig.suptitle("LAMMPS (2 MPI ranks) under perflearn emulate --mpi")
    fig.tight_layout()
    fig.savefig(a.out / "lammps_sensitivity.png", dpi=110)


if __name__ == "__main__":
    main()
