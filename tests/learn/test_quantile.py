"""Models of a quantile of the target (``--quantile``): quantile regression forests and
gradient boosting under the pinball loss, judged by coverage on data they never saw."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.errors import UsageError
from perflearn.learn import fit
from perflearn.learn.features import training_data
from perflearn.learn.evaluate import evaluate
from perflearn.learn.model import load
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def noisy_frame(n: int, seed: int) -> pd.DataFrame:
    """log T = 1 + x + noise whose spread grows with x (0.1 at x = 0, 0.6 at x = 1); b shifts it."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    b = rng.choice(["u", "v"], n)
    sd = 0.1 + 0.5 * x
    return pd.DataFrame({"x": x, "b": b, "T": np.exp(1 + x + 0.3 * (b == "v") + rng.normal(0, sd))})


def true_quantile(frame: pd.DataFrame, q: float) -> np.ndarray:
    from scipy.stats import norm

    return np.exp(1 + frame.x + 0.3 * (frame.b == "v") + norm.ppf(q) * (0.1 + 0.5 * frame.x)).to_numpy()


@pytest.fixture(scope="module")
def train() -> Dataset:
    return Dataset.from_frame(noisy_frame(1500, 0), metrics=["T"], name="noisy")


@pytest.mark.parametrize("family", ["rf", "gbm"])
def test_a_quantile_model_covers_its_quantile_of_new_data(family, train):
    model = fit(train, "T", ["x", "b"], family, params={"quantile": 0.9}, log_target=True)
    test = noisy_frame(20000, 1)
    pred = model.predict(test[["x", "b"]])
    covered = float(np.mean(test["T"].to_numpy() <= pred))
    assert 0.85 <= covered <= 0.95, covered
    # it follows the spread: where the noise is wide, the 0.9 quantile is far above the median
    rel = np.abs(pred / true_quantile(test, 0.9) - 1)
    assert np.median(rel) < 0.1, np.median(rel)
    # the fit's own cross-validation reports what it is judged by
    assert model.quantile == 0.9
    assert 0.8 <= model.cv["coverage"] <= 0.97 and model.cv["pinball"] > 0


def test_the_median_model_does_not_cover_the_ninetieth(train):
    """The control: a usual forest, on the same data, covers about half of the values."""
    model = fit(train, "T", ["x", "b"], "rf", log_target=True)
    test = noisy_frame(5000, 2)
    covered = float(np.mean(test["T"].to_numpy() <= model.predict(test[["x", "b"]])))
    assert 0.35 <= covered <= 0.65, covered
    assert "coverage" not in model.cv


def test_a_quantile_forest_band_is_of_the_values(train):
    """lo and hi are the 5 % and 95 % of the values: 90 % of new values fall between them."""
    model = fit(train, "T", ["x", "b"], "rf", params={"quantile": 0.5}, log_target=True)
    test = noisy_frame(20000, 3)
    dist = model.predict_dist(test[["x", "b"]])
    inside = float(np.mean((test["T"].to_numpy() >= dist.lo) & (test["T"].to_numpy() <= dist.hi)))
    assert 0.8 <= inside <= 0.95, inside
    assert (dist.lo <= dist.pred).all() and (dist.pred <= dist.hi).all()


def test_a_quantile_model_survives_save_and_load(train, tmp_path):
    model = fit(train, "T", ["x", "b"], "rf", params={"quantile": 0.75, "n_estimators": 20}, log_target=True)
    model.save(tmp_path / "m")
    back = load(tmp_path / "m")
    points = noisy_frame(50, 4)[["x", "b"]]
    assert back.quantile == 0.75
    np.testing.assert_allclose(back.predict(points), model.predict(points))
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["params"]["quantile"] == 0.75 and meta["versions"]["quantile-forest"] != "none"
    # a model saved by another quantile-forest is refused in one line, as for scikit-learn
    meta["versions"]["quantile-forest"] = "0.1.0"
    (tmp_path / "m" / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match="quantile-forest 0.1.0"):
        load(tmp_path / "m")


def test_evaluate_reports_coverage_and_pinball(train):
    data = training_data(train, "T", ["x", "b"])
    res = evaluate(data, "gbm", folds=3, params={"quantile": 0.9}, log_target=True)
    summary = res.summary()
    assert 0.8 <= summary["coverage"]["mean"] <= 0.97
    assert summary["pinball"]["mean"] > 0 and not res.oob


def test_quantile_bad_input_is_one_line(tmp_path):
    csv = tmp_path / "d.csv"
    noisy_frame(60, 5).to_csv(csv, index=False)
    runner = CliRunner()
    for args, message in (
        (["--family", "svr", "--quantile", "0.9"], "--quantile: only rf and gbm predict a quantile, not svr"),
        (["--quantile", "0.9"], "--quantile: needs --family rf or gbm"),
        (["--family", "rf", "--quantile", "1"], "--quantile: a fraction in (0, 1), got 1"),
        (["--family", "gbm", "--quantile", "0"], "--quantile: a fraction in (0, 1), got 0"),
    ):
        res = runner.invoke(app, ["fit", "--csv", str(csv), "-t", "T", "-f", "x,b", "-o", str(tmp_path / "m"), *args])
        assert res.exit_code != 0
        assert message in res.output and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output


def test_cli_fit_predict_and_evaluate_a_quantile(tmp_path):
    csv = tmp_path / "d.csv"
    noisy_frame(400, 6).to_csv(csv, index=False)
    runner = CliRunner()
    res = runner.invoke(app, ["fit", "--csv", str(csv), "-t", "T", "-f", "x,b", "--family", "rf", "--quantile", "0.9",
                              "--log-target", "yes", "-o", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    assert "the 0.9 quantile of T" in res.output and "coverage" in res.output
    res = runner.invoke(app, ["predict", str(tmp_path / "m"), "--set", "x=0.5,b=u"])
    assert res.exit_code == 0 and "0.9 quantile of T" in res.output and "5 % and 95 % of the values" in res.output
    res = runner.invoke(app, ["evaluate", "--csv", str(csv), "-t", "T", "-f", "x,b", "--family", "gbm",
                              "--quantile", "0.9", "-k", "3"])
    assert res.exit_code == 0 and "coverage (goal 0.9)" in res.output and "pinball loss" in res.output


def test_a_quantile_forest_on_few_runs_still_splits():
    """Leaves of 10 left a forest on 24 runs no split: one value for every point, every
    importance 0 (the README's fio sweep). Its leaves are at most an eighth of the runs."""
    rng = np.random.default_rng(0)
    rows = [{"a": a, "b": b, "T": 10 * a + 3 * b + rng.normal(0, 1)}
            for a in (1, 2, 3, 4) for b in (0, 1, 2) for _ in range(2)]
    model = fit(Dataset.from_frame(pd.DataFrame(rows), metrics=["T"], name="few"), "T", family="rf",
                params={"quantile": 0.9})
    assert model.params["min_samples_leaf"] == 3
    low, high = model.predict(pd.DataFrame({"a": [1, 4], "b": [0, 2]}))
    assert high - low > 15  # the true 0.9 quantiles differ by 36
    assert fit(Dataset.from_frame(pd.DataFrame(rows), metrics=["T"], name="few"), "T", family="rf",
               params={"quantile": 0.9, "min_samples_leaf": 10}).params["min_samples_leaf"] == 10  # as asked
