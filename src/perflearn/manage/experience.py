"""Experience: how often each configuration missed the target at each load in earlier runs.

A live service's interval p95 is noisy where a model forecasts a typical interval. Over
session 29-31's rounds on this project's machine, every configuration cheaper than the
maximum missed 7-11 % of its intervals at the top load, the maximum 1.5 %, and one step
below it one core at 0.625 missed 1.1 % where two cores at 0.375 missed none
(bench/manage.md, session 32). Shares of a few percent take hundreds of intervals to tell
apart: more than one run gives, but what a manager that has run before knows.
`perflearn manage --csv` records every interval; ``--experience`` reads them back.

``heimdall-experience`` prices a miss: at each load it runs the configuration of least
``power + price x miss share``, where the price is the least that keeps the share of
intervals expected to miss, over the loads as they were experienced, within a budget
(``--miss-budget``). So the budget is spent where a miss saves the most power: at the top
load the cheaper configurations save a third of the power for 5-10 points of misses,
lower down one step of speed saves 4 % for one.

Experience can be stale: a host slower than on the days it was gathered misses more
(bench/manage.md, session 32: one core at 0.625 at the top load missed 20 % of its
intervals on one day against 6.6 % before). So the experience is tested against what
this run measures (``Freshness``) and set aside once the run's misses are too many for
the shares it expected.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from perflearn.errors import UsageError
from perflearn.store.dataset import csv_source

from .config import ConfigSpace

LEAST = 15  # intervals at a load before a configuration's miss share there is used
STALE = 0.01  # the chance of so many misses, were the experience right, under which it is set aside
COLUMNS = ("rps", "p95", "cores", "level", "utilisation")


def load_bucket(rps: float, max_rps: float, buckets: int) -> int:
    """The load's bucket: centred on the multiples of 1/buckets of the maximum load, so a
    step at 80 % measured as 79.6 or 80.3 % is one bucket, not two."""
    return int(min(buckets, round(max(0.0, rps) / max_rps * buckets)))


@dataclass
class Experience:
    """Intervals and misses per load bucket and configuration (``space``'s order), and
    the CPU demand each bucket's load put on the service (median busy full-speed cores)."""

    space: ConfigSpace
    max_rps: float
    intervals: np.ndarray  # [bucket, configuration]
    misses: np.ndarray
    busy: np.ndarray  # [bucket]; NaN where none was seen
    files: int = 0
    foreign: int = 0  # intervals under load in a configuration outside ``space`` (another --cores, --levels)
    beyond: int = 0  # intervals at a load past the top bucket (a ladder sweep's 110 % step): left out

    @property
    def buckets(self) -> int:
        return self.intervals.shape[0] - 1

    @classmethod
    def from_csvs(cls, paths: list[Path], space: ConfigSpace, target_s: float, max_rps: float,
                  buckets: int = 10) -> "Experience":
        """Every interval under load of ``perflearn manage --csv`` files (any policy, learning
        passes too), except those in which a reaction changed the configuration, missed or
        met against ``target_s`` (today's target, not the one they ran under)."""
        configs = list(space)
        index = {(c.cores, round(c.level, 4)): i for i, c in enumerate(configs)}
        intervals = np.zeros((buckets + 1, len(configs)), dtype=int)
        misses = np.zeros_like(intervals)
        busy: list[list[float]] = [[] for _ in range(buckets + 1)]
        foreign = beyond = 0
        for path in paths:
            frame = _read(path)
            for row in frame.itertuples(index=False):
                i = index.get((int(row.cores), round(float(row.level), 4)))
                if i is None:  # a configuration of another space: nothing to say about this one, but said
                    foreign += 1
                    continue
                if round(row.rps / max_rps * buckets) > buckets:  # counted as the maximum load, a ladder's 110 %
                    beyond += 1  # step's misses made the maximum's miss share 47.5 % where it met 10 of 10
                    continue
                b = load_bucket(row.rps, max_rps, buckets)
                intervals[b, i] += 1
                misses[b, i] += row.p95 > target_s
                busy[b].append(row.utilisation * row.cores * row.level)
        median = np.array([np.median(v) if v else np.nan for v in busy])
        return cls(space, max_rps, intervals, misses, median, files=len(paths), foreign=foreign, beyond=beyond)

    def share(self) -> np.ndarray:
        """Miss share per bucket and configuration (Jeffreys' estimate, (misses + 1/2) /
        (intervals + 1): a configuration that never missed in 20 intervals is not certain
        to meet); NaN where fewer than ``LEAST`` intervals were seen."""
        with np.errstate(invalid="ignore"):
            share = (self.misses + 0.5) / (self.intervals + 1.0)
        return np.where(self.intervals >= LEAST, share, np.nan)

    def add(self, bucket: int, config: int, missed: bool) -> None:
        self.intervals[bucket, config] += 1
        self.misses[bucket, config] += missed

    def plan(self, price: float, watts: Callable[[float], np.ndarray]) -> np.ndarray:
        """Per bucket, the configuration of least ``watts + price x share`` (-1 where none is
        known); ``watts(busy)``: every configuration's power at that demand."""
        share = self.share()
        chosen = np.full(self.buckets + 1, -1)
        for b in range(self.buckets + 1):
            known = np.isfinite(share[b])
            if known.any() and np.isfinite(self.busy[b]):
                cost = watts(self.busy[b]) + price * share[b]
                chosen[b] = int(np.argmin(np.where(known, cost, np.inf)))
        return chosen

    def expected_share(self, chosen: np.ndarray) -> float:
        """The share of intervals expected to miss under ``chosen``, each bucket weighted
        by the intervals experienced there (the loads as they came)."""
        share = self.share()
        weight = self.intervals.sum(axis=1)
        used = chosen >= 0
        if not used.any():
            return float("nan")
        b = np.flatnonzero(used)
        return float((share[b, chosen[b]] * weight[b]).sum() / weight[b].sum())

    def price_for(self, budget: float, watts: Callable[[float], np.ndarray],
                  ceiling: float = 1e6) -> tuple[float, float]:
        """(price in watts per unit of miss share, the expected share at it): the least price
        whose plan expects at most ``budget`` of the intervals to miss, by bisection; at
        ``ceiling`` (misses avoided at any cost) when no price meets it."""
        expected = lambda price: self.expected_share(self.plan(price, watts))
        low, high = 0.0, ceiling
        at_low, at_high = expected(low), expected(high)
        if at_low <= budget:
            return low, at_low
        if at_high > budget:
            return high, at_high
        for _ in range(60):
            mid = (low + high) / 2
            at_mid = expected(mid)
            if at_mid <= budget:
                high, at_high = mid, at_mid
            else:
                low = mid
        return high, at_high

    def __len__(self) -> int:
        return int(self.intervals.sum())

    def copy(self) -> "Experience":
        """An experience to learn into (heimdall-experience adds a run's own intervals)
        that leaves this one as read."""
        return replace(self, intervals=self.intervals.copy(), misses=self.misses.copy(), busy=self.busy.copy())


def misses_at_least(shares: list[float], misses: int) -> float:
    """The chance of at least ``misses`` misses in intervals that each miss with its own
    share (the Poisson binomial upper tail, exact: the count's distribution built one
    interval at a time)."""
    count = np.array([1.0])
    for p in shares:
        count = np.append(count * (1 - p), 0.0) + np.append(0.0, count * p)
    return float(count[misses:].sum())


class Freshness:
    """Whether the experience still holds in this run: the run's intervals on configurations
    the experience knew at their load, their misses tested together against the shares it
    expected (fixed at the start, so the run does not vouch for itself). One test for the
    whole run, not one per load: what changes from one day to the next is the host (its
    speed, its neighbours), and it changes every load at once; live, per-load tests set
    four loads aside one after another, paying two or more misses at each (bench/manage.md,
    session 33). One-sided: fewer misses than expected is no reason to distrust."""

    def __init__(self, experience: Experience):
        self.expected = experience.share()  # before this run's intervals join
        self.shares: list[float] = []
        self.misses = 0
        self.stale = False

    def add(self, bucket: int, config: int, missed: bool) -> bool:
        """Count one interval; True when it makes the experience stale."""
        share = self.expected[bucket, config]
        if self.stale or not np.isfinite(share):
            return False
        self.shares.append(float(share))
        self.misses += missed
        self.stale = bool(missed) and misses_at_least(self.shares, self.misses) < STALE
        return self.stale

    def why(self) -> str:
        return f"{self.misses} of {len(self.shares)} intervals missed where it expected {sum(self.shares):.1f}"


def check_readable(paths: list[Path]) -> None:
    """Each ``--experience`` file read once before the run: a bad one was found after the
    simulator's profiling (8 s), or a live run's preload."""
    for path in paths:
        _read(path)


def _read(path: Path) -> pd.DataFrame:
    """The intervals of one ``perflearn manage --csv`` file that can teach: under load, with
    a p95, no reaction inside."""
    try:
        frame = pd.read_csv(csv_source(path))  # a killed run's .csv.gz, without its gzip trailer, too
    except FileNotFoundError:
        raise UsageError(f"--experience: no file {path}") from None
    except IsADirectoryError:
        raise UsageError(f"--experience {path}: a directory, not a perflearn manage --csv file") from None
    except OSError as exc:  # unreadable, or a .gz cut short (gzip.BadGzipFile and EOFError, an internal error before)
        raise UsageError(f"--experience {path}: cannot read it ({exc.strerror or exc})") from None
    except zlib.error as exc:  # not gzip past its first two bytes
        raise UsageError(f"--experience {path}: not a CSV (a damaged gzip file: {exc})") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, EOFError) as exc:
        raise UsageError(f"--experience {path}: not a CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise UsageError(f"--experience {path}: not a perflearn manage --csv file (no column {missing[0]!r})")
    numbers = {c: pd.to_numeric(frame[c], errors="coerce") for c in (*COLUMNS, "reactions") if c in frame.columns}
    for c, values in numbers.items():  # a cell "oops" was dropped, and a p95 of -1 counted as met, unsaid
        bad = (values.isna() & frame[c].notna()) | (values < 0)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            cell = frame[c].iloc[row]
            shown = repr(cell) if isinstance(cell, str) else f"{float(cell):g}"
            raise UsageError(f"--experience {path}: row {row + 2}, column {c}: not a number >= 0 ({shown})")
    frame = frame.assign(**numbers)
    keep = (frame["rps"] > 0) & np.isfinite(frame[list(COLUMNS)]).all(axis=1)
    if "reactions" in frame.columns:
        keep &= frame["reactions"].fillna(0) == 0
    return frame.loc[keep, list(COLUMNS)]
