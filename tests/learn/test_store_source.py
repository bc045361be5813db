"""The learning commands over an experiment in the results store (not a CSV)."""

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.store import Dataset, open_store

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

DATA = Path(__file__).resolve().parents[1] / "data" / "learn"


def test_fit_evaluate_recommend_over_stored_experiment(tmp_path):
    db = tmp_path / "p.duckdb"
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"], name="sieving")
    with open_store(db) as s:
        s.import_dataset(ds, name="sieving")
    with open_store(db) as s:
        back = s.dataset("sieving")
    assert back.context == ["hole", "size"] and len(back.frame) == len(ds.frame)

    runner = CliRunner()
    r = runner.invoke(app, ["fit", "-e", "sieving", "-s", str(db), "-t", "MBps", "--family", "cart", "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    assert "runs used" in r.output and "112 (0 left out)" in r.output
    r = runner.invoke(app, ["evaluate", "-e", "sieving", "-s", str(db), "-t", "MBps", "--family", "cart", "-k", "4"])
    assert r.exit_code == 0, r.output
    assert "MRE % (PAAE)" in r.output
    r = runner.invoke(app, ["recommend", "-e", "sieving", "-s", str(db), "-t", "MBps", "--maximize", "--family", "cart",
                            "-c", "hole=32", "-c", "size=16"])
    assert r.exit_code == 0, r.output
    assert "recommended: sieving=off" in r.output


def test_cluster_of_a_stored_experiment_profiles_the_metrics_named(tmp_path):
    """-m with -e was ignored: every metric was profiled, and an unknown name accepted."""
    raw = pd.read_csv(DATA / "groups.csv").drop(columns=["group"])
    db = tmp_path / "g.duckdb"
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(raw, metrics=["gbps", "l3hit", "ipc"], name="groups"), name="groups")
    runner = CliRunner()
    r = runner.invoke(app, ["cluster", "-e", "groups", "-s", str(db), "-m", "gbps", "-o", str(tmp_path / "c.csv")])
    assert r.exit_code == 0, r.output
    written = pd.read_csv(tmp_path / "c.csv")
    assert "gbps" in written and "l3hit" not in written and "ipc" not in written, list(written)
    r = runner.invoke(app, ["cluster", "-e", "groups", "-s", str(db), "-m", "bogus"])
    assert r.exit_code == 2 and "has no metric 'bogus'" in r.output, r.output


def test_unknown_experiment_is_one_line(tmp_path):
    db = tmp_path / "p.duckdb"
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(pd.DataFrame({"a": [1, 2, 3], "T": [1.0, 2.0, 3.0]}), metrics=["T"]), name="x")
    r = CliRunner().invoke(app, ["fit", "-e", "nope", "-s", str(db), "-t", "T"])
    assert r.exit_code != 0
    assert r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1


SPEC = """
    [experiment]
    name = "sleepy"
    [workload]
    command = ["python3", "-c", "import time; time.sleep({ms} / 1000)"]
    [knobs.ms]
    values = [20, 150, 300]
    [knobs.mode]
    categorical = ["a", "b"]
    [metrics.runtime]
    source = "time"
    [design]
    repeat = 3
"""


@pytest.mark.slow
def test_fit_evaluate_recommend_over_an_experiment_the_runner_measured(write_spec, store_path, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["run", str(write_spec(SPEC)), "--store", str(store_path), "-q"])
    assert r.exit_code == 0, r.output
    base = ["-e", "sleepy", "-s", str(store_path), "-t", "runtime"]
    r = runner.invoke(app, ["fit", *base, "--family", "rf", "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    assert "18 (0 left out)" in r.output
    assert "RMSE" in r.output and " (s)" in r.output.split("RMSE", 1)[1].splitlines()[0]  # the metric's unit
    imp = json.loads((tmp_path / "m" / "model.json").read_text())["cv"]["importance"]
    assert imp["ms"] > 0.6 > imp["mode"]  # the sleep drives the runtime, not the mode
    r = runner.invoke(app, ["evaluate", *base, "--family", "linear", "-k", "3"])
    assert r.exit_code == 0, r.output
    assert "RMSE (s)" in r.output
    r = runner.invoke(app, ["predict", str(tmp_path / "m"), "--set", "ms=150,mode=a"])
    assert r.exit_code == 0 and "runtime (s) predicted by rf" in r.output, r.output
    r = runner.invoke(app, ["recommend", *base, "--minimize", "--family", "cart"])
    assert r.exit_code == 0, r.output
    assert "recommended: ms=20" in r.output


def test_a_measured_metric_is_a_feature_when_named_context(tmp_path):
    """Counters measured in each run (NiMC's features) could not be features of a stored
    experiment: -f said "it is a metric", --context-cols "no feature"."""
    db = tmp_path / "p.duckdb"
    frame = pd.DataFrame({"threads": [1, 2, 4, 8] * 4, "cache_misses": [10.0 * i for i in range(16)]})
    frame["runtime"] = 5.0 + 0.3 * frame["cache_misses"]
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(frame, metrics=["runtime", "cache_misses"], name="nimc"), name="nimc")
    runner = CliRunner()
    r = runner.invoke(app, ["fit", "-e", "nimc", "-s", str(db), "-t", "runtime", "-f", "threads,cache_misses"])
    assert r.exit_code == 2 and "--context-cols cache_misses" in r.output
    r = runner.invoke(app, ["fit", "-e", "nimc", "-s", str(db), "-t", "runtime", "--context-cols", "cache_misses",
                            "--family", "linear", "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["schema"]["features"] == ["threads", "cache_misses"] and meta["cv"]["r2"] > 0.99
    r = runner.invoke(app, ["fit", "-e", "nimc", "-s", str(db), "-t", "runtime", "--context-cols", "runtime"])
    assert r.exit_code == 2 and "'runtime' is modelled" in r.output


def test_a_csv_written_by_export_warns_that_its_metrics_would_be_features(tmp_path):
    """perflearn export, then fit --csv: every other metric became a feature (leaking the
    target), without a word."""
    db = tmp_path / "p.duckdb"
    frame = pd.DataFrame({"threads": [1, 2, 4, 8] * 3, "bandwidth": [10.0, 20, 40, 80] * 3})
    frame["iops"] = frame["bandwidth"] * 2.0
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(frame, metrics=["iops", "bandwidth"], name="x"), name="x")
    runner = CliRunner()
    assert runner.invoke(app, ["export", "x", "-s", str(db), "-o", str(tmp_path / "x.csv")]).exit_code == 0
    r = runner.invoke(app, ["fit", "--csv", str(tmp_path / "x.csv"), "-t", "iops", "--family", "cart", "--cv", "3",
                            "-o", str(tmp_path / "m1")])
    assert r.exit_code == 0 and "has the columns of `perflearn export`" in r.output and "(threads, bandwidth)" in r.output
    r = runner.invoke(app, ["fit", "--csv", str(tmp_path / "x.csv"), "-t", "iops", "-m", "iops,bandwidth",
                            "--family", "cart", "--cv", "3", "-o", str(tmp_path / "m2")])
    assert r.exit_code == 0 and "perflearn export" not in r.output


def test_predictions_of_exported_runs_keep_the_runs_identity(tmp_path):
    """predict --points on a `perflearn export` file wrote the features and the prediction,
    but not run_id, point_id or rep: the predictions could not be joined back to the runs."""
    db = tmp_path / "p.duckdb"
    frame = pd.DataFrame({"threads": [1, 2, 4, 8] * 3})
    frame["iops"] = 100.0 * frame["threads"]
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(frame, metrics=["iops"], name="x"), name="x")
    runner = CliRunner()
    assert runner.invoke(app, ["export", "x", "-s", str(db), "-o", str(tmp_path / "x.csv")]).exit_code == 0
    exported = pd.read_csv(tmp_path / "x.csv")
    r = runner.invoke(app, ["fit", "--csv", str(tmp_path / "x.csv"), "-t", "iops", "--family", "cart", "--cv", "3",
                            "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["predict", str(tmp_path / "m"), "-p", str(tmp_path / "x.csv"), "-o", str(tmp_path / "p.csv")])
    assert r.exit_code == 0, r.output
    pred = pd.read_csv(tmp_path / "p.csv")
    assert list(pred.columns[:4]) == ["run_id", "point_id", "rep", "threads"], list(pred.columns)
    assert (pred["run_id"] == exported["run_id"]).all() and (pred["rep"] == exported["rep"]).all()
    assert (pred["iops_measured"] == exported["iops"]).all()


def test_metrics_naming_a_knob_of_a_stored_experiment_is_refused_by_every_command(tmp_path):
    """Session 57's audit: `rules -e sweep1 -t p95 -m rate`, rate a knob, was accepted and
    ignored (so by evaluate, decide, fit), where `-m zz` was refused: over a stored experiment,
    which knows its metrics, -m names metrics only."""
    db = tmp_path / "k.duckdb"
    frame = pd.DataFrame({"rate": [1000, 2000, 3000, 4000] * 3, "load": ["lo", "hi", "lo", "hi"] * 3,
                          "p95": [1.0, 1.1, 1.3, 5.0] * 3})
    with open_store(db) as s:
        s.import_dataset(Dataset.from_frame(frame, metrics=["p95"], context=["load"], name="sweep1"), name="sweep1")
    runner = CliRunner()
    for command in ("fit", "evaluate", "rules", "decide", "recommend"):
        for name, what in (("rate", "a knob"), ("load", "a context column")):
            out = ["-o", str(tmp_path / "m")] if command == "fit" else []  # never the working directory's
            r = runner.invoke(app, [command, "-e", "sweep1", "-s", str(db), "-t", "p95", "-m", name, *out])
            assert r.exit_code == 2 and r.output.strip() == (f"error: --metrics: {name!r} is {what} of experiment "
                                                             "'sweep1', not a metric (metrics: p95)"), (command, r.output)
    r = runner.invoke(app, ["cluster", "-e", "sweep1", "-s", str(db), "-m", "rate"])
    assert r.exit_code == 2 and "'rate' is a knob of experiment 'sweep1', not a metric" in r.output, r.output
    r = runner.invoke(app, ["rules", "-e", "sweep1", "-s", str(db), "-t", "p95", "-m", "p95"])
    assert r.exit_code == 0, r.output
