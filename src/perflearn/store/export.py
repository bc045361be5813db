"""Datasets out to files, for other tools."""

from __future__ import annotations

import sys
from pathlib import Path

from perflearn.errors import UsageError

from .dataset import Dataset, read_csv_runs

FORMATS = ("csv", "parquet")


def export(dataset: Dataset, path: str | Path, fmt: str | None = None) -> Path:
    return export_frame(dataset.frame, path, fmt)


def export_frame(frame, path: str | Path, fmt: str | None = None) -> Path:
    """``frame`` written to ``path`` in ``fmt`` (by default, its suffix's); ``-`` is standard
    output (a file named "-" was written)."""
    path = Path(path)
    fmt = fmt or path.suffix.lstrip(".") or "csv"
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})", where=str(path))
    target = sys.stdout.buffer if str(path) == "-" else path
    if fmt == "csv":
        frame.to_csv(target, index=False)
    else:
        # a categorical knob of numbers and text (0 and "0-1") is one object column, which Arrow refused
        # (an internal error): as text, as CSV writes it
        mixed = [c for c in frame.columns if frame[c].dtype == object
                 and len({type(v) for v in frame[c].dropna()}) > 1]
        if mixed:
            frame = frame.assign(**{c: frame[c].map(lambda v: v if v is None or v != v else str(v)) for c in mixed})
        frame.to_parquet(target, index=False, compression="zstd")  # zstd: samples compress ~2x better than snappy
    if target is not path:
        sys.stdout.buffer.flush()
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
