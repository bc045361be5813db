import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from perflearn.errors import UsageError
from perflearn.learn import fit
from perflearn.learn.features import training_data
from perflearn.learn.models import FAMILIES, AutoRegressor
from perflearn.store import Dataset

from .conftest import step_frame


@parametrize_with_checks([AutoRegressor(families=("linear", "cart"), cv=3)])
def test_auto_regressor_follows_sklearn_contract(estimator, check):
    check(estimator)


def test_cart_recovers_known_split(step_ds):
    model = fit(step_ds, "T", ["a"], family="cart", params={"max_depth": 1})
    tree = model.estimator.tree_
    assert model.feature_names_out()[tree.feature[0]] == "a"
    assert 4.7 < tree.threshold[0] < 5.3


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_learns_a_smooth_function(family, smooth_ds):
    model = fit(smooth_ds, "T", family=family, cv=3)
    assert model.family == family
    assert model.cv["mre"] < 15.0  # cross-validated, in percent
    pred = model.predict({"x1": 2.0, "x2": 3.0})
    assert abs(pred[0] - 18.0) / 18.0 < 0.2


def test_auto_chooses_by_cv_and_refits(smooth_ds):
    model = fit(smooth_ds, "T", family="auto", families=["knn", "linear"], cv=4)
    cands = model.cv["candidates"]
    best = min(cands, key=lambda c: c["score"])
    assert model.family == best["family"] == "linear"  # T is a quadratic: linear with interactions wins
    assert model.params == best["params"]
    assert {c["family"] for c in cands} == {"knn", "linear"}
    assert any(c["log_target"] for c in cands) and any(not c["log_target"] for c in cands)


def test_auto_ensemble_averages_members(smooth_ds):
    model = fit(smooth_ds, "T", family="auto", families=["knn", "cart"], cv=3, ensemble=5)
    weights = [w for _, w in model.cv["members"]]
    assert abs(sum(weights) - 1.0) < 1e-9
    assert model.predict({"x1": 2.0, "x2": 3.0}).shape == (1,)


def test_failed_runs_are_excluded_and_counted():
    df = step_frame(60)
    df["status"] = "ok"
    df.loc[:4, "status"] = "failed"
    df.loc[10:12, "T"] = np.nan
    ds = Dataset.from_frame(df, metrics=["T"])
    model = fit(ds, "T", family="cart")
    assert model.n_excluded == 8
    assert model.n_train == 52


def test_log_target_is_applied_and_checked(smooth_ds):
    model = fit(smooth_ds, "T", family="linear", log_target=True)
    assert model.log_target
    df = smooth_ds.frame.copy()
    df.loc[0, "T"] = -1.0
    neg = Dataset.from_frame(df[["x1", "x2", "T"]], metrics=["T"])
    with pytest.raises(UsageError, match="log target needs every value > 0"):
        fit(neg, "T", family="linear", log_target=True)


def test_log_target_auto_for_orders_of_magnitude():
    x = np.linspace(0, 4, 40)
    ds = Dataset.from_frame(pd.DataFrame({"x": x, "T": 10 ** x}), metrics=["T"])
    assert fit(ds, "T", family="knn").log_target
    ds2 = Dataset.from_frame(pd.DataFrame({"x": x, "T": 10 + x}), metrics=["T"])
    assert not fit(ds2, "T", family="knn").log_target


def test_categorical_knobs_are_one_hot_encoded():
    df = step_frame(90)
    df["T"] = 10 + df["a"] + 1.0 * (df["b"] == "y")
    model = fit(Dataset.from_frame(df, metrics=["T"]), "T", family="linear")
    names = model.feature_names_out()
    assert {"b_x", "b_y", "b_z"} <= set(names)
    p_y = model.predict({"a": 8.0, "b": "y", "c": 2})[0]
    p_x = model.predict({"a": 8.0, "b": "x", "c": 2})[0]
    assert 0.5 < p_y - p_x < 1.5


def test_training_data_schema(step_ds):
    data = training_data(step_ds, "T")
    assert data.schema.features == ["a", "b", "c"]
    assert data.schema.kinds == {"a": "numeric", "b": "categorical", "c": "numeric"}
    assert data.schema.categories["b"] == ["x", "y", "z"]
    assert data.hash() == training_data(step_ds, "T").hash()


@pytest.mark.parametrize("family", ["rf", "linear"])
def test_importance_names_the_driving_knob(family, step_ds):
    model = fit(step_ds, "T", family=family)
    imp = model.cv["importance"]
    assert set(imp) == {"a", "b", "c"}  # one-hot columns of b summed back into b
    assert max(imp, key=imp.get) == "a"
    assert abs(sum(imp.values()) - 1.0) < 1e-9


def test_auto_leave_one_out_on_tiny_data(smooth_ds):
    data = training_data(smooth_ds, "T")
    X, y = data.X.to_numpy()[:12], data.y[:12]
    auto = AutoRegressor(families=("linear", "knn"), loo_below=20).fit(X, y)
    assert auto.n_splits_ == 12
    assert AutoRegressor(families=("linear",), cv=3, loo_below=5).fit(X, y).n_splits_ == 3
