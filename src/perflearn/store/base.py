"""The results store's contract, whatever the backend.

Rules every backend keeps (tests/store/test_store_contract.py checks them):
- A run is recorded in one transaction with all its measurements and samples:
  after a crash it is either fully there or not at all.
- Runs are never deleted or changed once recorded; (experiment, point, rep) is
  recorded at most once.
- A missing metric value is NULL with a reason, never 0.
- The store has a schema version; opening a store of another version migrates it
  (older) or refuses it (newer) with one clear line.
- One process writes at a time; a second writer gets a clear "in use" error.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from .dataset import STATUSES, Dataset  # noqa: F401  STATUSES: one list of run statuses, kept here too


@dataclass
class KnobInfo:
    name: str
    role: str = "knob"
    kind: str = "numeric"
    actuator: str | None = None
    domain: dict[str, Any] | None = None
    unit: str = ""


@dataclass
class MetricInfo:
    name: str
    source: str | None = None
    unit: str = ""


@dataclass
class ExperimentInfo:
    experiment_id: int
    name: str
    source: str
    description: str
    spec_hash: str | None
    spec_path: str | None
    created: datetime
    host: dict[str, Any]
    knobs: list[KnobInfo]
    metrics: list[MetricInfo]


@dataclass
class RunRecord:
    point_id: int
    rep: int
    status: str  # ok | failed | timeout | skipped
    seq: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    started: datetime | None = None
    wall_s: float | None = None
    error: str | None = None
    stderr_tail: str | None = None
    notes: str | None = None
    # metric -> value (float) or None with a reason in ``missing``
    values: dict[str, float | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    samples: list[tuple[str, float, float | None]] = field(default_factory=list)  # (metric, t, value)


class ResultsStore(abc.ABC):
    @abc.abstractmethod
    def create_experiment(
        self, name: str, source: str, knobs: list[KnobInfo], metrics: list[MetricInfo], *,
        description: str = "", spec_text: str | None = None, spec_hash: str | None = None,
        spec_path: str | None = None, host: dict[str, Any] | None = None,
    ) -> ExperimentInfo: ...

    @abc.abstractmethod
    def experiment(self, name: str) -> ExperimentInfo | None: ...

    @abc.abstractmethod
    def experiments(self) -> pd.DataFrame:
        """One row per experiment: name, source, created, runs, ok, failed, timeout, skipped."""

    def extend_experiment(self, experiment: ExperimentInfo, knobs: list[KnobInfo],
                          metrics: list[MetricInfo]) -> ExperimentInfo:
        """Add the knobs and metrics ``experiment`` does not have yet (a spec changed on
        ``--resume --allow-changed-spec``); the runs stored before have them missing."""
        raise NotImplementedError

    @abc.abstractmethod
    def add_points(self, experiment: ExperimentInfo, points: list[tuple[int, str, dict[str, Any]]]) -> None:
        """Record (point_id, point_key, values) of the design; existing ids are kept as they are."""

    @abc.abstractmethod
    def points(self, experiment: ExperimentInfo) -> dict[int, str]:
        """point_id -> point_key."""

    @abc.abstractmethod
    def record_run(self, experiment: ExperimentInfo, run: RunRecord) -> int:
        """Store one run with its measurements and samples in one transaction; return run_id."""

    @abc.abstractmethod
    def recorded(self, experiment: ExperimentInfo) -> set[tuple[int, int]]:
        """(point_id, rep) of every recorded run."""

    @abc.abstractmethod
    def runs(self, name: str) -> pd.DataFrame:
        """One row per run with its status, exit code, error and timing."""

    @abc.abstractmethod
    def dataset(self, name: str) -> Dataset: ...

    @abc.abstractmethod
    def import_dataset(self, dataset: Dataset, name: str | None = None) -> ExperimentInfo: ...

    @abc.abstractmethod
    def samples(self, name: str) -> pd.DataFrame: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def release(self) -> None:
        """Let other processes read the store until the next query (a sweep, while a run is
        measured); a store that needs no such thing does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
