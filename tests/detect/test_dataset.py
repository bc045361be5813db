"""The data set perflearn collected with examples/detect (committed as Parquet), read
back without re-measuring: the detector learns it, and bad files get one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perflearn.cli import app

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

DATA = Path(__file__).resolve().parents[2] / "examples" / "detect" / "data"


@pytest.mark.skipif(not (DATA / "runs.parquet").exists(), reason="the committed data set is absent")
def test_fit_from_the_committed_data_set(tmp_path):
    result = CliRunner().invoke(app, ["detect", "fit", "--runs", str(DATA / "runs.parquet"), "--samples",
                                      str(DATA / "samples.parquet"), "-o", str(tmp_path / "det"),
                                      "--time-metric", "runtime", "--group", "app", "--group", "input",
                                      "--window", "8"])  # half the windows: 69 s at 4 on a slow host, the suite's longest
    assert result.exit_code == 0, result.output
    oob = float(result.output.split("out-of-bag accuracy ")[1].split(";")[0])
    assert oob > 0.9, result.output  # eight classes: chance is 0.125
    assert "detector of 8 classes" in result.output and (tmp_path / "det" / "detector.json").exists()


def test_files_that_are_not_an_export(tmp_path):
    cli = CliRunner()
    bogus = tmp_path / "runs.csv"
    bogus.write_text("a,b\n1,2\n")
    result = cli.invoke(app, ["detect", "evaluate", "--runs", str(bogus), "--samples", str(bogus)])
    assert result.exit_code == 2 and "not the runs and samples perflearn export writes" in result.output
    result = cli.invoke(app, ["detect", "evaluate", "--runs", str(tmp_path / "nope.parquet"), "--samples", str(bogus)])
    assert result.exit_code == 2 and "nope.parquet: no such file" in result.output
    result = cli.invoke(app, ["detect", "evaluate", "--runs", str(bogus)])
    assert result.exit_code == 2 and "--runs and --samples go together" in result.output
    result = cli.invoke(app, ["detect", "evaluate"])
    assert result.exit_code == 2 and "give an EXPERIMENT" in result.output
    # fuzzing, session 19: a text sample value crashed in the window arithmetic; --window 0 was accepted
    runs = tmp_path / "r.csv"
    runs.write_text("run_id,status\n1,ok\n")
    samples = tmp_path / "s.csv"
    samples.write_text("run_id,metric,t,value\n1,cpu,1,0.5\n1,cpu,2,abc\n")
    result = cli.invoke(app, ["detect", "evaluate", "--runs", str(runs), "--samples", str(samples)])
    assert result.exit_code == 2 and "column 'value' has a non-numeric value 'abc' (data row 2)" in result.output
    result = cli.invoke(app, ["detect", "evaluate", "--runs", str(runs), "--samples", str(samples), "--window", "0"])
    assert result.exit_code == 2 and "--window: at least 1" in result.output


def _subset(tmp_path, classes=("none", "cpuoccupy"), runs_per_class=5):
    """Runs and samples files of a few runs of the committed data set: (runs, samples) paths and frames."""
    import pandas as pd

    runs = pd.read_parquet(DATA / "runs.parquet")
    runs = runs[runs["interference"].isin(classes)].sort_values("run_id").groupby("interference").head(runs_per_class)
    samples = pd.read_parquet(DATA / "samples.parquet")
    samples = samples[samples["run_id"].isin(runs["run_id"])].reset_index(drop=True)
    runs.to_parquet(tmp_path / "runs.parquet")
    samples.to_parquet(tmp_path / "samples.parquet")
    return tmp_path / "runs.parquet", tmp_path / "samples.parquet", runs, samples


def _evaluate(runs, samples, *extra):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a library's warning is not a message to the user: fail on it
        return CliRunner().invoke(app, ["detect", "evaluate", "--runs", str(runs), "--samples", str(samples), *extra])


@pytest.mark.skipif(not (DATA / "runs.parquet").exists(), reason="the committed data set is absent")
def test_bad_samples_are_one_line_naming_the_samples_file(tmp_path):
    """Review, session 21: each of these was an internal error (exit 70), a numpy warning, or
    named the runs file for a fault of the samples file."""
    runs_file, samples_file, runs, samples = _subset(tmp_path)
    header_only = tmp_path / "header.csv"
    header_only.write_text("run_id,metric,t,value\n")
    result = _evaluate(runs_file, header_only)  # was: argmax of an empty sequence
    assert result.exit_code == 2 and f"{header_only}: no interval samples" in result.output, result.output
    for name, change, message in (
        ("nan", lambda s: s.assign(value=float("nan")), "no sampled signal varies across the windows"),
        ("same_t", lambda s: s.assign(t=1.0), "sampling interval is not positive (0 s"),
        ("negative_t", lambda s: s.assign(t=-s["t"]), "sampling interval is not positive (-0.1"),
    ):
        path = tmp_path / f"{name}.parquet"
        change(samples).to_parquet(path)
        result = _evaluate(runs_file, path)
        assert result.exit_code == 2 and message in result.output, (name, result.output)
        assert "internal error" not in result.output and len(result.output.strip().splitlines()) == 1
        if "interval" in message:
            assert result.output.startswith(f"error: {path}: "), result.output  # the samples file, not the runs
    empty_runs = runs.iloc[:0]
    empty_runs.to_parquet(tmp_path / "no_runs.parquet")
    result = _evaluate(tmp_path / "no_runs.parquet", samples_file)
    assert result.exit_code == 2 and "no windows of ok runs" in result.output


@pytest.mark.skipif(not (DATA / "runs.parquet").exists(), reason="the committed data set is absent")
def test_bad_runs_are_one_line(tmp_path):
    """Review, session 21: a text --time-metric was an internal error (median of strings); an
    unknown --label listed the runtime metric among the knobs; one class was evaluated (F1 1.0)."""
    runs_file, samples_file, runs, _ = _subset(tmp_path)
    result = _evaluate(runs_file, samples_file, "--time-metric", "status")
    assert result.exit_code == 2, result.output
    assert "--time-metric 'status' is not a number (e.g. 'ok')" in result.output
    text = tmp_path / "text_runtime.csv"
    runs.assign(runtime=["fast"] * len(runs)).to_csv(text, index=False)
    result = _evaluate(text, samples_file, "--time-metric", "runtime")
    assert result.exit_code == 2 and "--time-metric 'runtime' is not a number (e.g. 'fast')" in result.output
    result = _evaluate(runs_file, samples_file, "--label", "kind")
    assert result.exit_code == 2
    assert "no knob 'kind' among the runs' columns (app, input, interference, runtime)" in result.output
    healthy = tmp_path / "healthy.parquet"
    runs[runs["interference"] == "none"].to_parquet(healthy)
    result = _evaluate(healthy, samples_file)
    assert result.exit_code == 2, result.output
    assert "need at least two classes (healthy and one interference) to evaluate a detector" in result.output


@pytest.mark.skipif(not (DATA / "runs.parquet").exists(), reason="the committed data set is absent")
def test_evaluate_says_what_it_is_doing(tmp_path):
    """Review, session 21: on the committed data set evaluate ran for minutes without a word."""
    runs_file, samples_file, _, _ = _subset(tmp_path)
    result = _evaluate(runs_file, samples_file, "--group", "app")
    assert result.exit_code == 0, result.output
    assert "evaluating (1/2): 5-fold cross-validation, 48 windows of 10 runs" in result.stderr
    assert "evaluating (2/2): leave one app out (5 folds)" in result.stderr
    assert "evaluating" not in result.stdout and "leave_one_app_out" in result.stdout


def test_fit_refuses_a_directory_of_other_files_before_fitting(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["detect", "fit", "--runs", str(tmp_path / "nope.parquet"), "--samples",
                                      str(tmp_path / "nope.parquet"), "-o", str(tmp_path / "results")])
    # refused for the directory, before the (missing) data is read
    assert result.exit_code == 2 and "is a directory of other files (notes.txt), not a detector's" in result.output, \
        result.output
    assert len(result.output.strip().splitlines()) == 1
