"""Datasets out to files, for other tools."""

from __future__ import annotations

from pathlib import Path

from perflearn.errors import UsageError

from .dataset import Dataset, read_csv_runs

FORMATS = ("csv", "parquet")


def export(dataset: Dataset, path: str | Path, fmt: str | None = None) -> Path:
    return export_frame(dataset.frame, path, fmt)


def export_frame(frame, path: str | Path, fmt: str | None = None) -> Path:
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "csv"
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})", where=str(path))
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False, compression="zstd")  # zstd: samples compress ~2x better than snappy
    return path


def read_frame(path: str | Path):
    """A frame written by ``export_frame`` (CSV or Parquet, by suffix)."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise UsageError("no such file", where=str(path))
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return read_csv_runs(path)  # a column named twice is refused
    except UsageError:
        raise
    except Exception as exc:  # pyarrow and pandas raise many types for a file that is not theirs
        raise UsageError(f"not a readable {path.suffix.lstrip('.') or 'CSV'} file ({str(exc).splitlines()[0]})",
                         where=str(path)) from None
