"""perflearn.emulate: the thin Python face over the native interconnect emulator.

The emulator (native/emu) is a C library preloaded below an unmodified program.
It exposes LogGP's parameters as three independent knobs:

- ``latency`` (L): one-way delay of every message, overlapping like a wire;
- ``overhead`` (o): CPU time the sender spends per message;
- ``bandwidth`` (1/G): a link rate; messages below ``threshold`` bytes are not paced.

Everything is configured through ``PERFLEARN_EMU_*`` environment variables;
:func:`environment` builds them, so an experiment knob or the CLI only has to
merge a dict into the environment of the program it launches::

    env = {**os.environ, **environment(latency="2us", bandwidth="10Gbit")}
    subprocess.run(["memcached", ...], env=env)

Values: durations are strings with a unit (``"500ns"``, ``"2us"``, ``"1.5ms"``,
``"0"``) or numbers in seconds; rates are strings (``"10Gbit"``, ``"100Mbit/s"``,
``"1Gbps"``, ``"1.25GB/s"``, ``"100MiB/s"``, ``"0"`` = unlimited) or numbers in
bit/s; sizes are bytes or strings (``"64KiB"``).  Negative or unparsable values
raise :class:`perflearn.errors.UsageError` naming the argument.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from perflearn.errors import UnsupportedError, UsageError

__all__ = [
    "environment",
    "variables",
    "inherited",
    "locate_library",
    "library_path",
    "build_mpi",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "ENV_LIB",
    "ENV_MPI_LIB",
]

ENV_LIB = "PERFLEARN_EMU_LIB"
ENV_MPI_LIB = "PERFLEARN_EMU_MPI_LIB"
SOCKET_LIB = "libperflearn_emu.so"
MPI_LIB = "libperflearn_emu_mpi.so"

_NUM = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_DURATION = re.compile(rf"^\s*{_NUM}\s*(ns|us|µs|ms|s)?\s*$")
_DUR_SCALE = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_RATE = re.compile(rf"^\s*{_NUM}\s*([A-Za-z]+)(/s)?\s*$")
_BITS = {
    "bit": 1, "kbit": 1e3, "Kbit": 1e3, "Mbit": 1e6, "mbit": 1e6, "Gbit": 1e9, "gbit": 1e9, "Tbit": 1e12,
    "tbit": 1e12, "bps": 1, "kbps": 1e3, "Kbps": 1e3, "Mbps": 1e6, "mbps": 1e6, "Gbps": 1e9, "gbps": 1e9,
    "Tbps": 1e12, "tbps": 1e12, "b": 1, "kb": 1e3, "Kb": 1e3, "Mb": 1e6, "Gb": 1e9, "Tb": 1e12,
}  # fmt: skip
# bps, like bit, with a lower-case prefix too (mbit was taken, mbps not); the library is
# always given bits (see environment), so it need not know these spellings
_BYTES = {
    "B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3, "TiB": 1024.0**4,
}  # fmt: skip
_SIZE = re.compile(rf"^\s*{_NUM}\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?\s*$")
_SIZE_SCALE = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "kB": 1000, "KB": 1000, "MB": 10**6, "GB": 10**9}


MAX_DURATION_NS = 86_400e9  # as native/emu/src/emu_pace.c's emu_parse_duration


_RATE_UNITS = ("bit, kbit, Mbit, Gbit, Tbit, bps, kbps, Mbps, Gbps, Tbps, b, kb, Mb, Gb, Tb (bits); "
               "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB (bytes); each optionally with /s")


def _negative(value: object) -> bool:
    return isinstance(value, str) and value.strip().startswith("-")


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"expected {what}, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{what} cannot be negative or infinite, got {value!r}")
    return float(value)


def parse_duration(value: object, where: str | None = None) -> int:
    """Nanoseconds from ``"2us"``-style strings or a number of seconds."""
    what = "a duration such as '2us', '500ns' or 0"
    try:
        if isinstance(value, str):
            if _negative(value):
                raise UsageError(f"a duration cannot be negative, got {value!r}")
            m = _DURATION.match(value)
            if not m:
                raise UsageError(f"expected {what}, got {value!r}")
            x = float(m.group(1))
            if m.group(2) is None and x != 0:
                raise UsageError(f"{value!r} needs a unit (ns, us, ms, s)")
            ns = x * _DUR_SCALE.get(m.group(2) or "ns", 1.0)
        else:
            ns = _number(value, what) * 1e9
        if not ns <= MAX_DURATION_NS:  # the library's own limit: past it, it would disable itself at launch
            raise UsageError(f"{value!r} is more than a day, the emulator's limit")
        if 0 < ns < 0.5:  # it would round to 0: the knob silently off
            raise UsageError(f"{value!r} is less than 1ns, the emulator's resolution (give 0 or at least 1ns)")
        return math.floor(ns + 0.5)  # half away from zero, as the library's llround
    except UsageError as exc:
        raise UsageError(exc.message, where=where) from None


def parse_rate(value: object, where: str | None = None) -> float:
    """Bits per second from ``"10Gbit"``-style strings or a number of bit/s; 0 = unlimited."""
    what = "a rate such as '10Gbit', '100Mbit/s', '1.25GB/s' or 0"
    try:
        if value is None:
            return 0.0
        if isinstance(value, str):
            s = value.strip()
            if s in ("", "0", "unlimited"):
                return 0.0
            if _negative(s):
                raise UsageError(f"a rate cannot be negative, got {value!r}")
            m = _RATE.match(s)
            if not m:
                if re.match(rf"^{_NUM}$", s) and float(s) == 0:
                    return 0.0
                raise UsageError(f"expected {what}, got {value!r}")
            x, unit = float(m.group(1)), m.group(2)
            if unit in _BITS:
                bps = x * _BITS[unit]
            elif unit in _BYTES:
                bps = x * _BYTES[unit] * 8
            else:
                raise UsageError(f"unknown rate unit {unit!r} in {value!r} (units: {_RATE_UNITS})")
        else:
            bps = _number(value, what)
        if 0 < bps < 8:
            raise UsageError(f"{value!r} is slower than one byte per second")
        if not bps <= 1e15:  # past it (1e300Gbit is inf) the library would disable itself at launch
            raise UsageError(f"{value!r} is faster than 1 Pbit/s")
        return bps
    except UsageError as exc:
        raise UsageError(exc.message, where=where) from None


def parse_size(value: object, where: str | None = None) -> int:
    """Bytes from an int or ``"64KiB"``-style strings."""
    what = "a size such as 65536 or '64KiB'"
    try:
        if isinstance(value, str):
            if _negative(value):
                raise UsageError(f"a size cannot be negative, got {value!r}")
            m = _SIZE.match(value)
            if not m:
                raise UsageError(f"expected {what}, got {value!r}")
            n = float(m.group(1)) * _SIZE_SCALE[m.group(2)]
        else:
            n = _number(value, what)
        if not n <= 1e15:  # the library's own limit
            raise UsageError(f"{value!r} is more than 10^15 bytes")
        if n != int(n):
            raise UsageError(f"{value!r} is not a whole number of bytes")
        return int(n)
    except UsageError as exc:
        raise UsageError(exc.message, where=where) from None


def _native_dir() -> Path:
    return Path(__file__).resolve().parents[3] / "native" / "emu"


def library_path(layer: str = "sockets") -> Path:
    """Where the shim is looked for (``$PERFLEARN_EMU_LIB`` or ``$PERFLEARN_EMU_MPI_LIB``, else
    native/emu/build), whether or not it is there: what ``emulate --dry-run`` shows."""
    if layer not in ("sockets", "mpi"):
        raise UsageError(f"layer must be 'sockets' or 'mpi', got {layer!r}")
    env, name = (ENV_LIB, SOCKET_LIB) if layer == "sockets" else (ENV_MPI_LIB, MPI_LIB)
    override = os.environ.get(env)
    return Path(override) if override else _native_dir() / "build" / name


def _elf_header(path: str | Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(20)
    except OSError:
        return b""


def _not_preloadable(path: Path) -> str | None:
    """Why ld.so would skip ``path`` in LD_PRELOAD (it warns and runs the program natively,
    exit 0: a run without emulation that looks like one), or None."""
    head = _elf_header(path)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return "is not a shared library (no ELF header)"
    order = "little" if head[5] == 1 else "big"
    if int.from_bytes(head[16:18], order) != 3:  # ET_DYN
        return "is an ELF file but not a shared library"
    own = _elf_header(os.path.realpath(sys.executable))
    if own[:4] == b"\x7fELF" and (head[4] != own[4] or head[18:20] != own[18:20]):
        return "is a shared library for another architecture"
    # another library (or a position-independent program, also ET_DYN) preloads and emulates nothing
    if _MARKER not in Path(path).read_bytes():
        return f"is not perflearn's emulator (it never reads {_MARKER.decode()})"
    return None


_MARKER = b"PERFLEARN_EMU_LATENCY"  # every shim reads it (emu_pace.c)


def locate_library(layer: str = "sockets") -> Path:
    """The built shim: ``$PERFLEARN_EMU_LIB`` (or ``$PERFLEARN_EMU_MPI_LIB``), else native/emu/build."""
    path = library_path(layer)
    env = ENV_LIB if layer == "sockets" else ENV_MPI_LIB
    override = os.environ.get(env)
    if override:
        if not path.is_file():
            raise UnsupportedError(f"{env}={override} does not exist")
        why = _not_preloadable(path)
        if why:
            raise UnsupportedError(f"{env}={override} {why}")
        return path.resolve()
    if not path.is_file() or _not_preloadable(path):
        # absolute: the hint is run from wherever the user is, not from the repository
        hint = f"make -C {_native_dir()} build" if layer == "sockets" else "perflearn emulate build --mpicc PATH"
        raise UnsupportedError(f"the emulator library {path.name} is not built (run `{hint}`)")
    return path


def build_mpi(mpicc: str | os.PathLike[str] | None = None) -> Path:
    """Build the PMPI shim and the MPI validation program against ``mpicc``; returns the library."""
    native = _native_dir()
    if not (native / "Makefile").is_file():
        raise UnsupportedError(f"native sources not found at {native}")
    cmd = ["make", "--no-print-directory", "-C", str(native), "-B", "mpi"]
    if mpicc is not None:
        if not Path(mpicc).is_file() and not any(
            (Path(d) / str(mpicc)).is_file() for d in os.environ.get("PATH", "").split(os.pathsep)
        ):
            raise UsageError(f"no such MPI compiler: {mpicc}", where="--mpicc")
        cmd.append(f"MPICC={mpicc}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["make failed"])[-1]
        raise UnsupportedError(f"building the PMPI shim failed: {last}")
    return native / "build" / MPI_LIB


def _as_list(value: object) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, int)):
        return [value]
    if isinstance(value, Iterable):
        return list(value)
    return [value]


def _peer_address(host: str) -> bool:
    """An address the library takes (emu_pace.c parse_one_peer): empty or * (any),
    localhost, or what inet_pton reads as IPv4 or IPv6."""
    if host in ("", "*", "localhost"):
        return True
    if len(host) >= 64 or "%" in host:  # the library's buffer; inet_pton reads no IPv6 scope (fe80::1%eth0)
        return False
    for kind in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        try:
            kind(host)
            return True
        except ValueError:
            pass
    return False


def _peers(value: object, where: str = "peers") -> list[str]:
    """ADDR[:PORT] filters, split and checked exactly as the library will (a filter it
    cannot read makes it disable itself at launch and the program run natively)."""
    out = []
    for given in _as_list(value):
        tokens = [t for t in re.split(r"[,\s]+", str(given)) if t]  # the library splits on commas and spaces
        if not tokens:
            raise UsageError(f"expected ADDR[:PORT] such as 127.0.0.1:11211 or :6379, got {given!r}", where=where)
        for token in tokens:
            if token.startswith("["):  # [IPv6]:PORT
                close = token.find("]")
                if close < 0 or token[close + 1:][:1] not in ("", ":"):
                    raise UsageError(f"expected [ADDR] or [ADDR]:PORT, got {given!r}", where=where)
                host, port = token[1:close], token[close + 2:]
            elif token.count(":") > 1:  # a bare IPv6 address has no port
                host, port = token, ""
            else:
                host, _, port = token.partition(":")
            if not _peer_address(host):
                kind = "an IPv4 address" if re.fullmatch(r"[0-9.]+", host) else \
                    "an IP address (IPv4, IPv6 or [IPv6] before a port, localhost, or * for any)"
                raise UsageError(f"{host!r} in {given!r} is not {kind}", where=where)
            if port not in ("", "*") and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
                raise UsageError(f"port {port} of {given!r} is not 1..65535", where=where)
            out.append(token)
    return out


def environment(latency=None, overhead=None, bandwidth=None, **filters) -> dict[str, str]:
    """The variables that run a program under emulation (merge them into its environment).

    ``latency`` and ``overhead`` are durations ("2us", or seconds), ``bandwidth``
    a rate ("10Gbit", or bit/s); None or 0 leaves that knob off.  The library is
    preloaded even when every knob is off, so a sweep measures the same program.

    Filters (keywords):
      ``peers``: "ADDR[:PORT]" or a list of them (``"127.0.0.1:11211"``, ``":6379"``,
        ``"[::1]:80"``); a socket is emulated when its peer address matches and the
        port matches its peer's or its own (so a server's accepted sockets match
        on the listening port); default: every TCP/UDP socket;
      ``ports``: a port or list of ports (shorthand for ``":PORT"`` peers);
      ``threshold``: messages smaller than this (bytes or "64KiB") are not paced;
      ``layer``: ``"sockets"`` (default, LD_PRELOAD socket shim) or ``"mpi"``
        (PMPI shim; run the MPI launcher with this environment);
      ``library``: an explicit path to the shared library.

    Returns e.g. ``{"LD_PRELOAD": ".../libperflearn_emu.so", "PERFLEARN_EMU_LATENCY": "2000ns",
    "PERFLEARN_EMU_OVERHEAD": "0ns", "PERFLEARN_EMU_BANDWIDTH": "10000000000bit"}``.
    Raises UsageError for a bad value (before anything is launched) and
    UnsupportedError when the library is not built.
    """
    env = variables(latency, overhead, bandwidth, **filters)
    lib = filters.get("library")
    if lib is not None:
        path = Path(lib)
        if not path.is_file():
            raise UsageError(f"no such library: {lib}", where="library")
        why = _not_preloadable(path)
        if why:
            raise UsageError(f"{lib} {why}", where="library")
    else:
        path = locate_library(filters.get("layer") or "sockets")
    env["LD_PRELOAD"] = str(path)
    return env


def variables(latency=None, overhead=None, bandwidth=None, **filters) -> dict[str, str]:
    """The ``PERFLEARN_EMU_*`` variables of :func:`environment`, checked, without
    ``LD_PRELOAD`` (so without needing the built library)."""
    known = {"peers", "ports", "threshold", "layer", "library"}
    unknown = sorted(set(filters) - known)
    if unknown:
        raise UsageError(f"unknown emulation option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    lat = parse_duration(latency, where="latency") if latency is not None else 0
    ovh = parse_duration(overhead, where="overhead") if overhead is not None else 0
    rate = parse_rate(bandwidth, where="bandwidth") if bandwidth is not None else 0.0
    env: dict[str, str] = {
        "PERFLEARN_EMU_LATENCY": f"{lat}ns",
        "PERFLEARN_EMU_OVERHEAD": f"{ovh}ns",
        "PERFLEARN_EMU_BANDWIDTH": f"{rate:.0f}bit" if rate else "0",
    }
    if filters.get("threshold") is not None:
        env["PERFLEARN_EMU_THRESHOLD"] = str(parse_size(filters["threshold"], where="threshold"))
    peers = _peers(filters.get("peers"))
    for port in _as_list(filters.get("ports")):
        try:
            n = int(port)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            n = -1
        if isinstance(port, bool) or not 0 < n < 65536:
            raise UsageError(f"expected a port number 1..65535, got {port!r}", where="ports")
        peers.append(f":{n}")
    if len(peers) > 16:
        raise UsageError("at most 16 peer filters", where="peers")
    if len(",".join(peers)) > 1023:  # the library's buffer
        raise UsageError("the peer filters are longer than 1023 characters together", where="peers")
    if peers:
        env["PERFLEARN_EMU_PEERS"] = ",".join(peers)
    layer = filters.get("layer") or "sockets"
    if layer not in ("sockets", "mpi"):
        raise UsageError(f"layer must be 'sockets' or 'mpi', got {layer!r}", where="layer")
    return env


def _queue(value: str, where: str) -> None:
    if parse_size(value, where=where) < 65536:
        raise UsageError(f"expected a size of at least 64KiB, got {value!r}", where=where)


def _helper_table(value: str, where: str) -> None:
    if value not in ("own", "shared"):
        raise UsageError(f"expected own or shared, got {value!r}", where=where)


# The library's variables that environment() may leave unset, each with the check the
# library makes at launch (a value it cannot read disables emulation, exit 0 all the same).
_INHERITABLE = {
    "PERFLEARN_EMU_THRESHOLD": parse_size,
    "PERFLEARN_EMU_PEERS": _peers,
    "PERFLEARN_EMU_SPIN": parse_duration,
    "PERFLEARN_EMU_HOT": parse_duration,
    "PERFLEARN_EMU_CATCHUP": parse_duration,
    "PERFLEARN_EMU_QUEUE": _queue,
    "PERFLEARN_EMU_HELPER_TABLE": _helper_table,
    "PERFLEARN_EMU_VERBOSE": lambda value, where: None,
}


def inherited(environ: Mapping[str, str], env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The ``PERFLEARN_EMU_*`` variables of ``environ`` (the caller's environment) that the
    library would read beside ``env`` (from :func:`environment`, which wins): each checked
    as the library checks it (UsageError naming it). Returns them and the names of the
    others, which the library does not read (a typo, or a variable of an older version)."""
    kept: dict[str, str] = {}
    unknown: list[str] = []
    for name in sorted(environ):
        value = environ[name]
        if not name.startswith("PERFLEARN_EMU_") or name in env or name in (ENV_LIB, ENV_MPI_LIB) or not value:
            continue  # set by perflearn, perflearn's own, or empty (the library reads that as unset)
        check = _INHERITABLE.get(name)
        if check is None:
            unknown.append(name)
            continue
        check(value, where=f"{name} (inherited from the environment)")
        kept[name] = value
    return kept, unknown
