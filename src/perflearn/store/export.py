"""Datasets out to files, for other tools."""

from __future__ import annotations

from pathlib import Path

from perflearn.errors import UsageError

from .dataset import Dataset

FORMATS = ("csv", "parquet")


def export(dataset: Dataset, path: str | Path, fmt: str | None = None) -> Path:
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "csv"
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})", where=str(path))
    if fmt == "csv":
        dataset.frame.to_csv(path, index=False)
    else:
        dataset.frame.to_parquet(path, index=False)
    return path
