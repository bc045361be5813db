"""A dataset: one row per run, knob and context columns, then metric columns.

This is what the learning side consumes, whether the runs were measured by
perflearn's runner or imported from a CSV measured elsewhere.
"""

from __future__ import annotations

import csv
import io
import warnings
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from perflearn.errors import UsageError

RUN_COLUMNS = ("run_id", "point_id", "rep", "status")
STATUSES = ("ok", "failed", "timeout", "skipped")  # as store.base.STATUSES (base imports this module)


def listed(names: list) -> str:
    """Column names joined by ", ", a name that holds a comma, or starts or ends with a
    space, quoted: ``a, "lat,p95", " y"`` (``a,  y`` hid the space a header left)."""
    return ", ".join(f'"{n}"' if "," in str(n) or str(n) != str(n).strip() else str(n) for n in names)


def name_hint(name: str, names: list) -> str:
    """Where ``name`` is a piece of a name that holds a comma, how to name that whole; where
    it is a name but for spaces around it (a header ``a, y``), which."""
    whole = next((str(n) for n in names if "," in str(n) and name in str(n).split(",")), None)
    if whole:
        return f"; a name that holds a comma is quoted, as in the CSV: '\"{whole}\"'"
    spaced = next((str(n) for n in names if str(n) != name and str(n).strip() == name.strip()), None)
    return f"; the column is {spaced!r}, with its spaces" if spaced else ""


def no_column(name: str, columns: list) -> str:
    return f"no column {name!r} (columns: {listed(columns)}){name_hint(name, columns)}"


@dataclass
class Dataset:
    """Runs of one experiment in wide form.

    ``frame`` has the columns ``run_id, point_id, rep, status``, then one column
    per knob and per context feature, then one float column per metric, where a
    missing value (unsupported, failed run) is NaN, never 0.
    ``kinds`` says for each knob/context column whether it is ``numeric`` or
    ``categorical``; ``units`` gives each metric's unit ("" when unknown).
    ``constraints`` are the expressions over knobs the design required of every point
    (a spec's ``[design] constraints``, as written): which combinations of knob values
    are configurations at all.
    """

    experiment: str
    frame: pd.DataFrame
    knobs: list[str]
    metrics: list[str]
    context: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    constraints: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reader should hear of how the data was read
    source: str = ""  # the CSV read, if any: errors name the file, not its stem ("x: unknown feature")

    @property
    def where(self) -> str:
        """Where the runs came from, for an error line: the CSV's path, else the experiment's name."""
        return self.source or self.experiment

    @property
    def features(self) -> list[str]:
        """Knob and context columns: what a model may predict from."""
        return [*self.knobs, *self.context]

    def ok(self) -> pd.DataFrame:
        """Only the runs whose status is ok."""
        return self.frame[self.frame["status"] == "ok"]

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        metrics: list[str],
        knobs: list[str] | None = None,
        context: list[str] | None = None,
        name: str | None = None,
    ) -> "Dataset":
        """Read a CSV of knob columns + metric columns (one row per run).

        Columns named in ``metrics`` are metrics, those in ``context`` are context;
        every other column is a knob unless ``knobs`` names them explicitly.
        A ``status`` column is kept if present (else every row is ``ok``).
        """
        path = Path(path)
        with csv_errors(path):
            raw = read_csv_runs(path)
        ds = cls.from_frame(raw, metrics, knobs, context, name or path.stem, where=str(path))
        ds.source = str(path)
        return ds

    @classmethod
    def from_frame(
        cls,
        raw: pd.DataFrame,
        metrics: list[str],
        knobs: list[str] | None = None,
        context: list[str] | None = None,
        name: str = "dataset",
        where: str = "dataset",
    ) -> "Dataset":
        # one name given as text, not a list: "lat" was read letter by letter ("no column 'l'")
        metrics, knobs, context = (_names(v, where) for v in (metrics, knobs, context))
        context = list(context or [])
        if not metrics:
            raise UsageError("name at least one metric column", where=where)
        columns = list(raw.columns)
        for col in [*metrics, *context, *(knobs or [])]:
            if col not in columns:
                raise UsageError(no_column(col, columns), where=where)
        roles = [("metric", c) for c in metrics] + [("context", c) for c in context] + [("knob", c) for c in knobs or []]
        seen: dict[str, str] = {}
        for role, col in roles:  # one role per column: a metric that is also a knob would model itself
            if col in seen:
                twice = "given twice" if seen[col] == role else f"both a {seen[col]} and a {role}"
                raise UsageError(f"column {col!r} is {twice}", where=where)
            seen[col] = role
        if raw.empty:
            raise UsageError("no data rows (only a header)", where=where)
        reserved = set(RUN_COLUMNS)
        named = next((c for _, c in roles if c in reserved), None)
        if named is not None:  # it collided with the run's own column of that name
            raise UsageError(f"column {named!r} is one every run has ({', '.join(RUN_COLUMNS)}): rename it to use it "
                             "as a metric, knob or context", where=where)
        if knobs is None:
            knobs = [c for c in columns if c not in metrics and c not in context and c not in reserved]
        if not knobs and not context:
            raise UsageError("no knob or context columns left besides the metrics", where=where)
        frame = pd.DataFrame(index=raw.index)
        frame["run_id"] = raw["run_id"] if "run_id" in raw else range(1, len(raw) + 1)
        features = [*knobs, *context]
        frame["point_id"] = raw.groupby(features, dropna=False, sort=False).ngroup() + 1
        frame["rep"] = raw.groupby(features, dropna=False, sort=False).cumcount()
        if "status" in raw:
            odd = ~raw["status"].isin(STATUSES)  # an empty cell or "OK" is no status: ls would count it nowhere
            if odd.any():
                row = int(odd.to_numpy().argmax())
                raise UsageError(f"column 'status' has {raw['status'].iloc[row]!r} (data row {row + 1}); "
                                 f"expected one of {', '.join(STATUSES)}", where=where)
        frame["status"] = raw["status"].astype(str) if "status" in raw else "ok"
        kinds, notes, columns = {}, [], {}  # joined at the end: a column at a time warned per column past 100
        if "run_id" not in raw:  # not an export: a column "rep" or "point_id" may be the user's knob, dropped unsaid
            notes += [f"column {c!r} is taken for the run's own {c} column, as in a perflearn export, and dropped "
                      f"({c} is counted from the knobs), not read as a knob: rename it to use it as one"
                      for c in ("point_id", "rep") if c in raw]
        for col in features:
            columns[col] = raw[col]
            # true/false are two categories: as numbers 0 and 1, --set flag=True was refused and
            # recommend said flag=1, a value the data never had
            numeric = pd.api.types.is_numeric_dtype(raw[col]) and not pd.api.types.is_bool_dtype(raw[col])
            kinds[col] = "numeric" if numeric else "categorical"
            if kinds[col] == "categorical":
                notes += _mostly_numbers(raw[col])
        for col in metrics:
            values = pd.to_numeric(raw[col], errors="coerce")
            bad = values.isna() & raw[col].notna() & ~raw[col].isin(MISSING_WORDS)
            if bad.any():
                row = int(bad.idxmax())
                raise UsageError(
                    f"metric column {col!r} has a non-numeric value {raw[col][row]!r} (data row {row + 1})", where=where
                )
            infinite = np.isinf(values.to_numpy(dtype=float))
            if infinite.any():  # an empty cell or NaN is a missing value (NULL); inf is no measurement
                row = int(np.argmax(infinite))
                raise UsageError(f"metric column {col!r} has an infinite value {raw[col][row]} (data row {row + 1}); "
                                 "leave the cell empty for a missing value", where=where)
            columns[col] = values.astype(float)
        frame = pd.concat([frame, pd.DataFrame(columns, index=raw.index)], axis=1)
        return cls(
            experiment=name,
            frame=frame.reset_index(drop=True),
            knobs=list(knobs),
            metrics=list(metrics),
            context=context,
            units={m: "" for m in metrics},
            kinds=kinds,
            notes=notes,
        )

    def per_sample(self, samples: pd.DataFrame, context: list[str] | None = None, warmup: float = 0.0) -> "Dataset":
        """One row per run and sample time instead of one per run.

        ``samples`` is the store's long form (run_id, metric, t, value). Each row keeps
        its run's knobs and context, and every signal sampled at that time becomes a
        metric column named as stored (e.g. ``wire.p95_us``); the signals named in
        ``context`` become context instead (e.g. ``wire.rps``, the load an interval
        really carried). This is what a controller sees every interval, so a model of
        it learns from many intervals rather than one summary per run. Samples taken in
        the first ``warmup`` seconds of a run are left out (e.g. a load generator's
        preload). A signal not sampled at a time is NaN there; runs that are not ok keep
        their status.
        """
        context = list(context or [])
        if warmup < 0:
            raise UsageError(f"warm-up must be at least 0 s, got {warmup:g}", where="--warmup")
        if samples.empty:
            raise UsageError("no samples stored: the experiment's collectors recorded no time series",
                             where=self.experiment)
        samples = samples[samples["t"] >= warmup]
        if samples.empty:
            raise UsageError(f"no samples after the first {warmup:g} s of any run", where="--warmup")
        names = sorted(samples["metric"].unique())
        unknown = [c for c in context if c not in names]
        if unknown:
            raise UsageError(f"no sampled signal {unknown[0]!r} (sampled: {', '.join(names)})", where=self.experiment)
        wide = samples.groupby(["run_id", "t", "metric"])["value"].first().unstack("metric").reset_index()
        wide.columns.name = None
        runs = self.frame.drop(columns=self.metrics)
        frame = runs.merge(wide, on="run_id", how="inner").drop(columns="t")
        metrics = [n for n in names if n not in context]
        return Dataset(
            experiment=self.experiment,
            frame=frame.reset_index(drop=True),
            knobs=list(self.knobs),
            metrics=metrics,
            context=[*self.context, *context],
            units={m: "" for m in metrics},
            kinds={**self.kinds, **{c: "numeric" for c in context}},
        )


@contextmanager
def csv_errors(path: str | Path):
    """A missing or unparseable CSV file as one UsageError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise UsageError("no such file", where=str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UsageError(f"not a readable CSV ({str(exc).splitlines()[0]})", where=str(path)) from None
    except (OSError, EOFError, zlib.error) as exc:  # "Not a gzipped file" named no file
        raise UsageError(f"cannot read it ({(str(exc).splitlines() or [type(exc).__name__])[0]})",
                         where=str(path)) from None


def gunzip(data: bytes) -> bytes:
    """What a gzip file holds, also without its trailer (a run killed as it wrote: ``perflearn
    manage --csv x.csv.gz`` sync-flushes every row, and gzip refused the whole file for the
    missing end) and over several members (appended one by one)."""
    out, rest = [], data
    while rest[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(rest))
        rest = d.unused_data
    return b"".join(out)


def csv_source(path: str | Path):
    """``path``, or a gzip file's data (see ``gunzip``) to read in its place."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return io.BytesIO(gunzip(Path(path).read_bytes())) if gzipped else Path(path)


def csv_header(path: str | Path) -> list[str]:
    """The column names of a CSV file as written; a UsageError for a column named twice (pandas
    renames a second "a" to "a.1": the data would land under a name the file never gave, and
    --metric a would read only the first of them). pandas' own errors pass through."""
    header = pd.read_csv(csv_source(path), header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
    where = str(path)
    first: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if not name.strip() and position < len(header):  # the last may be a trailing delimiter's: read_csv_runs
            raise UsageError(_no_name(position), where=where)
        if name in first:
            raise UsageError(f"column {name!r} appears twice in the header (columns {first[name]} and {position})",
                             where=where)
        first[name] = position
    return header


# written for a missing number by R, Excel, pandas and databases; in a column of words a
# category ("None" compression, "NA" region), so missing only where the rest are numbers
MISSING_WORDS = ("NA", "N/A", "#N/A", "NaN", "nan", "-nan", "NULL", "null", "None", "<NA>")


def _mostly_numbers(column: pd.Series) -> list[str]:
    """A note when a column read as categories is numbers but for a few cells: one stray
    '?' made 400 continuous values 400 categories, the fit 3 times worse, without a word."""
    given = column.dropna()
    words = given[pd.to_numeric(given, errors="coerce").isna()]
    if len(given) < 10 or not 0 < len(words) <= 0.1 * len(given):
        return []
    row = int(words.index[0])
    return [f"column {column.name!r} is read as categories: {len(given) - len(words)} of its {len(given)} values "
            f"are numbers, but {words.iloc[0]!r} (data row {row + 1}) is not; fix the cell if it is a typo"]


def _no_name(position: int) -> str:
    # pandas calls such a column "Unnamed: 0" and every later command would offer it as a knob
    why = ": pandas' to_csv writes its row index there unless index=False" if position == 1 else ""
    return f"column {position} has no name in the header{why}; name it or leave it out"


def _beyond_header(path: str | Path) -> str:
    """Where a row has a value past the header's last column."""
    source = csv_source(path)
    with open(source, newline="") if isinstance(source, Path) else io.TextIOWrapper(source, newline="") as f:
        rows = csv.reader(f)
        header = next(rows)
        for line, row in enumerate(rows, start=2):
            if len(row) > len(header) and any(cell.strip() for cell in row[len(header):]):
                return (f"line {line} has {len(row)} fields, the header {len(header)}: a value past the last column "
                        f"({row[len(header)]!r}); a delimiter too many?")
    return f"a row has more fields than the header's {len(header)}"


def read_csv_runs(path: str | Path) -> pd.DataFrame:
    """A CSV of runs, its header checked (``csv_header``): an empty cell is missing; a word
    such as "None" or "NA" is missing in a column of numbers and a category in a column of
    words (pandas' default reads it as missing everywhere, and the runs of one category
    vanished from a fit)."""
    last = csv_header(path)[-1]  # a column named twice, or without a name, is refused
    with warnings.catch_warnings():
        # index_col=False: a row with one field more than the header made pandas take the first
        # column as the index (a trailing comma on every row left the target NULL in every run);
        # a trailing delimiter is now dropped, and a value past the header refused
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            raw = pd.read_csv(csv_source(path), keep_default_na=False, na_values=[""], index_col=False)
        except pd.errors.ParserWarning:
            raise UsageError(_beyond_header(path), where=str(path)) from None
    if not last.strip():  # a trailing delimiter on every line, the header's included: nothing there
        column = raw.columns[-1]
        if raw[column].notna().any():
            raise UsageError(_no_name(len(raw.columns)), where=str(path))
        raw = raw.drop(columns=column)
    for col in raw.columns:
        if raw[col].dtype == object or pd.api.types.is_string_dtype(raw[col]):
            text = raw[col].where(~raw[col].isin(MISSING_WORDS))
            numbers = pd.to_numeric(text, errors="coerce")
            if text.notna().any() and (numbers.notna() == text.notna()).all():
                raw[col] = numbers
    return raw


def _names(value: str | list[str] | None, where: str) -> list[str] | None:
    """Column names given as a list, or as one text of comma-separated names (quoted as in
    the CSV where one holds a comma); an empty text is none."""
    if not isinstance(value, str):
        return value
    return split_list(value, where) if value.strip() else None


def split_list(value: str | list[str] | None, where: str | None = None) -> list[str] | None:
    """Comma-separated items, read as a CSV line: an item that holds a comma is quoted
    (``'"lat,p95",T'``; ``'"a,b"=1'`` for ``--set``), as the CSV it names its column in.
    With ``where`` (the option), a value given that names nothing (``-f ''``) or has an
    empty item (``-f 'a,,b'``) is refused: it was read as every feature, or as ``a,b``."""
    if value is None:
        return None
    parts = [value] if isinstance(value, str) else [str(part) for part in value]
    items = []
    try:
        for part in parts:  # an empty part (-c '') is an empty item: the reader makes no row of it
            items += [v.strip() for row in csv.reader([part], skipinitialspace=True) for v in row] or [""]
    except csv.Error as exc:  # a line break in an unquoted item
        raise UsageError(f"cannot read {parts!r} as a comma-separated list ({exc})", where=where or "arguments") from None
    if where is not None and not all(items):
        shown = repr(value) if isinstance(value, str) else ", ".join(map(repr, parts))
        raise UsageError(f"an empty name in {shown}: give each one (e.g. a,b)" if any(items) else
                         f"nothing named in {shown}", where=where)
    items = [v for v in items if v]
    return items or None
