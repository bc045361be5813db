"""Shared helpers for the emulator tests: the built native pieces."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[2] / "native" / "emu" / "build"


def _need(name: str) -> Path:
    path = BUILD / name
    if not path.is_file():
        pytest.skip(f"{name} not built (make -C native/emu build)")
    return path


@pytest.fixture
def sock_lib() -> Path:
    return _need("libperflearn_emu.so")


@pytest.fixture
def osu_tcp() -> Path:
    return _need("emu_osu_tcp")


@pytest.fixture
def mpi_bits() -> tuple[Path, Path]:
    if not shutil.which("mpirun"):
        pytest.skip("no MPI installed (make -C native/emu deps)")
    return _need("libperflearn_emu_mpi.so"), _need("emu_osu_mpi")


@pytest.fixture
def mpi_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_MCA_mpi_yield_when_idle="1")  # busy polling starves the other rank on 2 shared cores
    return env


def _table(text: str) -> dict[int, tuple[float, float]]:
    """size -> (mean, median) from the OSU-style programs' output."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        size, mean, med = line.split()
        rows[int(size)] = (float(mean), float(med))
    return rows


@pytest.fixture
def table():
    return _table
