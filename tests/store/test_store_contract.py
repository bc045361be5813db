"""The results store's rules (perflearn.store.base), run over every backend."""

from __future__ import annotations

import math
import subprocess
import sys

import duckdb
import pandas as pd
import pytest

from perflearn.errors import StoreError
from perflearn.store import SCHEMA_VERSION, Dataset, KnobInfo, MetricInfo, RunRecord, open_store
from perflearn.store.export import export


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path):
    s = open_store(tmp_path / "s.duckdb" if request.param == "file" else ":memory:")
    yield s
    s.close()


def make(store, name="exp"):
    info = store.create_experiment(name, "run", [KnobInfo("bs", kind="numeric"), KnobInfo("mode", kind="categorical"),
                                                 KnobInfo("load", role="context")],
                                   [MetricInfo("iops", "json", "IO/s"), MetricInfo("ins", "perf")], spec_hash="abc")
    store.add_points(info, [(1, "k1", {"bs": 4096, "mode": "a", "load": 0.5}), (2, "k2", {"bs": 8192, "mode": "b", "load": 1.0})])
    return info


def test_run_with_measurements_and_null_reason(store):
    info = make(store)
    store.record_run(info, RunRecord(1, 0, "ok", values={"iops": 10.0, "ins": None}, missing={"ins": "not supported"}))
    store.record_run(info, RunRecord(2, 0, "failed", error="exit 1", values={"iops": None, "ins": None},
                                     missing={"iops": "run failed", "ins": "run failed"}))
    ds = store.dataset("exp")
    assert ds.knobs == ["bs", "mode"] and ds.context == ["load"] and ds.metrics == ["iops", "ins"]
    assert ds.kinds["mode"] == "categorical" and ds.units["iops"] == "IO/s"
    row = ds.frame.set_index("point_id")
    assert row.loc[1, "iops"] == 10.0 and math.isnan(row.loc[1, "ins"])  # NULL, never 0
    assert row.loc[2, "status"] == "failed" and math.isnan(row.loc[2, "iops"])
    m = store.measurements("exp").set_index(["run_id", "metric"])
    assert m["missing_reason"].dropna().tolist() == ["not supported", "run failed", "run failed"]
    assert len(ds.ok()) == 1


def test_a_run_is_recorded_at_most_once(store):
    info = make(store)
    store.record_run(info, RunRecord(1, 0, "ok", values={"iops": 1.0}))
    with pytest.raises(StoreError, match="recorded already"):
        store.record_run(info, RunRecord(1, 0, "ok", values={"iops": 2.0}))
    assert len(store.runs("exp")) == 1 and store.dataset("exp").frame["iops"].tolist() == [1.0]  # rolled back whole


def test_unknown_status_and_experiment(store):
    info = make(store)
    with pytest.raises(StoreError, match="unknown run status"):
        store.record_run(info, RunRecord(1, 0, "great"))
    with pytest.raises(StoreError, match="no experiment named 'nope'.*exp"):
        store.dataset("nope")
    with pytest.raises(StoreError, match="exists already"):
        make(store)


def test_points_cannot_change_values(store):
    info = make(store)
    with pytest.raises(StoreError, match="other knob values"):
        store.add_points(info, [(1, "different", {"bs": 1})])


def test_samples_are_stored_with_the_run(store):
    info = make(store)
    store.record_run(info, RunRecord(1, 0, "ok", samples=[("cpu", 0.0, 1.0), ("cpu", 1.0, None)]))
    samples = store.samples("exp")
    assert samples["t"].tolist() == [0.0, 1.0] and math.isnan(samples["value"][1])


def test_listing_counts_statuses(store):
    info = make(store)
    store.record_run(info, RunRecord(1, 0, "ok"))
    store.record_run(info, RunRecord(1, 1, "timeout"))
    row = store.experiments().iloc[0]
    assert (row["runs"], row["ok"], row["timeout"], row["failed"]) == (2, 1, 1, 0)


def test_import_then_dataset_round_trip(store, tmp_path):
    csv = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 1, 2], "c": ["x", "x", "y"], "perf": [1.5, 2.5, None]}).to_csv(csv, index=False)
    ds = Dataset.from_csv(csv, metrics=["perf"])
    store.import_dataset(ds, "imp")
    back = store.dataset("imp")
    assert back.knobs == ["a", "c"] and back.kinds == {"a": "numeric", "c": "categorical"}
    assert back.frame["point_id"].tolist() == [1, 1, 2] and back.frame["rep"].tolist() == [0, 1, 0]
    assert back.frame["perf"].tolist()[:2] == [1.5, 2.5] and math.isnan(back.frame["perf"][2])
    out = export(back, tmp_path / "out.parquet")
    assert pd.read_parquet(out)["perf"].tolist()[:2] == [1.5, 2.5]


def test_schema_version_newer_is_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    open_store(path).close()
    db = duckdb.connect(str(path))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    db.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        open_store(path)


def test_not_a_store_and_missing_store(tmp_path):
    other = tmp_path / "other.duckdb"
    db = duckdb.connect(str(other))
    db.execute("CREATE TABLE t (x INTEGER)")
    db.close()
    with pytest.raises(StoreError, match="not a perflearn store"):
        open_store(other)
    with pytest.raises(StoreError, match="no results store here"):
        open_store(tmp_path / "none.duckdb", read_only=True)
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a perflearn store \\(not a DuckDB file\\)"):
        open_store(garbage)
    # DuckDB reads SQLite by downloading an extension: a network call, then an IO error
    import sqlite3

    lite = tmp_path / "other.sqlite"
    sqlite3.connect(lite).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="not a perflearn store \\(an SQLite database\\)"):
        open_store(lite)


def test_second_writer_gets_a_clear_error(tmp_path):
    path = tmp_path / "s.duckdb"
    with open_store(path):
        # the reader's wait cut to 1 s (10 s in use): the error after it is the same
        code = ("import perflearn.store.duck as duck\nduck.WAIT_READ_S = 1.0\n"
                f"from perflearn.store import open_store\nopen_store({str(path)!r})")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "in use by another perflearn process (waited 1 s)" in done.stderr


def test_csv_errors_are_one_line(tmp_path):
    from perflearn.errors import UsageError
    csv = tmp_path / "d.csv"
    csv.write_text("a,perf\n1,fast\n")
    with pytest.raises(UsageError, match="non-numeric value 'fast'"):
        Dataset.from_csv(csv, metrics=["perf"])
    with pytest.raises(UsageError, match="no column 'PERF'"):
        Dataset.from_csv(csv, metrics=["PERF"])
    with pytest.raises(UsageError, match="no such file"):
        Dataset.from_csv(tmp_path / "none.csv", metrics=["perf"])
