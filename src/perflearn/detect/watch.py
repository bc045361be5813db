"""Classify a live workload every interval with a fitted detector."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator

import pandas as pd

from perflearn.errors import CommandFailed, UsageError
from perflearn.experiment.sampling import Sampler, SamplingSpec
from perflearn.lifetime import alive, end_group, release, start_group

from .features import window_features
from .model import SMOOTH, Detector


def samples_interval(samples: pd.DataFrame) -> float:
    """The sampling interval of stored samples (median spacing of one signal's ticks)."""
    if samples.empty:
        raise UsageError("the experiment has no interval samples (add a [sampling] table to its spec)")
    first = samples[samples["metric"] == samples["metric"].iloc[0]]
    spacing = first.groupby("run_id")["t"].diff().dropna()
    if spacing.empty:
        raise UsageError("too few samples per run to tell the sampling interval")
    interval = float(spacing.median())
    if not interval > 0:  # every tick divides by it: 0 or a negative interval makes no windows
        raise UsageError(f"sampling interval is not positive ({interval:g} s: t does not increase within a run)")
    return interval


def watch(detector: Detector, pid: int | None = None, command: list[str] | None = None,
          intervals: int | None = None, smooth: int = SMOOTH) -> Iterator[dict]:
    """Yield one verdict per interval (once a window is full) until the process exits.

    A verdict averages the class probabilities (and slowdowns) of the sliding windows that
    lie within the latest ``smooth`` windows' worth of ticks, as `detect evaluate` reports
    it as "(N windows)"; ``smooth=1`` gives the newest window's own verdict."""
    process = None
    if command:
        try:
            # killed outright (SIGKILL), a watch leaves nothing of the command running
            process = start_group(command)
        except OSError as exc:
            raise UsageError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
        pid = process.pid
    if pid is None:
        raise UsageError("give a PID or a command to watch")
    if pid <= 0:  # 0 would be this process; its "descendants" everything
        raise UsageError(f"no process {pid}")
    try:
        os.getpgid(pid)
    except ProcessLookupError:
        raise UsageError(f"no process {pid}") from None
    sampler = Sampler(SamplingSpec(detector.interval, system=True, process=True))
    sampler.start(pid)  # the process, its descendants and its process group, as in training
    seen = 0
    # windows that end in the latest (smooth - 1) * window + 1 ticks span smooth windows of ticks
    recent_verdicts: deque = deque(maxlen=(max(1, smooth) - 1) * detector.window + 1)
    try:
        while True:
            time.sleep(detector.interval)
            running = process.poll() is None if process else alive(pid)
            samples = pd.DataFrame(list(sampler.samples), columns=["metric", "t", "value"])
            if not samples.empty:
                last = round(samples["t"].max() / detector.interval)
                # the newest full window is window 0; the tick before it (window -1, too short
                # to count) gives the per-second changes of its first tick
                recent = samples[(samples["t"] / detector.interval).round() >= last - detector.window].copy()
                recent["t"] -= (last - detector.window) * detector.interval
                features = window_features(recent, detector.interval, detector.window)
                features = features[features["window"] == 0]
                if len(features):
                    recent_verdicts.append((detector.predict_proba(features), detector.predict_slowdown(features)))
                    proba = pd.concat([p for p, _ in recent_verdicts]).fillna(0.0).mean()
                    verdict = {"verdict": str(proba.idxmax()), "probability": float(proba.max())}
                    slowdowns = [s[0] for _, s in recent_verdicts if s is not None]
                    if slowdowns:
                        verdict["slowdown"] = float(sum(slowdowns) / len(slowdowns))
                    verdict["t"] = float(samples["t"].max())
                    seen += 1
                    yield verdict
            if not running or (intervals is not None and seen >= intervals):
                break
    finally:
        sampler.stop()
        ended_itself = process is not None and process.poll() is not None
        if process is not None and not ended_itself:
            end_group(process)  # what the command started too (it runs in its own group)
        if process is not None:
            release(process)
    if ended_itself and process.returncode != 0:
        raise CommandFailed(command, process.returncode)
    if seen == 0:
        raise UsageError(f"too few samples to classify: the process ran for less than one window "
                         f"({detector.window} x {detector.interval:g} s)")
