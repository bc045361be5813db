"""The results store in an embedded DuckDB file (or in memory with ":memory:")."""

from __future__ import annotations

import functools
import inspect
import json
import time
import tomllib
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from perflearn import __version__
from perflearn.errors import StoreError, UnknownExperiment

from .base import STATUSES, ExperimentInfo, KnobInfo, MetricInfo, ResultsStore, RunRecord
from .dataset import Dataset

SCHEMA_VERSION = 1
# version -> SQL that brings a store of that version to the next one.
MIGRATIONS: dict[int, str] = {}


# DuckDB lets one process open a file, even to read. A sweep lets go of its store while
# a run is measured (``release``), so `ls`, `show` or `fit` can read it meanwhile; each
# side waits for the other's moment with the file rather than failing at once.
WAIT_READ_S = 10.0  # a reader waits this long for a writer's write to end
WAIT_WRITE_S = 300.0  # a sweep waits this long for readers to let go before storing a run


class DuckDBStore(ResultsStore):
    def __init__(self, path: str | Path = "perflearn.duckdb", read_only: bool = False):
        self.path = str(path)
        self.read_only = read_only
        self._next_run_id: int | None = None
        self._closed = False
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise UnknownExperiment("no results store here (run an experiment or import a CSV first)", where=self.path)
        self._db: duckdb.DuckDBPyConnection | None = self._connect(WAIT_READ_S)
        self._open_schema(read_only)

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        if self._db is None:  # released between runs: the file again, once readers have let go
            if self._closed:
                raise StoreError("the store is closed", where=self.path)
            self._db = self._connect(WAIT_READ_S if self.read_only else WAIT_WRITE_S)
            self._next_run_id = None  # counted again: nothing else writes, but ask the file
        return self._db

    def release(self) -> None:
        """Let go of the file until the next query (a file store; one in memory would be lost)."""
        if self._db is not None and self.path != ":memory:":
            self._db.close()
            self._db = None

    def _connect(self, wait_s: float) -> duckdb.DuckDBPyConnection:
        _check_duckdb_file(self.path)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return duckdb.connect(self.path, read_only=self.read_only)
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" not in text.lower():
                    raise StoreError(f"cannot open the store ({text.splitlines()[0]})", where=self.path) from None
                if time.monotonic() > deadline:
                    raise StoreError(f"the store is in use by another perflearn process (waited {wait_s:g} s)",
                                     where=self.path) from None
                time.sleep(0.05)
            except duckdb.Error as exc:
                what = "the store file is damaged or truncated" if _damaged(exc) else "not a perflearn store"
                raise StoreError(f"{what} ({str(exc).splitlines()[0]})", where=self.path) from None

    # -- schema -------------------------------------------------------------
    def _open_schema(self, read_only: bool) -> None:
        tables = {r[0] for r in self.db.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if not tables:
            if read_only:
                raise StoreError("the store is empty", where=self.path)
            with self._transaction():
                self.db.execute(resources.files("perflearn.store").joinpath("schema.sql").read_text())
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                                [str(SCHEMA_VERSION), f"perflearn {__version__}"])
            return
        if "meta" not in tables:
            raise StoreError("not a perflearn store (no meta table)", where=self.path)
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(f"store schema version {version} is newer than this perflearn's ({SCHEMA_VERSION}); "
                             "upgrade perflearn", where=self.path)
        while version < SCHEMA_VERSION:
            if read_only:
                raise StoreError(f"store schema version {version} needs migrating; open it once for writing",
                                 where=self.path)
            if version not in MIGRATIONS:
                raise StoreError(f"no migration from store schema version {version}", where=self.path)
            with self._transaction():
                self.db.execute(MIGRATIONS[version])
                version += 1
                self.db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version)])

    def _transaction(self):
        db = self.db

        class _Tx:
            def __enter__(self):
                db.execute("BEGIN TRANSACTION")

            def __exit__(self, kind, exc, tb):
                # Ctrl-C inside a statement reaches Python as DuckDB's InterruptException: it is
                # still Ctrl-C (the runner then says what was kept), not an internal error
                try:
                    db.execute("ROLLBACK" if kind else "COMMIT")
                except duckdb.InterruptException:
                    raise KeyboardInterrupt from None
                if kind is not None and issubclass(kind, duckdb.InterruptException):
                    raise KeyboardInterrupt from None

        return _Tx()

    # -- experiments ----------------------------------------------------------
    def create_experiment(self, name, source, knobs, metrics, *, description="", spec_text=None, spec_hash=None,
                          spec_path=None, host=None):
        if self.experiment(name) is not None:
            raise StoreError(f"an experiment named {name!r} exists already", where=self.path)
        with self._transaction():
            (eid,) = self.db.execute("SELECT nextval('experiment_ids')").fetchone()
            self.db.execute(
                "INSERT INTO experiments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [eid, name, description, source, spec_path, spec_text, spec_hash, datetime.now(),
                 json.dumps(host or {}), __version__],
            )
            self._add_columns(eid, knobs, metrics)
        return self.experiment(name)

    def _add_columns(self, eid: int, knobs, metrics, first_knob: int = 0, first_metric: int = 0) -> None:
        """Knob and metric rows of experiment ``eid``, numbered on from the given positions."""
        self.db.executemany(
            "INSERT INTO knobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [[eid, k.name, i, k.role, k.kind, k.actuator, json.dumps(k.domain, default=list), k.unit]
             for i, k in enumerate(knobs, start=first_knob)],
        ) if knobs else None
        self.db.executemany(
            "INSERT INTO metrics VALUES (?, ?, ?, ?, ?)",
            [[eid, m.name, i, m.source, m.unit] for i, m in enumerate(metrics, start=first_metric)],
        ) if metrics else None

    def extend_experiment(self, experiment, knobs, metrics):
        have_knobs, have_metrics = {k.name for k in experiment.knobs}, {m.name for m in experiment.metrics}
        new_knobs = [k for k in knobs if k.name not in have_knobs]
        new_metrics = [m for m in metrics if m.name not in have_metrics]
        with self._transaction():
            self._add_columns(experiment.experiment_id, new_knobs, new_metrics, len(have_knobs), len(have_metrics))
        return self.experiment(experiment.name)

    def experiment(self, name):
        row = self.db.execute(
            "SELECT experiment_id, name, source, description, spec_hash, spec_path, created, host "
            "FROM experiments WHERE name = ?", [name]).fetchone()
        if row is None:
            return None
        eid = row[0]
        knobs = [KnobInfo(n, r, k, a, json.loads(d) if d else None, u or "") for n, r, k, a, d, u in self.db.execute(
            "SELECT name, role, kind, actuator, domain, unit FROM knobs WHERE experiment_id = ? ORDER BY position",
            [eid]).fetchall()]
        metrics = [MetricInfo(n, s, u or "") for n, s, u in self.db.execute(
            "SELECT name, source, unit FROM metrics WHERE experiment_id = ? ORDER BY position", [eid]).fetchall()]
        return ExperimentInfo(eid, row[1], row[2], row[3] or "", row[4], row[5], row[6],
                              json.loads(row[7]) if row[7] else {}, knobs, metrics)

    def require(self, name: str) -> ExperimentInfo:
        info = self.experiment(name)
        if info is None:
            names = [r[0] for r in self.db.execute("SELECT name FROM experiments ORDER BY name").fetchall()]
            known = f" (experiments: {', '.join(names)})" if names else " (the store has no experiments yet)"
            raise UnknownExperiment(f"no experiment named {name!r}{known}", where=self.path)
        return info

    def experiments(self):
        counts = ", ".join(f"count(r.run_id) FILTER (WHERE r.status = '{s}') AS {s}" for s in STATUSES)
        return self.db.execute(f"""
            SELECT e.name, e.source, e.created, count(r.run_id) AS runs, {counts}, e.description
            FROM experiments e LEFT JOIN runs r USING (experiment_id)
            GROUP BY ALL ORDER BY e.created""").df()

    # -- points and runs ------------------------------------------------------
    def add_points(self, experiment, points):
        existing = self.points(experiment)
        new = [[experiment.experiment_id, pid, key, json.dumps(values, default=list)]
               for pid, key, values in points if pid not in existing]
        for pid, key, _ in points:
            if pid in existing and existing[pid] != key:
                raise StoreError(f"point {pid} of {experiment.name!r} was stored with other knob values", where=self.path)
        if new:
            with self._transaction():
                self.db.executemany("INSERT INTO points VALUES (?, ?, ?, ?)", new)

    def points(self, experiment):
        return dict(self.db.execute("SELECT point_id, point_key FROM points WHERE experiment_id = ?",
                                    [experiment.experiment_id]).fetchall())

    def record_run(self, experiment, run: RunRecord) -> int:
        if run.status not in STATUSES:
            raise StoreError(f"unknown run status {run.status!r}", where=self.path)
        run_id = self._take_run_ids(1)
        with self._transaction():
            try:
                self.db.execute(
                    "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run_id, experiment.experiment_id, run.point_id, run.rep, run.seq, run.status, run.exit_code,
                     run.signal, run.started, run.wall_s, run.error, run.stderr_tail, run.notes],
                )
            except duckdb.ConstraintException:
                raise StoreError(f"run (point {run.point_id}, rep {run.rep}) of {experiment.name!r} "
                                 "is recorded already", where=self.path) from None
            names = list(dict.fromkeys([*run.values, *run.missing]))
            if names:
                # One statement for all measurements: a run's cost must stay small.
                rows = [(run_id, n, run.values.get(n), run.missing.get(n) if run.values.get(n) is None else None)
                        for n in names]
                self.db.execute(
                    "INSERT INTO measurements VALUES " + ", ".join(["(?, ?, ?, ?)"] * len(rows)),
                    [x for row in rows for x in row],
                )
            if run.samples:
                frame = pd.DataFrame(run.samples, columns=["metric", "t", "value"])
                frame.insert(0, "run_id", run_id)
                self.db.register("_samples", frame)
                self.db.execute("INSERT INTO samples SELECT run_id, metric, t, value FROM _samples")
                self.db.unregister("_samples")
        return run_id

    def _take_run_ids(self, count: int) -> int:
        """The first of ``count`` new run ids. Only one process writes (DuckDB's file lock),
        so ids are counted here rather than asked of the database for every run (and asked
        again after a ``release``)."""
        if self._next_run_id is None:
            ((self._next_run_id,),) = self.db.execute("SELECT coalesce(max(run_id), 0) + 1 FROM runs").fetchall()
        first = self._next_run_id
        self._next_run_id += count
        return first

    def recorded(self, experiment):
        return {(p, r) for p, r in self.db.execute(
            "SELECT point_id, rep FROM runs WHERE experiment_id = ?", [experiment.experiment_id]).fetchall()}

    def runs(self, name):
        info = self.require(name)
        return self.db.execute("""
            SELECT r.run_id, r.point_id, r.rep, r.seq, r.status, r.exit_code, r.signal, r.started, r.wall_s,
                   r.error, r.stderr_tail, r.notes, p.knob_values
            FROM runs r JOIN points p USING (experiment_id, point_id)
            WHERE r.experiment_id = ? ORDER BY r.run_id""", [info.experiment_id]).df()

    def measurements(self, name: str) -> pd.DataFrame:
        """Long form: run_id, metric, value, missing_reason."""
        info = self.require(name)
        return self.db.execute("""
            SELECT m.run_id, m.metric, m.value, m.missing_reason FROM measurements m
            JOIN runs r USING (run_id) WHERE r.experiment_id = ? ORDER BY m.run_id""", [info.experiment_id]).df()

    def samples(self, name):
        info = self.require(name)
        return self.db.execute("""
            SELECT s.run_id, s.metric, s.t, s.value FROM samples s JOIN runs r USING (run_id)
            WHERE r.experiment_id = ? ORDER BY s.run_id, s.metric, s.t""", [info.experiment_id]).df()

    # -- datasets -------------------------------------------------------------
    def dataset(self, name):
        info = self.require(name)
        runs = self.db.execute("""
            SELECT r.run_id, r.point_id, r.rep, r.status, p.knob_values FROM runs r
            JOIN points p USING (experiment_id, point_id)
            WHERE r.experiment_id = ? ORDER BY r.run_id""", [info.experiment_id]).fetchall()
        frame = pd.DataFrame([{"run_id": r[0], "point_id": r[1], "rep": r[2], "status": r[3], **json.loads(r[4])}
                              for r in runs],
                             columns=["run_id", "point_id", "rep", "status", *(k.name for k in info.knobs)])
        frame = frame.astype({"run_id": "int64", "point_id": "int64", "rep": "int64"})
        for knob in info.knobs:  # lists (CPU sets) become text so that every value is hashable
            frame[knob.name] = frame[knob.name].map(lambda v: ",".join(map(str, v)) if isinstance(v, list) else v)
        values = self.measurements(name)
        metric_names = [m.name for m in info.metrics]
        if len(values):
            wide = values.pivot(index="run_id", columns="metric", values="value")
            frame = frame.join(wide.reindex(columns=metric_names), on="run_id")
        for metric in metric_names:
            if metric not in frame:
                frame[metric] = float("nan")
            frame[metric] = frame[metric].astype(float)
        return Dataset(
            experiment=name,
            frame=frame.reset_index(drop=True),
            knobs=[k.name for k in info.knobs if k.role == "knob"],
            metrics=metric_names,
            context=[k.name for k in info.knobs if k.role == "context"],
            units={m.name: m.unit for m in info.metrics},
            kinds={k.name: k.kind for k in info.knobs},
            constraints=self._design_constraints(info.experiment_id),
        )

    def _design_constraints(self, experiment_id: int) -> list[str]:
        """The stored spec's ``[design] constraints``; none for an import, or a spec
        that no longer reads as TOML (the runs are still the runs)."""
        row = self.db.execute("SELECT spec_text FROM experiments WHERE experiment_id = ?", [experiment_id]).fetchone()
        try:
            design = tomllib.loads(row[0]).get("design", {}) if row and row[0] else {}
        except tomllib.TOMLDecodeError:
            return []
        found = design.get("constraints", []) if isinstance(design, dict) else []
        return [c for c in found if isinstance(c, str)] if isinstance(found, list) else []

    def import_dataset(self, dataset, name=None):
        name = name or dataset.experiment
        knobs = [KnobInfo(c, "context" if c in dataset.context else "knob", dataset.kinds.get(c, "numeric"))
                 for c in dataset.features]
        metrics = [MetricInfo(m, "import", dataset.units.get(m, "")) for m in dataset.metrics]
        info = self.create_experiment(name, "import", knobs, metrics, description=f"imported {len(dataset.frame)} rows")
        frame = dataset.frame
        points = {}
        for row in frame[["point_id", *dataset.features]].drop_duplicates("point_id").itertuples(index=False):
            values = {c: _plain(v) for c, v in zip(dataset.features, row[1:])}
            points[int(row[0])] = (int(row[0]), json.dumps(values, sort_keys=True), values)
        self.add_points(info, list(points.values()))
        with self._transaction():
            first = self._take_run_ids(len(frame))
            ids = list(range(first, first + len(frame)))
            runs = pd.DataFrame({
                "run_id": ids,
                "experiment_id": info.experiment_id,
                "point_id": frame["point_id"].astype(int).to_numpy(),
                "rep": frame["rep"].astype(int).to_numpy(),
                "status": frame["status"].to_numpy(),
            })
            self.db.register("_runs", runs)
            self.db.execute("INSERT INTO runs (run_id, experiment_id, point_id, rep, status) "
                            "SELECT run_id, experiment_id, point_id, rep, status FROM _runs")
            self.db.unregister("_runs")
            long = frame[dataset.metrics].copy()
            long.insert(0, "run_id", runs["run_id"].to_numpy())
            long = long.melt(id_vars="run_id", var_name="metric", value_name="value")
            long["missing_reason"] = long["value"].isna().map({True: "missing in the imported file", False: None})
            self.db.register("_m", long)
            self.db.execute("INSERT INTO measurements SELECT run_id, metric, value, missing_reason FROM _m")
            self.db.unregister("_m")
        return info

    def close(self):
        try:
            if self._db is not None:
                self._db.close()
        except duckdb.Error:
            pass
        self._db, self._closed = None, True


def _damaged(exc: duckdb.Error) -> bool:
    """True for an error of the file itself (truncated, overwritten), not of a query."""
    return isinstance(exc, duckdb.IOException) or "corrupt" in str(exc).lower()


def _guarded(method):
    """``method``, with a damaged file's error as one StoreError line naming the file: DuckDB reads
    blocks lazily, so a truncated file opens and fails on whichever query first reads past its end."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except duckdb.Error as exc:
            if not _damaged(exc):
                raise
            raise StoreError(f"the store file is damaged or truncated ({str(exc).splitlines()[0]}); "
                             "restore it from a copy", where=self.path) from None

    return guarded


# every method, one added later too (__init__ words an unreadable file itself)
for _name, _member in list(vars(DuckDBStore).items()):
    if inspect.isfunction(_member) and not _name.startswith("__"):
        setattr(DuckDBStore, _name, _guarded(_member))


def _plain(value: Any) -> Any:
    """numpy scalars -> Python values, for JSON."""
    return value.item() if hasattr(value, "item") else value


def _check_duckdb_file(path: str) -> None:
    """A file that exists is a DuckDB database ("DUCK" at byte 8), or StoreError: DuckDB
    reads an SQLite file by downloading an extension (a network call, then an IO error)."""
    if path == ":memory:" or not Path(path).is_file():
        return
    with open(path, "rb") as f:
        head = f.read(12)
    if head[8:12] != b"DUCK":
        kind = ("an empty file" if not head else "an SQLite database" if head.startswith(b"SQLite forma")
                else "not a DuckDB file")
        raise StoreError(f"not a perflearn store ({kind})", where=path)
