"""The Python face: value parsing, environment(), locating the library."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perflearn import emulate as emu
from perflearn.errors import UnsupportedError, UsageError

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


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


def _elf(path, e_type: int):
    """A file with this machine's ELF header (Python's own) and the given type (3: shared object)."""
    import sys

    with open(os.path.realpath(sys.executable), "rb") as f:
        head = bytearray(f.read(64))
    head[16:18] = e_type.to_bytes(2, "little" if head[5] == 1 else "big")
    path.write_bytes(bytes(head) + b"\0PERFLEARN_EMU_LATENCY\0")  # the name every shim reads
    return path


def test_library_override(monkeypatch, tmp_path):
    fake = _elf(tmp_path / "libx.so", 3)
    monkeypatch.setenv(emu.ENV_LIB, str(fake))
    assert emu.locate_library() == fake.resolve()
    monkeypatch.setenv(emu.ENV_LIB, str(tmp_path / "missing.so"))
    with pytest.raises(UnsupportedError, match="PERFLEARN_EMU_LIB"):
        emu.locate_library()


def test_library_override_that_ld_so_would_skip_is_refused(monkeypatch, tmp_path):
    """Review, session 21: PERFLEARN_EMU_LIB=data.csv was accepted; ld.so ignored it and the
    program ran natively, exit 0, as if emulated."""
    csv = tmp_path / "data.csv"
    csv.write_text("a,b\n1,2\n")
    for path, why in ((csv, "is not a shared library (no ELF header)"),
                      (_elf(tmp_path / "prog", 2), "is an ELF file but not a shared library"),  # ET_EXEC
                      # a position-independent program is ET_DYN too (session 46: it was accepted)
                      (Path("/bin/true"), "is not perflearn's emulator (it never reads PERFLEARN_EMU_LATENCY)")):
        monkeypatch.setenv(emu.ENV_LIB, str(path))
        with pytest.raises(UnsupportedError) as info:
            emu.locate_library()
        assert str(info.value) == f"PERFLEARN_EMU_LIB={path} {why}"
        with pytest.raises(UsageError, match="library: .* is not a shared library"):
            emu.environment(latency="1us", library=csv)


def test_missing_build_hint_is_an_absolute_command(monkeypatch, tmp_path):
    monkeypatch.delenv(emu.ENV_LIB, raising=False)
    monkeypatch.setattr(emu, "_native_dir", lambda: tmp_path / "emu")
    with pytest.raises(UnsupportedError) as info:
        emu.locate_library()
    assert f"run `make -C {tmp_path / 'emu'} build`" in str(info.value)  # was "make -C native/emu build"
    assert emu.library_path() == tmp_path / "emu" / "build" / "libperflearn_emu.so"
    assert emu.variables(latency="2us")["PERFLEARN_EMU_LATENCY"] == "2000ns"  # no build needed


@pytest.mark.parametrize(
    "value,message",
    [(lambda: emu.parse_duration("-5us"), "a duration cannot be negative, got '-5us'"),
     (lambda: emu.parse_duration("0.4ns"), "'0.4ns' is less than 1ns"),
     (lambda: emu.parse_duration(1e-10), "is less than 1ns"),
     (lambda: emu.parse_rate("-1Gbit"), "a rate cannot be negative"),
     (lambda: emu.parse_size("-1KiB"), "a size cannot be negative"),
     (lambda: emu.parse_rate("1Gbs"), "units: bit, kbit, Mbit, Gbit")],
)  # fmt: skip
def test_unit_errors_say_what_is_wrong(value, message):
    """Review, session 21: "-5us" was "expected a duration", 0.4ns silently 0 (the knob off),
    and an unknown rate unit did not say which ones there are."""
    with pytest.raises(UsageError) as info:
        value()
    assert message in str(info.value)


def test_sub_nanosecond_values_round_as_the_library_does():
    assert emu.parse_duration("0.5ns") == 1 and emu.parse_duration("2.5ns") == 3  # llround, not round-half-even
    assert emu.parse_duration("0ns") == 0


@pytest.mark.parametrize("text,bps", [("1gbps", 1e9), ("1mbps", 1e6), ("2tbps", 2e12), ("1Mbps/s", 1e6)])
def test_bps_spellings_like_bit_ones(text, bps):
    assert emu.parse_rate(text) == pytest.approx(bps)


# what native/emu/src/emu_pace.c (parse_one_peer, inet_pton) reads, and what it does not
PEERS = ["abc:11211", "[abc]:80", "beef:", "1:2:3", "::1", "[::1]:80", "[::1]", ":80", "*:80", "*", ":*",
         "localhost:80", "127.0.0.1", "127.0.0.1:", "[127.0.0.1]:80", "[]:80", "fe80::1%eth0", "01.2.3.4",
         "::ffff:1.2.3.4", "[::1]x", "[::1", "1.2.3.4:0", "1.2.3.4:+80", "1.2.3.4:8a", "1.2.3", "::", "1::2::3",
         "host.example:80", "1.2.3.4:65535"]  # fmt: skip


def test_peers_python_refuses_exactly_what_the_library_cannot_read(sock_lib):
    """Review, session 21: --peer abc:11211 passed the CLI, the library refused it and the
    program ran without emulation, exit 0."""
    import subprocess

    verdicts = []
    for peer in PEERS:
        try:
            emu.environment(latency="1us", peers=peer)
            python_ok = True
        except UsageError:
            python_ok = False
        env = {"PATH": os.environ["PATH"], "LD_PRELOAD": str(sock_lib), "PERFLEARN_EMU_LATENCY": "1us",
               "PERFLEARN_EMU_PEERS": peer}
        err = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True).stderr
        assert python_ok == ("emulation disabled" not in err), (peer, err)
        verdicts.append(python_ok)
    assert verdicts.count(True) >= 10 and verdicts.count(False) >= 10  # both kinds are in the list


def test_inherited_variables_are_checked_as_the_library_does():
    env = emu.variables(latency="2us")
    kept, unknown = emu.inherited({"PERFLEARN_EMU_SPIN": "50us", "PERFLEARN_EMU_LATENCY": "9us", "PERFLEARN_EMU_X": "1",
                                   "PERFLEARN_EMU_LIB": "/x.so", "PERFLEARN_EMU_HOT": "", "HOME": "/"}, env)
    assert kept == {"PERFLEARN_EMU_SPIN": "50us"} and unknown == ["PERFLEARN_EMU_X"]  # LATENCY: perflearn's wins
    for name, bad in (("PERFLEARN_EMU_PEERS", "abc:1"), ("PERFLEARN_EMU_QUEUE", "4KiB"), ("PERFLEARN_EMU_SPIN", "5"),
                      ("PERFLEARN_EMU_HELPER_TABLE", "mine"), ("PERFLEARN_EMU_THRESHOLD", "big")):
        with pytest.raises(UsageError, match=f"^{name} \\(inherited from the environment\\): "):
            emu.inherited({name: bad}, env)


def test_python_and_c_agree_on_units(sock_lib, tmp_path):
    """The library parses what environment() writes (it reports its configuration)."""
    import os
    import subprocess

    env = dict(os.environ)
    env.update(emu.environment(latency="1.5us", overhead="250ns", bandwidth="1.25GB/s", threshold="32KiB"))
    env["PERFLEARN_EMU_VERBOSE"] = "1"
    out = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True).stderr
    assert "latency=1500ns overhead=250ns bandwidth=10000000000bit/s threshold=32768B" in out
