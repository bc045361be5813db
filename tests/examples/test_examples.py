"""Every example in examples/ runs here, for real, and measures what it claims."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.experiment import cgroups
from perflearn.store import open_store


pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def run_example(name: str, store_path, *values: str):
    """The example's spec run and stored; ``values`` (``--values`` NAME=V1,V2) narrow a knob
    where the full grid would only repeat what the rest shows (the suite's time)."""
    narrowed = [arg for v in values for arg in ("--values", v)]
    result = CliRunner().invoke(app, ["run", str(REPO / "examples" / name / "spec.toml"), "--store", str(store_path),
                                      "-q", *narrowed])
    assert result.exit_code == 0, result.output
    with open_store(store_path) as store:
        experiment = store.experiments()["name"].iloc[0]
        return store.dataset(experiment)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (make deps)")
def test_fio_sweep(store_path):
    ds = run_example("fio-sweep", store_path, "bs=4096,1048576")
    ok = ds.ok()
    assert len(ok) == 16  # 2 of the 3 block sizes x 2 patterns x 2 depths x 2 repeats, none failed
    assert (ok["iops"] > 0).all() and (ok["latency_p99"] >= 0).all()
    # bandwidth / IOPS must give back the block size: the JSON paths read the right fields
    assert ((ok["bytes_per_io"] - ok["bs"]).abs() / ok["bs"] < 1e-3).all()
    assert ok["instructions"].isna().all() or (ok["instructions"] > 0).all()  # NULL without a PMU, never 0


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (make deps)")
def test_iperf3_affinity_matrix(store_path):
    ds = run_example("iperf3-affinity", store_path)
    ok = ds.ok()
    assert len(ok) == 12 and set(zip(ok["server_cpu"], ok["client_cpu"])) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert (ok["throughput"] > 0.1).all()
    # loopback receive bytes counted by /proc cover at least what iperf3 says it moved
    assert (ok["lo_rx_bytes"] * 8 >= ok["throughput"] * 1e9 * 0.9).all()


@pytest.mark.skipif(shutil.which("zstd") is None or cgroups.version() is None, reason="needs zstd and cgroups")
def test_zstd_quota(store_path):
    ds = run_example("zstd-quota", store_path, "quota=0.5,2.0")
    ok = ds.ok()
    assert len(ok) == 24  # 3 levels x 2 thread counts x 2 of the 3 quotas x 2 repeats
    # compression is deterministic: the same level gives the same size under any quota or thread count
    assert (ok.groupby("level")["compressed"].nunique() == 1).all()
    # half a CPU of quota makes a CPU-bound run take at least ~2x its CPU time in wall time
    slow = ok[(ok["level"] == 9) & (ok["quota"] == 0.5)]
    assert (slow["wall"] >= 1.6 * slow["cpu_user"]).all()


def _wire_built() -> bool:
    return (REPO / "native" / "wire" / "target" / "release" / "perflearn-sniff").exists()


@pytest.mark.skipif(shutil.which("memcached") is None or not _wire_built(), reason="needs memcached and native/wire")
def test_memcached_wire(store_path):
    ds = run_example("memcached-wire", store_path)
    ok = ds.ok()
    assert len(ok) == 4
    assert (ok["wire_rps"] > 0.5 * ok["rate"]).all()  # the capture saw the offered load
    assert (ok["wire_p99"] >= ok["wire_p95"]).all() and (ok["wire_p95"] > 0).all()
    assert (ok["client_p99"] > 0).all()
    with open_store(store_path) as store:
        samples = store.samples("memcached-wire")
    assert {"wire.p99_us", "wire.rps"} <= set(samples["metric"])
    assert samples["t"].between(-1, 60).all()  # seconds since the run started, not wall-clock time


@pytest.mark.parametrize("name", ["memcached-profile", "detect", "memcached-knee", "redis-knee"])
def test_longer_examples_validate(name):
    """Examples too long for the suite are still checked against the spec reader and this machine."""
    result = CliRunner().invoke(app, ["validate", str(REPO / "examples" / name / "spec.toml")])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output
