"""``--csv``: every interval of every pass, written as it ends, so a manager killed
outright (SIGKILL, the OOM killer: no cleanup runs) loses only the interval in flight.
The rows are in the order the service ran them (interleaved passes' turns mixed), one
per interval: the ``IntervalRecord`` fields, then ``policy``. ``read_passes`` reads
such a file back, pass by pass (``perflearn manage --from-csv`` records them)."""

from __future__ import annotations

import csv
import gzip
import io
import math
import zlib
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pandas as pd

from perflearn.errors import UsageError
from perflearn.store.dataset import gunzip

from .loop import IntervalRecord

COLUMNS = [f.name for f in fields(IntervalRecord)] + ["policy"]
MAX_CORES = 4096  # more than any node has
MAX_LATENCY_S = 3600.0  # an interval's tail latency: at most the longest target (one hour)
# what a pass is summarised from; the other columns came in later versions, and a file
# without them has them missing (NULL), not 0
NEEDED = ("t", "rps", "p95", "target", "cores", "level", "utilisation", "power_w", "energy_j", "changed", "policy")


class IntervalCsv:
    """A ``comparison``'s ``log``: call with (label, record); a context manager."""

    def __init__(self, path: Path):
        self.path = path
        self.file = None  # made at the first interval: a service that never started left a file there empty
        self.rows = 0
        self.labels: dict[str, None] = {}  # each pass written, in order

    def _open(self) -> None:
        # a .gz name is gzipped, as a simulation's is (it was plain text there, which fit and
        # --experience then refused); each row's flush is a sync flush, so a killed run keeps them
        path = self.path
        self.file = gzip.open(path, "wt", newline="") if str(path).endswith(".gz") else open(path, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(COLUMNS)

    def __call__(self, label: str, record: IntervalRecord) -> None:
        if self.file is None:
            self._open()
        self.writer.writerow([_cell(getattr(record, name)) for name in COLUMNS[:-1]] + [label])
        self.file.flush()  # to the kernel: what a killed process wrote is kept
        self.rows += 1
        self.labels[label] = None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def __enter__(self) -> IntervalCsv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def append_pass(path: Path, frame: pd.DataFrame, policy: str, seed: int, first: bool) -> None:
    """A simulated pass's intervals onto ``--csv`` as the pass ends (``first`` starts the file):
    a run stopped keeps every pass that ended (it wrote the file at the end, or nothing).
    The columns are a live file's, then ``seed``."""
    frame.assign(policy=policy, seed=seed).reindex(columns=[*COLUMNS, "seed"]).to_csv(
        path, mode="w" if first else "a", header=first, index=False)


def _whole(data: bytes) -> bool:
    """Whether the last line of ``data`` (which has no line end) is a whole row all the same:
    every column of the header, and a policy another row names (a hand-edited file; a row
    cut inside the policy's name has every column too)."""
    rows = list(csv.reader(io.StringIO(data.decode(errors="replace"))))
    if len(rows) < 3 or len(rows[-1]) != len(rows[0]) or "policy" not in rows[0]:
        return False
    at = rows[0].index("policy")
    return any(len(row) == len(rows[0]) and row[at] == rows[-1][at] for row in rows[1:-1])


def _cell(value):
    """As pandas writes it: missing (None, NaN) as an empty cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def read_passes(path: Path, warn: Callable[[str], None] | None = None) -> dict[str, pd.DataFrame]:
    """The passes of a live ``--csv`` file by label, in the order they first ran, each
    its intervals in the order it ran them. Anything else is one ``UsageError`` line. A
    last row cut short (no line end: the file copied while it was written, a full disk)
    is left out, ``warn`` told: it is at most the interval in flight, and it made the
    whole file unreadable."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":  # gzipped, as the rounds under bench/ are kept
            data = gunzip(data)
        cut = data[-1:] not in (b"", b"\n", b"\r") and not _whole(data)
        if cut:  # what follows the last line end; a quote opened in it made the whole file "not a CSV file"
            data = data[:data.rfind(b"\n") + 1]
        frame = pd.read_csv(io.BytesIO(data), low_memory=False)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error, pd.errors.ParserError,
            pd.errors.EmptyDataError) as exc:
        raise UsageError(f"{path}: not a CSV file ({(str(exc).splitlines() or [type(exc).__name__])[0]})") from None
    short = next(((i, len(row)) for i, row in enumerate(csv.reader(io.StringIO(data.decode(errors="replace"))))
                  if i and row and len(row) < len(frame.columns)), None)
    if short is not None:  # pandas filled the row's missing cells: it read as "column policy: empty"
        raise UsageError(f"{path}: row {short[0] + 1} has {short[1]} cells, the header {len(frame.columns)}: "
                         "a row cut short inside the file")
    if cut and warn is not None:
        warn(f"{path}: its last line (row {len(frame) + 2}) has no line end, cut short as it was written: left out")
    if "seed" in frame:  # a simulated run: one pass per policy and seed, and reproducible
        raise UsageError(f"{path}: the --csv of a simulation; run it again with --store (the same seeds give "
                         "the same intervals)")
    missing = [c for c in NEEDED if c not in frame]
    if missing:
        raise UsageError(f"{path}: not the --csv of perflearn manage (no column {', '.join(missing)})")
    if frame.empty:
        raise UsageError(f"{path}: no intervals")
    for column in COLUMNS[:-1]:
        if column == "note":
            frame[column] = frame[column].astype("string").fillna("").astype(str) if column in frame else ""
        elif column not in frame:
            frame[column] = math.nan
        elif column not in ("changed", "settled"):
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = values.isna() & frame[column].notna()
            if bad.any():
                row = int(bad.to_numpy().argmax())
                raise UsageError(f"{path}: row {row + 2}, column {column}: not a number "
                                 f"({frame[column].iloc[row]!r})")
            frame[column] = values
    for column in ("t", "cores", "level", "target"):  # every interval has them: an empty cores cell crashed the
        # summary; an empty target was an interval met and a tardiness of NaN
        empty = frame[column].isna()
        if empty.any():
            raise UsageError(f"{path}: row {int(empty.to_numpy().argmax()) + 2}, column {column}: empty")
    latency = lambda v: 0 <= v <= MAX_LATENCY_S  # noqa: E731  (p95 1e30 read as a tardiness of 1e33)
    for column, ok, what in (("p95", latency, "a latency of 0 to 3600 s"), ("p99", latency, "a latency of 0 to 3600 s"),
                             ("target", lambda v: v > 0, "a target > 0"), ("t", lambda v: v >= 0, "a time >= 0"),
                             # session 52's audit: reactions -3 was shown as -3 changes; negative rates and watts taken
                             ("reactions", lambda v: v >= 0 and v == int(v), "a whole number of changes >= 0"),
                             ("rps", lambda v: v >= 0, "a rate >= 0"), ("offered_rps", lambda v: v >= 0, "a rate >= 0"),
                             ("power_w", lambda v: v >= 0, "a power >= 0"), ("energy_j", lambda v: v >= 0, "an energy >= 0"),
                             ("cores", lambda v: 1 <= v <= MAX_CORES and v == int(v), f"a whole number of cores, 1 to {MAX_CORES}"),
                             ("level", lambda v: 0 < v <= 1, "a level in (0, 1]"),
                             ("utilisation", lambda v: 0 <= v <= 1, "a utilisation in [0, 1]")):
        given = frame[column].notna()  # missing is no request (a p95) or an older file
        bad = given & ~(frame[column].map(lambda v: math.isfinite(v) and ok(v)) if given.any() else given)
        if bad.any():  # a p95 of -1 counted as met, inf made the tardiness inf, 1e20 cores the energy 1e20 J
            row = int(bad.to_numpy().argmax())
            raise UsageError(f"{path}: row {row + 2}, column {column}: not {what} ({float(frame[column].iloc[row])!r})")
    for column in ("changed", "settled"):  # written as True/False; missing (older files) is not a change
        known = frame[column].isna() | frame[column].isin([True, False, "True", "False"])
        if not known.all():
            row = int((~known).to_numpy().argmax())
            raise UsageError(f"{path}: row {row + 2}, column {column}: not True or False ({frame[column].iloc[row]!r})")
        frame[column] = frame[column].map({True: True, "True": True, False: False, "False": False}).fillna(False)
    unnamed = frame["policy"].isna() | (frame["policy"].astype(str).str.strip() == "")
    if unnamed.any():  # grouping would drop them, and a whole pass could vanish without a word
        raise UsageError(f"{path}: row {int(unnamed.to_numpy().argmax()) + 2}, column policy: empty")
    frame["policy"] = frame["policy"].astype(str)
    twice = frame.duplicated(["policy", "t"])
    if twice.any():  # rows copied twice: the pass read as 20 of 22 intervals, cut short, where it was not
        row = int(twice.to_numpy().argmax())
        raise UsageError(f"{path}: row {row + 2}: {frame['policy'].iloc[row]} has the interval at "
                         f"t = {frame['t'].iloc[row]:g} s twice")
    earlier = frame.groupby("policy", sort=False)["t"].diff() <= 0
    if earlier.any():  # a journal is written in the order run: a reversed file had every change counted backwards
        row = int(earlier.to_numpy().argmax())
        raise UsageError(f"{path}: row {row + 2}: {frame['policy'].iloc[row]}'s interval at t = "
                         f"{frame['t'].iloc[row]:g} s comes after a later one: not the order the pass ran them")
    return {label: part.drop(columns="policy").reset_index(drop=True)
            for label, part in frame.groupby("policy", sort=False)}
