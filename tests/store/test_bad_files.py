"""Damaged store files and odd CSVs: one line naming the file, never a traceback (fuzzing, session 20)."""

from __future__ import annotations

import pytest

from perflearn.errors import StoreError, UsageError
from perflearn.store import Dataset, KnobInfo, MetricInfo, RunRecord, open_store
from perflearn.store.export import read_frame

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def read_everything(path) -> None:
    with open_store(path, read_only=True) as store:
        store.experiments()
        store.dataset("exp")
        store.runs("exp")
        store.samples("exp")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.75])
def test_a_truncated_store_is_one_line_naming_the_file(tmp_path, fraction):
    """9: DuckDB opened a truncated file and raised IOException on the first query that read
    past its end (exit 70)."""
    path = tmp_path / "s.duckdb"
    with open_store(path) as store:
        info = store.create_experiment("exp", "run", [KnobInfo("bs", kind="numeric")], [MetricInfo("t", "time")])
        store.add_points(info, [(1, "k", {"bs": 1})])
        store.record_run(info, RunRecord(1, 0, "ok", values={"t": 1.0}))
    data = path.read_bytes()
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(StoreError) as caught:
        read_everything(damaged)
    message = str(caught.value)
    assert message.startswith(str(damaged)) and "\n" not in message
    assert "damaged or truncated" in message or "cannot open the store" in message


def test_an_overwritten_block_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "s.duckdb"
    open_store(path).close()
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\xff" * 4096
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged or truncated"):
        read_everything(path)


def test_a_csv_with_a_column_named_twice_is_refused(tmp_path):
    """13: pandas renamed the second 'a' to 'a.1', a column the file never had."""
    csv = tmp_path / "d.csv"
    csv.write_text("a,perf,a\n1,2,3\n")
    with pytest.raises(UsageError, match=r"d.csv: column 'a' appears twice in the header \(columns 1 and 3\)"):
        Dataset.from_csv(csv, metrics=["perf"])
    with pytest.raises(UsageError, match="column 'a' appears twice"):
        read_frame(csv)
    csv.write_text("a,a.1,perf\n1,2,3\n")  # a name that only looks like pandas' renaming is fine
    assert Dataset.from_csv(csv, metrics=["perf"]).knobs == ["a", "a.1"]


def test_none_and_na_are_categories_among_words_and_missing_among_numbers(tmp_path):
    """pandas reads "None", "NA" and "NULL" as missing everywhere: half the runs of a
    `compress` knob alternating None/zstd vanished from a fit."""
    path = tmp_path / "runs.csv"
    path.write_text("compress,threads,T\nNone,1,10\nzstd,1,12\nNone,2,NA\nzstd,2,\nNA,4,NULL\n")
    ds = Dataset.from_csv(path, metrics=["T"])
    assert ds.frame["compress"].tolist() == ["None", "zstd", "None", "zstd", "NA"]
    assert ds.kinds["compress"] == "categorical" and ds.kinds["threads"] == "numeric"
    assert ds.frame["T"].isna().tolist() == [False, False, True, True, True]
    all_missing = tmp_path / "none.csv"
    all_missing.write_text("a,T\n1,NA\n2,N/A\n")
    assert Dataset.from_csv(all_missing, metrics=["T"]).frame["T"].isna().all()
