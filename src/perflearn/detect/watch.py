"""Classify a live workload every interval with a fitted detector."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pandas as pd

from perflearn.errors import UsageError
from perflearn.experiment.sampling import Sampler, SamplingSpec

from .features import window_features
from .model import Detector


def samples_interval(samples: pd.DataFrame) -> float:
    """The sampling interval of stored samples (median spacing of one signal's ticks)."""
    if samples.empty:
        raise UsageError("the experiment has no interval samples (add a [sampling] table to its spec)")
    first = samples[samples["metric"] == samples["metric"].iloc[0]]
    spacing = first.groupby("run_id")["t"].diff().dropna()
    if spacing.empty:
        raise UsageError("too few samples per run to tell the sampling interval")
    return float(spacing.median())


def watch(detector: Detector, pid: int | None = None, command: list[str] | None = None,
          intervals: int | None = None) -> Iterator[dict]:
    """Yield one verdict per interval (once a window is full) until the process exits."""
    process = None
    if command:
        try:
            process = subprocess.Popen(command, process_group=0)
        except OSError as exc:
            raise UsageError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
        pid = process.pid
    if pid is None:
        raise UsageError("give a PID or a command to watch")
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        raise UsageError(f"no process {pid}") from None
    sampler = Sampler(SamplingSpec(detector.interval, system=True, process=True))
    sampler.start(pgid)
    seen = 0
    try:
        while True:
            time.sleep(detector.interval)
            alive = process.poll() is None if process else _alive(pid)
            samples = pd.DataFrame(list(sampler.samples), columns=["metric", "t", "value"])
            if not samples.empty:
                last = round(samples["t"].max() / detector.interval)
                recent = samples[(samples["t"] / detector.interval).round() > last - detector.window].copy()
                recent["t"] -= (last - detector.window) * detector.interval  # the newest full window is window 0
                features = window_features(recent, detector.interval, detector.window)
                if len(features):
                    verdict = detector.predict(features.iloc[[-1]]).iloc[0].to_dict()
                    verdict["t"] = float(samples["t"].max())
                    seen += 1
                    yield verdict
            if not alive or (intervals is not None and seen >= intervals):
                break
    finally:
        sampler.stop()
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait()
    if seen == 0:
        raise UsageError(f"too few samples to classify: the process ran for less than one window "
                         f"({detector.window} x {detector.interval:g} s)")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


