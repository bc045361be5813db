"""Core commands: validate and run experiments; list, show, export and import results."""

from __future__ import annotations

import math
import shlex
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.markup import escape
from rich.table import Table

from perflearn.errors import UsageError

# The runner and the store (pandas, DuckDB) are imported inside the commands that use
# them, so that every command — and `perflearn inject` as a companion — starts fast.
FORMATS = ("csv", "parquet")  # as perflearn.store.export.FORMATS, without importing the store

from . import terminal
from .app import DEFAULT_STORE, StoreOpt, app

SpecArg = Annotated[Path, typer.Argument(help="Experiment spec (TOML).", show_default=False)]
ValuesOpt = Annotated[Optional[list[str]], typer.Option(
    "--values", metavar="NAME=V1,V2,...",
    help="Replace a knob's values (repeatable), e.g. loads derived from a knee: --values rate=5700,11400.")]


def _load(spec_path: Path, values: Optional[list[str]]):
    from perflearn.experiment.spec import load_spec, parse_values

    given = [parse_values(v) for v in values or []]
    names = [name for name, _ in given]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:  # the last would win silently
        raise UsageError(f"--values {twice} is given twice")
    return load_spec(spec_path, dict(given))


@app.command()
def validate(
    spec_path: SpecArg,
    show_plan: Annotated[bool, typer.Option("--plan", help="Print every planned run.")] = False,
    values: ValuesOpt = None,
) -> None:
    """Check a spec and this machine without running anything; print the plan's size."""
    from perflearn.experiment.design import plan
    from perflearn.runner.runner import check_machine, missing_programs

    spec = _load(spec_path, values)
    _, _, warnings = check_machine(spec)
    # a warning, not an error: the spec's setup commands may build the program (`run` checks after them)
    for warning in warnings + missing_programs(spec):
        terminal.warn(warning)
    runs = plan(spec)
    points = len({r.point_id for r in runs})
    terminal.out.print(f"{spec.path}: ok — experiment {spec.name!r}, {len(spec.knobs)} knobs, "
                       f"{len(spec.metrics)} metrics, {points} points x {spec.design.repeat} repeats = {len(runs)} runs")
    if show_plan:
        table = Table("seq", "point", "rep", *spec.knobs, box=None)
        for r in runs:
            table.add_row(str(r.seq), str(r.point_id), str(r.rep), *(_fmt(v) for _, v in r.values))
        terminal.out.print(table)


class _Progress:
    """A progress bar with ETA, and a line per point with mean ± 95% CI as its runs complete."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.progress: Progress | None = None
        self.task = None
        self.by_point: dict[int, list] = {}
        self.remaining: dict[int, int] = {}
        self.metrics: list[str] = []
        self.missing_said: set[str] = set()

    def warning(self, message: str) -> None:
        terminal.warn(message)

    def started(self, experiment, total, todo) -> None:
        self.metrics = [m.name for m in experiment.metrics][:3]
        for run in todo:
            self.remaining[run.point_id] = self.remaining.get(run.point_id, 0) + 1
        done = total - len(todo)
        terminal.info(f"experiment {experiment.name!r}: {total} runs planned, {done} stored already, {len(todo)} to run")
        if self.quiet or not todo:
            return
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 console=terminal.err, transient=True)
        self.progress.start()
        self.task = self.progress.add_task("running", total=len(todo))

    def run_started(self, planned) -> None:
        if self.progress:
            self.progress.update(self.task, description=f"point {planned.point_id} rep {planned.rep}")

    def run_finished(self, planned, record) -> None:
        self.by_point.setdefault(planned.point_id, []).append(record)
        if record.status == "ok":  # say once per metric that it came out missing, and why
            for metric, reason in record.missing.items():
                if metric not in self.missing_said:
                    self.missing_said.add(metric)
                    terminal.warn(f"metric {metric} is missing (NULL) in point {planned.point_id} rep {planned.rep}: "
                                  f"{reason}")
        self.remaining[planned.point_id] -= 1
        if record.status != "ok" and not self.quiet:
            terminal.warn(f"point {planned.point_id} rep {planned.rep}: {record.status}: {record.error}")
        if self.progress:
            self.progress.advance(self.task)
        if self.remaining[planned.point_id] == 0 and not self.quiet:
            records = self.by_point[planned.point_id]
            ok = [r for r in records if r.status == "ok"]
            knobs = " ".join(f"{k}={_fmt(v)}" for k, v in planned.values)
            parts = []
            from perflearn.store.summary import describe

            for metric in self.metrics:
                stats = describe([r.values.get(metric) for r in ok])
                if stats["n"]:
                    ci = "" if math.isnan(stats["ci95"]) else f" ± {_num(stats['ci95'])}"
                    said = [] if math.isnan(stats["std"]) else [f"sd {_num(stats['std'])}"]
                    said += [f"n={stats['n']}"] if stats["n"] < len(ok) else []  # missing in some runs
                    parts.append(f"{metric} {_num(stats['mean'])}{ci}" + (f" ({', '.join(said)})" if said else ""))
            failed = len(records) - len(ok)
            line = f"point {planned.point_id} [{knobs}]: " + (", ".join(parts) or "no values")
            line += f" (n={len(ok)}" + (f", {failed} not ok)" if failed else ")")
            (self.progress.console if self.progress else terminal.err).print(line, markup=False, highlight=False)

    def close(self) -> None:
        if self.progress:
            self.progress.stop()


@app.command()
def run(
    spec_path: SpecArg,
    store: StoreOpt = DEFAULT_STORE,
    resume: Annotated[bool, typer.Option("--resume", help="Continue a stopped experiment; runs stored are not rerun.")] = False,
    allow_changed_spec: Annotated[bool, typer.Option("--allow-changed-spec", help="With --resume: continue even though the spec changed.")] = False,
    name: Annotated[Optional[str], typer.Option("--name", help="Experiment name (default: the spec's).")] = None,
    keep_run_dirs: Annotated[bool, typer.Option("--keep-run-dirs", help="Keep each run's directory (outputs) for inspection.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, point lines or summary table: only the plan line, warnings and the closing line.")] = False,
    values: ValuesOpt = None,
    stop_after_failures: Annotated[int, typer.Option("--stop-after-failures", help="Stop when this many first runs, at two points or more, fail alike (same error) before any is ok; 0: never.")] = 5,
) -> None:
    """Run an experiment: every point of the design, each run stored as it completes."""
    from perflearn.runner.runner import run_experiment
    from perflearn.store import open_store

    if stop_after_failures < 0:
        raise UsageError(f"--stop-after-failures must be 0 (never) or more, got {stop_after_failures}",
                         where="--stop-after-failures")
    spec = _load(spec_path, values)
    if name is not None:
        spec.name = _experiment_name(name)
    observer = _Progress(quiet)
    # the same experiment again: its name, values and store, which the spec alone does not say
    again = ["perflearn", "run", str(spec_path), *(["--name", name] if name else []),
             *(arg for v in values or [] for arg in ("--values", v)),
             *(["--store", str(store)] if Path(store) != DEFAULT_STORE else []), "--resume"]
    with open_store(store) as results:
        try:
            outcome = run_experiment(spec, results, resume=resume, allow_changed_spec=allow_changed_spec,
                                     observer=observer, keep_run_dirs=keep_run_dirs,
                                     stop_after_failures=stop_after_failures, resume_command=shlex.join(again))
        finally:
            observer.close()
        if keep_run_dirs and outcome.ran:
            from perflearn.runner.execute import default_run_root

            terminal.info(f"run directories kept under {default_run_root() or tempfile.gettempdir()} "
                          "(each run's own: its notes, `store.runs(NAME)`)")
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(outcome.by_status.items())) or "nothing to run"
        terminal.info(f"{outcome.experiment}: {statuses}; {outcome.already + outcome.ran}/{outcome.planned} runs stored in {store}")
        if not quiet and outcome.ran:
            _print_summary(results.dataset(spec.name))


@app.command("ls")
def list_experiments(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the experiments in the store."""
    from perflearn.store import open_store

    with open_store(store, read_only=True) as results:
        frame = results.experiments()
    table = Table("experiment", "source", "created", "runs", "ok", "failed", "timeout", "skipped", box=None)
    for row in frame.itertuples(index=False):
        table.add_row(row.name, row.source, f"{row.created:%Y-%m-%d %H:%M}", str(row.runs), str(row.ok),
                      str(row.failed), str(row.timeout), str(row.skipped))
    terminal.out.print(table)


def _missing_by_run(measurements, run_ids, metrics: list[str]) -> dict[int, str]:
    """Per run, its NULL metrics grouped by their reason: "a, b: reason; c: other". A metric
    of ``metrics`` a run has no value of at all was added later (``--resume
    --allow-changed-spec``): it showed as NULL with no reason, though every NULL has one."""
    import pandas as pd

    later = "not in the spec when the run was measured"
    had = measurements.groupby("run_id")["metric"].agg(set).to_dict()
    absent = [{"run_id": r, "metric": m, "value": None, "missing_reason": later}
              for r in run_ids for m in metrics if m not in had.get(r, set())]
    rows = pd.concat([measurements, pd.DataFrame(absent, columns=measurements.columns)]) if absent else measurements
    null = rows[rows["value"].isna()]
    out: dict[int, str] = {}
    for run_id, group in null.groupby("run_id"):
        by_reason = group.fillna({"missing_reason": "no reason stored"}).groupby("missing_reason", sort=False)["metric"]
        out[int(run_id)] = "; ".join(f"{', '.join(m)}: {reason}" for reason, m in by_reason)
    return out


@app.command()
def show(
    experiment: Annotated[str, typer.Argument(help="Experiment name (see perflearn ls).")],
    store: StoreOpt = DEFAULT_STORE,
    metric: Annotated[Optional[list[str]], typer.Option("--metric", "-m", help="Only these metrics.")] = None,
    runs: Annotated[bool, typer.Option("--runs", help="One row per run, with status and error, instead of per point.")] = False,
    full: Annotated[Optional[bool], typer.Option("--full/--compact", help="Mean, median, std and 95% CI in separate columns, or mean ± CI only (default: full for up to 3 metrics).")] = None,
) -> None:
    """A table per point: mean, median, std and 95% CI of each metric over ok runs; failures counted."""
    from perflearn.store import open_store

    with open_store(store, read_only=True) as results:
        info = results.require(experiment)
        if runs:
            frame = results.runs(experiment)
            missing = _missing_by_run(results.measurements(experiment), frame["run_id"].tolist(),
                                      results.dataset(experiment).metrics)
            table = Table("run", "point", "rep", "status", "exit", "wall s", "error", "missing (why)", box=None)
            for row in frame.itertuples(index=False):
                error = row.error if isinstance(row.error, str) else ""  # NaN beside failed runs' text
                said = row.stderr_tail.strip().splitlines() if isinstance(row.stderr_tail, str) else []
                if said and row.status != "ok":  # why, in the workload's words (its last line on stderr)
                    error = f"{error}: {said[-1][:200]}"
                why = missing.get(row.run_id, "") if row.status == "ok" else ""  # a failed run misses all
                table.add_row(str(row.run_id), str(row.point_id), str(row.rep), row.status, _fmt(row.exit_code),
                              _num(row.wall_s), escape(error), escape(why))
            terminal.out.print(table)
            return
        dataset = results.dataset(experiment)
    unknown = [m for m in (metric or []) if m not in dataset.metrics]
    if unknown:
        raise UsageError(f"no metric {unknown[0]!r} in {experiment!r} (metrics: {', '.join(dataset.metrics)})")
    host = info.host
    if host:
        terminal.info(f"{experiment}: {info.source} on {host.get('hostname')} ({host.get('cpu_model')}, "
                      f"{host.get('cores')} cores, kernel {host.get('kernel')})")
    _print_summary(dataset, metric, full)


def _print_summary(dataset, metrics: list[str] | None = None, full: bool | None = None) -> None:
    from perflearn.store.summary import summarize

    metrics = metrics or dataset.metrics
    if full is None:
        full = len(metrics) <= 3
    summary = summarize(dataset, metrics)
    ok_runs = summary["runs"] - summary["failed"]
    # a metric missing (NULL) in some ok runs: its own count, or its mean looks like the point's
    partial = {m for m in metrics if (summary[f"{m}.n"] < ok_runs).any()}
    table = Table("point", *dataset.features, "runs", "not ok", box=None)
    for m in metrics:
        unit = escape(f" [{dataset.units.get(m)}]") if dataset.units.get(m) else ""
        if full:
            for stat in ("mean", "median", "std", "±95%") + (("n",) if m in partial else ()):
                table.add_column(f"{m}{unit} {stat}" if stat == "mean" else stat, justify="right")
        else:
            table.add_column(f"{m}{unit}", justify="right")
    for row in summary.to_dict("records"):
        cells = [str(row["point_id"]), *(_fmt(row[f]) for f in dataset.features), str(row["runs"]), str(row["failed"])]
        for m in metrics:
            mean, ci, n = row[f"{m}.mean"], row[f"{m}.ci95"], int(row[f"{m}.n"])
            if full:
                cells += [_num(mean), _num(row[f"{m}.median"]), _num(row[f"{m}.std"]), _num(ci)]
                cells += [str(n)] if m in partial else []
            else:
                cells.append(_num(mean) + ("" if math.isnan(ci) else f" ± {_num(ci)}")
                             + (f" (n={n})" if n < row["runs"] - row["failed"] else ""))
        table.add_row(*cells)
    terminal.out.print(table)


@app.command("export")
def export_cmd(
    experiment: Annotated[str, typer.Argument(help="Experiment name.")],
    store: StoreOpt = DEFAULT_STORE,
    fmt: Annotated[str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")] = "csv",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default EXPERIMENT.FORMAT; "
                                                   "- for standard output).")] = None,
    samples: Annotated[Optional[Path], typer.Option("--samples", help="Also write the runs' interval samples "
                                                    "(run_id, metric, t, value) to this file, in the same format.")] = None,
) -> None:
    """Write the dataset (one row per run: knob columns + metric columns) to CSV or Parquet."""
    from perflearn.store import open_store
    from perflearn.store.export import export, export_frame

    if fmt not in FORMATS:
        raise UsageError(f"--format: unknown format {fmt!r} (one of: {', '.join(FORMATS)})")
    runs_path = output or Path(f"{experiment}.{fmt}")
    if str(runs_path) == "-" and str(samples) == "-":
        raise UsageError("--output and --samples are both standard output: give one a file")
    if samples is not None and samples.resolve() == runs_path.resolve():
        raise UsageError(f"--samples and the runs' file are both {str(samples)!r}: the samples would overwrite the runs")
    for option, path in (("--output", output), ("--samples", samples)):  # both checked before either is written
        if path is not None and not path.parent.is_dir():
            raise UsageError(f"no such directory {str(path.parent)!r}", where=option)
    with open_store(store, read_only=True) as results:
        dataset = results.dataset(experiment)
        series = results.samples(experiment) if samples else None
    path = export(dataset, output or Path(f"{experiment}.{fmt}"), fmt)
    terminal.info(f"wrote {len(dataset.frame)} runs to {'standard output' if str(path) == '-' else path}")
    if samples:
        export_frame(series, samples, fmt)
        terminal.info(f"wrote {len(series)} samples to {'standard output' if str(samples) == '-' else samples}")


@app.command("import")
def import_cmd(
    csv: Annotated[Path, typer.Argument(help="CSV with one row per run: knob columns and metric columns.")],
    metric: Annotated[list[str], typer.Option("--metric", "-m", help="Metric columns (a,b or repeated).")],
    store: StoreOpt = DEFAULT_STORE,
    context: Annotated[Optional[list[str]], typer.Option("--context", "-c", help="Context columns (a,b or repeated).")] = None,
    knob: Annotated[Optional[list[str]], typer.Option("--knob", "-k", help="Knob columns (default: all other columns).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Experiment name (default: the file's stem).")] = None,
) -> None:
    """Import a dataset measured elsewhere, so models can be trained on it too."""
    from perflearn.store import Dataset, open_store

    # -m a,b as fit's -f and -m take it (it was one column named 'a,b')
    metric, knob, context = (_columns(names) if names else names for names in (metric, knob, context))
    dataset = Dataset.from_csv(csv, metrics=metric, knobs=knob, context=context,
                               name=None if name is None else _experiment_name(name))
    empty = [k for k in [*dataset.knobs, *dataset.context] if dataset.frame[k].isna().all()]
    if empty:  # taken as a knob of no value in any run (session 61's audit): an empty metric column, unnamed
        raise UsageError(f"column {empty[0]!r} is empty in every row: no knob or context; name it with --metric "
                         "if it is a measure", where=str(csv))
    for note in dataset.notes:
        terminal.warn(note)
    with open_store(store) as results:
        results.import_dataset(dataset, dataset.experiment)
    terminal.info(f"imported {len(dataset.frame)} runs as {dataset.experiment!r}: knobs {', '.join(dataset.knobs)}; "
                  f"metrics {', '.join(dataset.metrics)}")


def _columns(values: list[str]) -> list[str]:
    """Column names given repeated, comma-separated, or both."""
    return [c.strip() for value in values for c in value.split(",") if c.strip()]


def _experiment_name(name: str) -> str:
    from perflearn.experiment.spec import experiment_name_problem

    problem = experiment_name_problem(name)
    if problem:
        raise UsageError(problem, where="--name")
    return name


def _num(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    value = float(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e6 or abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


def _fmt(value) -> str:
    """A knob value or text for a table cell (escaped: "[x]" is not rich markup)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return escape(str(value))
