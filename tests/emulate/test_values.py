"""The Python face: value parsing, environment(), locating the library."""

from __future__ import annotations

import pytest

from perflearn import emulate as emu
from perflearn.errors import UnsupportedError, UsageError


@pytest.mark.parametrize(
    "text,ns",
    [("0", 0), (0, 0), ("2us", 2000), ("2.5us", 2500), ("500ns", 500), ("1ms", 1_000_000), ("1µs", 1000), (2e-6, 2000)],
)
def test_durations(text, ns):
    assert emu.parse_duration(text) == ns


@pytest.mark.parametrize("bad", ["-2us", "2", "abc", "2 parsecs", -1, float("nan"), True, "0x10ns", None, "1e30s", "90000s", 1e15])
def test_bad_durations_name_the_argument(bad):
    with pytest.raises(UsageError) as info:
        emu.parse_duration(bad, where="latency")
    assert str(info.value).startswith("latency:")


@pytest.mark.parametrize(
    "text,bps",
    [("10Gbit", 1e10), ("10Gbit/s", 1e10), ("1Gbps", 1e9), ("100Mbit", 1e8), ("1.25GB/s", 1e10),
     ("1MiB/s", 8 * 1048576), ("0", 0), ("unlimited", 0), (1e9, 1e9)],
)  # fmt: skip
def test_rates(text, bps):
    assert emu.parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("bad", ["-1Gbit", "10", "10Gbitz", "fast", "0.1bit", -5])
def test_bad_rates(bad):
    with pytest.raises(UsageError):
        emu.parse_rate(bad)


def test_sizes():
    assert emu.parse_size("64KiB") == 65536
    assert emu.parse_size(4096) == 4096
    with pytest.raises(UsageError):
        emu.parse_size("1.5")


def test_environment_canonical_values(sock_lib):
    env = emu.environment(latency="2us", overhead=0, bandwidth="10Gbit")
    assert env["PERFLEARN_EMU_LATENCY"] == "2000ns"
    assert env["PERFLEARN_EMU_OVERHEAD"] == "0ns"
    assert env["PERFLEARN_EMU_BANDWIDTH"] == "10000000000bit"
    assert env["LD_PRELOAD"].endswith("libperflearn_emu.so")
    assert "PERFLEARN_EMU_PEERS" not in env


def test_environment_all_off_still_preloads(sock_lib):
    env = emu.environment()
    assert env["PERFLEARN_EMU_LATENCY"] == "0ns"
    assert env["PERFLEARN_EMU_BANDWIDTH"] == "0"
    assert "LD_PRELOAD" in env


def test_environment_filters(sock_lib):
    env = emu.environment(latency="1us", peers=["127.0.0.1:11211", "[::1]:80"], ports=[6379], threshold="32KiB")
    assert env["PERFLEARN_EMU_PEERS"] == "127.0.0.1:11211,[::1]:80,:6379"
    assert env["PERFLEARN_EMU_THRESHOLD"] == "32768"


@pytest.mark.parametrize(
    "kwargs,where",
    [({"latency": "-1us"}, "latency"), ({"bandwidth": "lots"}, "bandwidth"), ({"overhead": "x"}, "overhead"),
     ({"ports": [0]}, "ports"), ({"ports": ["http"]}, "ports"), ({"peers": "not an address"}, "peers"), ({"peers": ":99999"}, "port 99999 of ':99999' is not 1..65535"),
     ({"peers": "127.0.0.1:70000"}, "port 70000"),
     ({"peers": "999.1.1.1"}, "'999.1.1.1' in '999.1.1.1' is not an IPv4 address"),
     ({"bandwidth": "1e300Gbit"}, "faster than 1 Pbit/s"), ({"threshold": "1e30"}, "more than 10^15 bytes"),
     ({"layer": "verbs"}, "layer"), ({"threshold": -1}, "threshold")],
)  # fmt: skip
def test_environment_rejects_bad_input(kwargs, where):
    with pytest.raises(UsageError) as info:
        emu.environment(**kwargs)
    assert where in str(info.value)


def test_environment_rejects_unknown_filter():
    with pytest.raises(UsageError, match="unknown emulation option"):
        emu.environment(latency="1us", color="blue")


def test_library_override(monkeypatch, tmp_path):
    fake = tmp_path / "libx.so"
    fake.write_bytes(b"")
    monkeypatch.setenv(emu.ENV_LIB, str(fake))
    assert emu.locate_library() == fake.resolve()
    monkeypatch.setenv(emu.ENV_LIB, str(tmp_path / "missing.so"))
    with pytest.raises(UnsupportedError, match="PERFLEARN_EMU_LIB"):
        emu.locate_library()


def test_python_and_c_agree_on_units(sock_lib, tmp_path):
    """The library parses what environment() writes (it reports its configuration)."""
    import os
    import subprocess

    env = dict(os.environ)
    env.update(emu.environment(latency="1.5us", overhead="250ns", bandwidth="1.25GB/s", threshold="32KiB"))
    env["PERFLEARN_EMU_VERBOSE"] = "1"
    out = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True).stderr
    assert "latency=1500ns overhead=250ns bandwidth=10000000000bit/s threshold=32768B" in out
