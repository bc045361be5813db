"""The PMPI shim under `mpirun -n 2` (Open MPI from Debian, as root)."""

from __future__ import annotations

import subprocess

import pytest



def mpirun(bits, env, args, **knobs):
    lib, prog = bits
    env = dict(env, LD_PRELOAD=str(lib))
    for key, value in knobs.items():
        env[f"PERFLEARN_EMU_{key.upper()}"] = value
    proc = subprocess.run(["mpirun", "-n", "2", str(prog), *args], env=env, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [{}, {"latency": "20us"}, {"bandwidth": "2Gbit", "overhead": "1us"}])
def test_mpi_bytes_never_change(mpi_bits, mpi_env, knobs):
    assert "mpi ok" in mpirun(mpi_bits, mpi_env, ["check"], **knobs).stdout


@pytest.mark.slow
def test_mpi_latency_knob(table, mpi_bits, mpi_env):
    args = ["latency", "--min", "8", "--max", "8", "--iters", "3000"]
    base = min(table(mpirun(mpi_bits, mpi_env, args).stdout)[8][1] for _ in range(2))
    added = min(table(mpirun(mpi_bits, mpi_env, args, latency="50us").stdout)[8][1] for _ in range(2)) - base
    assert 40 <= added <= 80, added


@pytest.mark.slow
def test_mpi_bandwidth_knob_and_overlap(table, mpi_bits, mpi_env):
    args = ["bw", "--min", "262144", "--max", "262144", "--large-iters", "8", "--warmup", "1"]
    mbps = table(mpirun(mpi_bits, mpi_env, args, bandwidth="1Gbit", latency="100us").stdout)[262144][1]
    assert 60 <= mbps <= 130, mbps  # above the target would be a bug; below, a busy machine


def test_mpi_bad_value_disables(mpi_bits, mpi_env):
    proc = mpirun(mpi_bits, mpi_env, ["check"], bandwidth="-1Gbit")
    assert "mpi ok" in proc.stdout
    assert "PERFLEARN_EMU_BANDWIDTH=-1Gbit" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [{}, {"latency": "20us"}, {"bandwidth": "2Gbit", "overhead": "1us", "latency": "5us"}])
def test_mpi_thread_multiple_no_deadlock_bytes_intact(mpi_bits, mpi_env, knobs):
    """Four threads a rank ping-pong at once under MPI_THREAD_MULTIPLE (Send/Recv one way,
    Isend/Irecv + Wait back, 2 B to 32 KiB, each message checksummed): no deadlock (the
    run's timeout), no byte changed, with every knob set or none."""
    out = mpirun(mpi_bits, mpi_env, ["threads"], **knobs).stdout
    if "unsupported" in out:
        pytest.skip(f"this MPI gives no MPI_THREAD_MULTIPLE: {out.strip()}")
    assert "threads ok" in out, out
