"""Interference: inject it, learn to detect it, watch for it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from perflearn.errors import UsageError

from . import terminal
from .app import DEFAULT_STORE, StoreOpt, app, check_output, interrupt_on_sigterm

detect_app = typer.Typer(help="Detect interference from interval samples, and predict its slowdown.",
                         no_args_is_help=True)
app.add_typer(detect_app, name="detect")

INJECTOR_NAMES = ("none", "cpuoccupy", "membw", "cachecopy", "memleak", "memeater", "iobw", "netflood")


@app.command()
def inject(
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"One of: {', '.join(INJECTOR_NAMES)}.")],
    intensity: Annotated[float, typer.Option(help="Share of the time (or of memory) it occupies, 0 < x <= 1.")] = 1.0,
    duration: Annotated[str, typer.Option(help="How long (e.g. 30s); default: until stopped.",
                                          show_default=False)] = "1000000s",
    victim_cpus: Annotated[Optional[str], typer.Option("--victim-cpus", help="CPUs of the workload (e.g. 0 or 0-3).")] = None,
    level: Annotated[str, typer.Option(help="Cache level for cachecopy: L1, L2 or L3.")] = "L3",
) -> None:
    """Occupy one shared resource of this node (HPAS-style), e.g. as a companion in a spec."""
    from perflearn.detect.injectors import INJECTORS
    from perflearn.experiment.actuators import parse_cpus
    from perflearn.experiment.units import parse_duration

    if kind not in INJECTORS:
        raise UsageError(f"unknown injector {kind!r} (one of: {', '.join(INJECTORS)})")
    if not 0 < intensity <= 1:
        raise UsageError(f"--intensity: expected 0 < x <= 1, got {intensity}")
    if level.upper() not in ("L1", "L2", "L3"):
        raise UsageError(f"--level: expected L1, L2 or L3, got {level!r}")
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise UsageError(str(exc), where="--duration") from None
    try:
        victim = parse_cpus(victim_cpus) if victim_cpus else set()
    except ValueError as exc:
        raise UsageError(str(exc), where="--victim-cpus") from None
    absent = sorted(victim - set(range(os.cpu_count() or 1)))
    if absent:  # the injector keeps off the victim's CPUs: one it does not have protects nothing
        raise UsageError(f"CPU {absent[0]} does not exist here (CPUs 0-{(os.cpu_count() or 1) - 1})",
                         where="--victim-cpus")
    interrupt_on_sigterm()
    try:
        INJECTORS[kind](intensity, seconds, victim, level=level.upper())
    except KeyboardInterrupt:
        pass


def _training(store: Path, experiment: Optional[str], files: tuple[Optional[Path], Optional[Path]], label: str,
              group: list[str], time_metric: Optional[str], window: int):
    """Windows and labels from a stored experiment, or from files `perflearn export --samples` wrote."""
    import pandas as pd

    from perflearn.detect.features import window_features
    from perflearn.detect.model import training_set
    from perflearn.detect.watch import samples_interval

    if window < 1:
        raise UsageError(f"--window: at least 1 sampling tick, got {window}")
    runs_file, samples_file = files
    if (experiment is None) == (runs_file is None and samples_file is None):
        raise UsageError("give an EXPERIMENT in the store, or --runs FILE and --samples FILE (perflearn export --samples)")
    knobs = None  # unknown in files: their columns hold knobs and metrics alike
    if experiment is None:
        from perflearn.store.export import read_frame

        if runs_file is None or samples_file is None:
            raise UsageError("--runs and --samples go together")
        runs, samples = read_frame(runs_file), read_frame(samples_file)
        missing = {"run_id", "metric", "t", "value"} - set(samples.columns)
        if missing or "run_id" not in runs or "status" not in runs:
            raise UsageError("not the runs and samples perflearn export writes (need run_id, status; "
                             "run_id, metric, t, value)", where=str(samples_file if missing else runs_file))
        source = str(samples_file)
        if samples.empty:
            raise UsageError("no interval samples (only a header)", where=source)
        for column in ("t", "value"):  # a text cell would fail deep in the window arithmetic
            if not pd.api.types.is_numeric_dtype(samples[column]):
                bad = pd.to_numeric(samples[column], errors="coerce").isna() & samples[column].notna()
                if not bad.any():  # every cell empty, or numbers in a column of objects
                    samples[column] = pd.to_numeric(samples[column], errors="coerce")
                    continue
                row = int(bad.to_numpy().argmax())
                raise UsageError(f"column {column!r} has a non-numeric value {samples[column].iloc[row]!r} "
                                 f"(data row {row + 1})", where=source)
    else:
        from perflearn.store import open_store

        with open_store(store, read_only=True) as results:
            dataset = results.dataset(experiment)
            runs = dataset.frame
            knobs = [c for c in runs.columns if c in {*dataset.knobs, *dataset.context}]
            samples = results.samples(experiment)
        source = f"experiment {experiment!r}"
        if samples.empty:
            raise UsageError("no interval samples (does its spec have [sampling]?)", where=source)
    try:
        interval = samples_interval(samples)
    except UsageError as exc:
        raise UsageError(exc.message, where=source) from None
    windows = window_features(samples, interval, window)
    if windows.empty:
        raise UsageError(f"too few samples for windows of {window} ticks", where=source)
    return training_set(windows, runs, label, group, time_metric, knobs=knobs), interval


LabelOpt = Annotated[str, typer.Option(help="Knob that names the interference of a run ('none' = healthy).")]
GroupOpt = Annotated[Optional[list[str]], typer.Option("--group", help="Knob to hold out in evaluation (workload, input).")]
TimeOpt = Annotated[Optional[str], typer.Option("--time-metric", help="Runtime metric, for the slowdown regressor.")]
WindowOpt = Annotated[int, typer.Option(help="Sampling ticks per window.")]
ExperimentArg = Annotated[Optional[str], typer.Argument(help="Experiment with [sampling] and an interference knob.")]
RunsOpt = Annotated[Optional[Path], typer.Option("--runs", help="Instead of an experiment: runs exported by perflearn export.")]
SamplesOpt = Annotated[Optional[Path], typer.Option("--samples", help="... and their samples (perflearn export --samples).")]


@detect_app.command("fit")
def detect_fit(
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory for the fitted detector.")],
    experiment: ExperimentArg = None,
    store: StoreOpt = DEFAULT_STORE,
    runs: RunsOpt = None,
    samples: SamplesOpt = None,
    label: LabelOpt = "interference",
    group: GroupOpt = None,
    time_metric: TimeOpt = None,
    window: WindowOpt = 4,
) -> None:
    """Fit the interference classifier (and slowdown regressor) on an experiment's samples."""
    from perflearn.detect.model import Detector, fit

    check_output(output, "--output", directory=True)
    Detector.check_destination(output)
    data, interval = _training(store, experiment, (runs, samples), label, group or [], time_metric, window)
    detector = fit(data, interval, window)
    detector.save(output)
    terminal.out.print(f"detector of {len(detector.classes)} classes ({', '.join(detector.classes)}) from "
                       f"{detector.info['windows']} windows of {detector.info['runs']} runs; "
                       f"out-of-bag accuracy {detector.info['oob_score']:.3f}; saved to {output}")
    table = Table("feature", "importance", box=None)
    for row in detector.importance().itertuples(index=False):
        table.add_row(row.feature, f"{row.importance:.3f}")
    terminal.out.print(table)


@detect_app.command("evaluate")
def detect_evaluate(
    experiment: ExperimentArg = None,
    store: StoreOpt = DEFAULT_STORE,
    runs: RunsOpt = None,
    samples: SamplesOpt = None,
    label: LabelOpt = "interference",
    group: GroupOpt = None,
    time_metric: TimeOpt = None,
    window: WindowOpt = 4,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the full report here.")] = None,
) -> None:
    """Stratified 5-fold CV, then leave-one-group-out: macro-F1, per class, false alarms, misses."""
    from perflearn.detect.model import evaluate

    data, _ = _training(store, experiment, (runs, samples), label, group or [], time_metric, window)
    report = evaluate(data, progress=terminal.info)  # minutes on a real data set: say what it does
    if "note" in report["kfold"]:
        terminal.warn(report["kfold"]["note"])
    if json_out:
        json_out.write_text(json.dumps(report, indent=1))
    summary = Table("evaluation", "macro-F1", "false alarm", "miss", "windows", box=None)
    for name, part in report.items():
        if name != "slowdown":
            summary.add_row(name, f"{part['macro_f1']:.3f}", f"{part['false_alarm']:.3f}", f"{part['miss']:.3f}",
                            str(part["windows"]))
    terminal.out.print(summary)
    per_class = Table("class", *[n for n in report if n != "slowdown"], box=None)
    for cls in report["kfold"]["per_class_f1"]:
        per_class.add_row(cls, *[f"{report[n]['per_class_f1'][cls]:.3f}" for n in report if n != "slowdown"])
    terminal.out.print(per_class)
    confusion = report["kfold"]["confusion"]
    matrix = Table("true \\ predicted", *confusion["labels"], box=None)
    for cls, row in zip(confusion["labels"], confusion["matrix"]):
        matrix.add_row(cls, *map(str, row))
    terminal.out.print(matrix)
    if "slowdown" in report:
        s = report["slowdown"]
        terminal.out.print(f"slowdown regressor: MAPE {s['mape']:.1f}% (median {s['median_ape']:.1f}%) over {s['runs']} runs")


@detect_app.command("watch")
def detect_watch(
    model: Annotated[Path, typer.Option("--model", "-m", help="Directory of a fitted detector.")],
    pid: Annotated[Optional[int], typer.Option(help="Process to watch, with its descendants.")] = None,
    command: Annotated[Optional[list[str]],
                       typer.Argument(metavar="COMMAND", help="Or a command to start and watch.")] = None,
    intervals: Annotated[Optional[int], typer.Option(help="Stop after this many verdicts.")] = None,
) -> None:
    """Classify a live workload every interval: verdict, probability, predicted slowdown."""
    from perflearn.detect.model import Detector
    from perflearn.detect.watch import watch

    if (pid is None) == (not command):
        raise UsageError("give either --pid PID or a command after --")
    if intervals is not None and intervals < 1:
        raise UsageError(f"--intervals: at least 1 verdict, got {intervals}")
    detector = Detector.load(model)
    interrupt_on_sigterm()  # a killed watch ends the command it started, and what that started
    for verdict in watch(detector, pid=pid, command=command, intervals=intervals):
        slowdown = f"  slowdown x{verdict['slowdown']:.2f}" if "slowdown" in verdict else ""
        terminal.out.print(f"t={verdict['t']:.1f}s  {verdict['verdict']:<10} p={verdict['probability']:.2f}{slowdown}")
