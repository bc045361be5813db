"""Results store (DuckDB) and the dataset view the learning side reads."""

from __future__ import annotations

from pathlib import Path

from .base import ExperimentInfo, KnobInfo, MetricInfo, ResultsStore, RunRecord
from .dataset import Dataset
from .duck import SCHEMA_VERSION, DuckDBStore


def open_store(path: str | Path = "perflearn.duckdb", read_only: bool = False) -> DuckDBStore:
    """Open (creating if needed) the results store at ``path``; ":memory:" for a throwaway one."""
    return DuckDBStore(path, read_only=read_only)


__all__ = ["Dataset", "DuckDBStore", "ExperimentInfo", "KnobInfo", "MetricInfo", "ResultsStore", "RunRecord",
           "SCHEMA_VERSION", "open_store"]
