"""The data set perflearn collected with examples/detect (committed as Parquet), read
back without re-measuring: the detector learns it, and bad files get one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perflearn.cli import app

DATA = Path(__file__).resolve().parents[2] / "examples" / "detect" / "data"


@pytest.mark.skipif(not (DATA / "runs.parquet").exists(), reason="the committed data set is absent")
def test_fit_from_the_committed_data_set(tmp_path):
    result = CliRunner().invoke(app, ["detect", "fit", "--runs", str(DATA / "runs.parquet"), "--samples",
                                      str(DATA / "samples.parquet"), "-o", str(tmp_path / "det"),
                                      "--time-metric", "runtime", "--group", "app", "--group", "input"])
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
