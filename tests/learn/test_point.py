"""The relative-error point (``point="relative"``): for log(y) ~ N(mu, s^2) the expected
relative error |p - y| / y is smallest at p = exp(mu - s^2), below the median exp(mu)."""

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn.features import training_data
from perflearn.learn.model import fit_data
from perflearn.learn.models import AutoRegressor, _RelativePoint, build, log_dist
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_exp_mu_minus_s2_minimises_expected_relative_error():
    rng = np.random.default_rng(0)
    s = 0.5
    y = np.exp(rng.normal(0.0, s, 400_000))
    grid = np.exp(np.linspace(-0.8, 0.4, 121))
    risk = [np.mean(np.abs(p - y) / y) for p in grid]
    assert abs(np.log(grid[int(np.argmin(risk))]) - (-s**2)) < 0.03
    assert np.mean(np.abs(np.exp(-s**2) - y) / y) < np.mean(np.abs(1.0 - y) / y)  # beats the median


def _options(n, p=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (n, p)).astype(float)
    y = np.exp(np.log(100) + X @ rng.laplace(0, 0.3, p) + rng.normal(0, 0.05, n))
    return X, y


def test_relative_point_is_below_the_median_by_the_predictive_variance():
    X, y = _options(12)
    est = build("bayes", {"prior": "ridge"}, log_target=True).fit(X, y)
    mu, sd = log_dist(est, X)
    assert sd is not None and np.all(sd > 0)
    np.testing.assert_allclose(est.predict(X), np.exp(mu))
    np.testing.assert_allclose(_RelativePoint(est).predict(X), np.exp(mu - sd**2))
    ridge = build("linear", {}, log_target=True).fit(X, y)
    assert log_dist(ridge, X)[1] is None  # no predictive sd of its own: the out-of-fold spread is used
    np.testing.assert_allclose(_RelativePoint(ridge, 0.1).predict(X), ridge.predict(X) * np.exp(-0.01))


def test_auto_point_is_relative_on_small_data_only():
    X, y = _options(9)
    small = AutoRegressor(loo_below=30, blend=0.2, small_ratio=2.0, point="auto").fit(X, y)
    assert small.small_data_ and small.point_ == "relative"
    X2, y2 = _options(40)
    big = AutoRegressor(families=("linear",), loo_below=30, small_ratio=2.0, point="auto").fit(X2, y2)
    assert not big.small_data_ and big.point_ == "median"
    med = AutoRegressor(loo_below=30, blend=0.2, small_ratio=2.0, point="median").fit(X, y)
    assert med.point_ == "median"
    rel = AutoRegressor(families=("linear",), loo_below=30, point="relative").fit(X2, y2)
    assert rel.point_ == "relative" and np.all(rel.predict(X2) < big.predict(X2))
    with pytest.raises(ValueError, match="point must be one of"):
        AutoRegressor(point="mean").fit(X, y)


def test_fit_records_the_point_and_rejects_an_unknown_one():
    X, y = _options(9)
    frame = pd.DataFrame(X, columns=[f"o{i}" for i in range(X.shape[1])]).assign(perf=y)
    data = training_data(Dataset.from_frame(frame, ["perf"], name="opts"), "perf")
    assert fit_data(data, "auto", nested_below=0).cv["point"] == "relative"  # the band's nesting is not under test
    assert fit_data(data, "auto", point="median", nested_below=0).cv["point"] == "median"
    with pytest.raises(UsageError, match="point must be one of"):
        fit_data(data, "auto", point="mean")


def test_auto_weights_are_inverse_squared_cv_errors_on_small_data_only():
    X, y = _options(9)
    small = AutoRegressor(loo_below=30, blend=0.2, small_ratio=2.0, point="auto", weights="auto").fit(X, y)
    assert small.small_data_ and small.weights_ == "inverse"
    scores = np.array([r["score"] for r in small.cv_results_])
    w = dict(small.members_)
    assert len(w) == np.isfinite(scores).sum()  # every candidate that did not fail
    expected = 1 / scores**2 / np.sum(1 / scores**2)
    np.testing.assert_allclose([w[r["candidate"]] for r in small.cv_results_], expected)
    X2, y2 = _options(40)
    big = AutoRegressor(families=("linear",), loo_below=30, blend=0.2, small_ratio=2.0, weights="auto").fit(X2, y2)
    assert not big.small_data_ and big.weights_ == "near-ties"
    ties = AutoRegressor(loo_below=30, blend=0.2, small_ratio=2.0, point="auto", weights="near-ties").fit(X, y)
    assert ties.weights_ == "near-ties" and len(ties.members_) <= len(small.members_)
    with pytest.raises(ValueError, match="weights must be one of"):
        AutoRegressor(weights="equal").fit(X, y)


def test_fit_records_the_weights_and_rejects_unknown_ones():
    X, y = _options(9)
    frame = pd.DataFrame(X, columns=[f"o{i}" for i in range(X.shape[1])]).assign(perf=y)
    data = training_data(Dataset.from_frame(frame, ["perf"], name="opts"), "perf")
    assert fit_data(data, "auto", nested_below=0).cv["weights"] == "inverse"
    assert fit_data(data, "auto", weights="near-ties", nested_below=0).cv["weights"] == "near-ties"
    with pytest.raises(UsageError, match="weights must be one of"):
        fit_data(data, "auto", weights="equal")


def test_average_is_geometric_where_every_member_is_positive():
    from perflearn.learn.models import average

    P = np.array([[1.0, 2.0, -1.0], [4.0, 8.0, 3.0]])
    np.testing.assert_allclose(average(P, [1, 1], geometric=True), [2.0, 4.0, 1.0])  # the last point: arithmetic
    np.testing.assert_allclose(average(P, [1, 1]), [2.5, 5.0, 1.0])
    np.testing.assert_allclose(average(P, [3, 1], geometric=True)[:2], [4 ** 0.25, 2 * 4 ** 0.25])


def test_near_ties_scored_by_relative_error_are_averaged_geometrically():
    X, y = _options(40)
    kw = dict(families=("linear", "bayes"), loo_below=30, blend=10.0, small_ratio=2.0)  # blend 10: every candidate a near-tie
    geo = AutoRegressor(**kw).fit(X, y)
    assert not geo.small_data_ and geo.scoring_ == "mre" and geo.combine_ == "geometric" and len(geo.members_) > 1
    members = np.array([m.predict(X) for m in geo.best_estimator_.members])
    np.testing.assert_allclose(geo.predict(X), np.exp(np.log(members).mean(axis=0)))
    arith = AutoRegressor(combine="arithmetic", **kw).fit(X, y)
    assert arith.combine_ == "arithmetic"
    np.testing.assert_allclose(arith.predict(X), members.mean(axis=0))
    assert np.all(geo.predict(X) <= arith.predict(X) + 1e-9)  # AM >= GM, and the members disagree somewhere
    assert np.any(geo.predict(X) < arith.predict(X) - 1e-9)
    signed = AutoRegressor(**kw).fit(X, np.log(y) - np.log(y).mean())  # targets <= 0: RMSE, arithmetic
    assert signed.scoring_ == "rmse" and signed.combine_ == "arithmetic"
    with pytest.raises(ValueError, match="combine must be one of"):
        AutoRegressor(combine="harmonic").fit(X, y)


def test_the_band_of_tiny_data_is_calibrated_on_nested_out_of_fold_predictions():
    """Below AUTO_NESTED_BELOW runs (small data) each run's out-of-fold prediction for the
    band is the whole procedure's, refitted without it: members and weights chosen on
    the other runs' own out-of-fold errors, not on errors of models that saw it."""
    from sklearn.base import clone

    X, y = _options(9)
    auto = AutoRegressor(families=("linear", "bayes"), loo_below=30, blend=0.2, small_ratio=2.0, point="auto",
                         weights="auto", nested_below=13)  # two cheap families: the nesting is under test
    fitted = clone(auto).fit(X, y)
    assert fitted.nested_
    for i in (0, 4):  # leave-one-out: run i's value is the procedure's fitted on the other 8
        rest = np.arange(len(y)) != i
        alone = clone(auto).set_params(nested_below=0).fit(X[rest], y[rest])
        assert fitted.honest_oof_[i] == pytest.approx(alone.predict(X[i:i + 1])[0])
    cheaper = clone(auto).set_params(nested_below=0).fit(X, y)
    assert not cheaper.nested_ and not np.allclose(cheaper.honest_oof_, fitted.honest_oof_)
    assert np.allclose(cheaper.predict(X), fitted.predict(X))  # the model itself is the same
    data = training_data(Dataset.from_frame(pd.DataFrame(X, columns=[f"o{i}" for i in range(X.shape[1])]).assign(
        perf=y), ["perf"], name="opts"), "perf")
    assert fit_data(data, "auto", families=("linear", "bayes")).cv["band"]["nested"] is True  # said in model.json
