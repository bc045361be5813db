"""``--csv``: every interval of every pass, written as it ends, so a manager killed
outright (SIGKILL, the OOM killer: no cleanup runs) loses only the interval in flight.
The rows are in the order the service ran them (interleaved passes' turns mixed), one
per interval: the ``IntervalRecord`` fields, then ``policy``."""

from __future__ import annotations

import csv
import math
from dataclasses import fields
from pathlib import Path

from .loop import IntervalRecord

COLUMNS = [f.name for f in fields(IntervalRecord)] + ["policy"]


class IntervalCsv:
    """A ``comparison``'s ``log``: call with (label, record); a context manager."""

    def __init__(self, path: Path):
        self.file = open(path, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(COLUMNS)
        self.file.flush()
        self.rows = 0

    def __call__(self, label: str, record: IntervalRecord) -> None:
        self.writer.writerow([_cell(getattr(record, name)) for name in COLUMNS[:-1]] + [label])
        self.file.flush()  # to the kernel: what a killed process wrote is kept
        self.rows += 1

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> IntervalCsv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cell(value):
    """As pandas writes it: missing (None, NaN) as an empty cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value
