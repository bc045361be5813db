"""A small live slice of the detect data set, re-collected here: sample, fit, evaluate,
then watch a live workload with the fitted detector."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from perflearn.cli import app

pytestmark = pytest.mark.slow

SPEC = """
    [experiment]
    name = "slice"
    [workload]
    command = ["taskset", "-c", "0", "python3", "-c", "s = 0\\nfor i in range(4_000_000): s += i"]
    [workload.companions.injector]
    command = "{python} -m perflearn inject {interference} --victim-cpus 0"
    ready_pattern = "injecting"
    [knobs.interference]
    categorical = ["none", "cpuoccupy"]
    [metrics.runtime]
    source = "time"
    [sampling]
    interval = "100ms"
    [design]
    repeat = 4
    order = "random"
"""


def test_collect_fit_evaluate_watch(write_spec, store_path, tmp_path):
    cli = CliRunner()
    spec = write_spec(SPEC.replace("{python}", sys.executable))
    result = cli.invoke(app, ["run", str(spec), "--store", str(store_path), "-q"])
    assert result.exit_code == 0, result.output
    model = tmp_path / "detector"
    result = cli.invoke(app, ["detect", "fit", "slice", "--store", str(store_path), "-o", str(model),
                              "--window", "3", "--time-metric", "runtime"])
    assert result.exit_code == 0, result.output
    assert "detector of 2 classes (cpuoccupy, none)" in result.output
    result = cli.invoke(app, ["detect", "evaluate", "slice", "--store", str(store_path), "--window", "3"])
    assert result.exit_code == 0, result.output
    kfold = next(line for line in result.output.splitlines() if line.strip().startswith("kfold"))
    assert float(kfold.split()[1]) >= 0.8  # macro-F1 of a CPU hog on the workload's core
    # review, session 21: the list of knobs had the runtime metric in it (runs.columns[4:])
    result = cli.invoke(app, ["detect", "evaluate", "slice", "--store", str(store_path), "--label", "kind"])
    assert result.exit_code == 2 and "no knob 'kind' in the experiment (knobs: interference)" in result.output
    # watch a live workload under a CPU hog: verdicts come every interval
    hog = subprocess.Popen([sys.executable, "-m", "perflearn", "inject", "cpuoccupy", "--victim-cpus", "0"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout.readline().strip() == "injecting"
        result = cli.invoke(app, ["detect", "watch", "--model", str(model), "--intervals", "4", "--",
                                  "taskset", "-c", "0", "python3", "-c", "while True: pass"])
    finally:
        hog.terminate()
        hog.wait()
    assert result.exit_code == 0, result.output
    verdicts = [line.split()[1] for line in result.output.splitlines() if line.startswith("t=")]
    assert len(verdicts) == 4 and verdicts.count("cpuoccupy") >= 3


def test_watch_bad_input(tmp_path):
    cli = CliRunner()
    result = cli.invoke(app, ["detect", "watch", "--model", str(tmp_path / "none")])
    assert result.exit_code == 2 and "give either --pid PID or a command" in result.output
    result = cli.invoke(app, ["detect", "watch", "--model", str(tmp_path / "none"), "--pid", "1"])
    assert result.exit_code == 2 and "not a detector directory" in result.output
    # fuzzing, session 19: a detector.json of other JSON was a KeyError; --intervals 0 ran a window
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "detector.json").write_text('{"x": 1}')
    result = cli.invoke(app, ["detect", "watch", "--model", str(tmp_path / "other"), "--pid", "1"])
    assert result.exit_code == 2 and "detector.json lacks versions" in result.output, result.output
    result = cli.invoke(app, ["detect", "watch", "--model", str(tmp_path / "other"), "--intervals", "0", "--pid", "1"])
    assert result.exit_code == 2 and "--intervals: at least 1" in result.output
