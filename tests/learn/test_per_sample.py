"""Learning from the time series of runs (``--per-sample``): one row per run and
sample time, as a controller sees its service every interval."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.errors import UsageError
from perflearn.learn.model import Model
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

# Each run holds a buffer of MB mebibytes for about a second while the sampler takes the
# workload's resident memory every 100 ms: the sampled RSS must follow the knob (memory,
# unlike CPU time, does not depend on how busy the machine is).
SPEC = """
    [experiment]
    name = "hold"
    [workload]
    command = ["python3", "-c", "import time; b = bytearray({mb} * 2**20); time.sleep(1.2)"]
    [knobs.mb]
    values = [20, 120, 220]
    [metrics.runtime]
    source = "time"
    [sampling]
    interval = "100ms"
    system = false
    process = true
"""


def _runs() -> Dataset:
    raw = pd.DataFrame({"cores": [1, 2], "rate": [10, 20], "p95": [1.0, 2.0]})
    return Dataset.from_frame(raw, ["p95"], knobs=["cores"], context=["rate"], name="toy")


def test_one_row_per_run_and_time_with_the_runs_knobs():
    samples = pd.DataFrame({"run_id": [1, 1, 1, 1, 2, 2], "metric": ["wire.p95_us", "wire.rps"] * 3,
                            "t": [1, 1, 2, 2, 1, 1], "value": [5, 100, 6, 110, 7, None]})
    ds = _runs().per_sample(samples, context=["wire.rps"])
    assert ds.knobs == ["cores"] and ds.context == ["rate", "wire.rps"] and ds.metrics == ["wire.p95_us"]
    frame = ds.frame
    assert len(frame) == 3  # (run 1, t 1), (run 1, t 2), (run 2, t 1): no row invented for (run 2, t 2)
    assert frame["cores"].tolist() == [1, 1, 2] and frame["wire.p95_us"].tolist() == [5, 6, 7]
    assert pd.isna(frame["wire.rps"].iloc[2])  # not sampled: NaN, never 0
    assert "p95" not in frame  # the run's summary is not a per-interval value
    warm = _runs().per_sample(samples, context=["wire.rps"], warmup=1.5)
    assert warm.frame["wire.p95_us"].tolist() == [6]  # samples before 1.5 s left out


def test_bad_per_sample_input_is_one_clear_error():
    with pytest.raises(UsageError, match="no samples stored"):
        _runs().per_sample(pd.DataFrame(columns=["run_id", "metric", "t", "value"]))
    samples = pd.DataFrame({"run_id": [1], "metric": ["wire.rps"], "t": [1.0], "value": [3.0]})
    with pytest.raises(UsageError, match="no sampled signal 'wire.p99_us'"):
        _runs().per_sample(samples, context=["wire.p99_us"])
    with pytest.raises(UsageError, match="warm-up must be at least 0"):
        _runs().per_sample(samples, warmup=-1)


@pytest.mark.slow
def test_fit_per_sample_over_an_experiment_the_runner_sampled(write_spec, store_path, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["run", str(write_spec(SPEC)), "--store", str(store_path), "-q"])
    assert r.exit_code == 0, r.output
    base = ["-e", "hold", "-s", str(store_path), "--per-sample"]
    r = runner.invoke(app, ["fit", *base, "-t", "proc.rss", "--family", "cart", "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "samples of 3 runs" in said and "folds keep each run's samples together" in said and "optimistic" not in said
    assert "folds by run (3 runs)" in r.output
    assert "samples used" in r.output and "runs used" not in r.output  # a row is a sample, not a run
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["n_train"] >= 3 * 5  # about 10 samples per run, not one row per run
    r = runner.invoke(app, ["fit", *base, "--warmup", "0.5", "-t", "proc.rss", "--family", "cart",
                            "-o", str(tmp_path / "w")])
    assert r.exit_code == 0, r.output
    warm = json.loads((tmp_path / "w" / "model.json").read_text())["n_train"]
    assert 0 < warm < meta["n_train"]  # the first half second of each run left out
    assert meta["cv"]["folds_by"] == "run" and meta["cv"]["folds"] == 3  # 3 runs: 3 folds of whole runs
    r = runner.invoke(app, ["evaluate", *base, "-t", "proc.rss", "--family", "cart", "-k", "3"])
    assert r.exit_code == 0, r.output
    assert "samples of 3 runs" in r.output and "folds by run" in r.output
    r = runner.invoke(app, ["evaluate", *base, "-t", "proc.rss", "--family", "cart", "-k", "5"])
    assert r.exit_code != 0 and "3 runs (folds are by run) are fewer than the 5 folds" in r.output

    low, high = Model.load(tmp_path / "m").predict(pd.DataFrame({"mb": [20, 220]}))
    assert high - low > 150 * 2**20  # the sampled resident memory follows the buffer
    r = runner.invoke(app, ["fit", *base, "-t", "proc.nonesuch", "-o", str(tmp_path / "n")])
    assert r.exit_code != 0 and "no sampled signal 'proc.nonesuch'" in r.output
    r = runner.invoke(app, ["fit", "--csv", str(tmp_path / "x.csv"), "--per-sample", "-t", "y"])
    assert r.exit_code != 0 and "--per-sample reads the time series" in r.output
