import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from perflearn.errors import UsageError
from perflearn.learn import fit
from perflearn.learn.features import training_data
from perflearn.learn.models import FAMILIES, SMALL_FAMILIES, AutoRegressor, build
from perflearn.store import Dataset

from .conftest import step_frame

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def _ard_gp():
    return build("gp", {}, random_state=0).steps[-1][1]  # the GP --family gp fits, without its scaler


@parametrize_with_checks([AutoRegressor(families=("linear", "cart"), cv=3), _ard_gp(),
                          AutoRegressor(families=("cart", "bayes"), cv=3, small_ratio=2.0),
                          AutoRegressor(families=("linear", "bayes"), cv=3, small_ratio=2.0, point="relative")])
def test_auto_regressor_follows_sklearn_contract(estimator, check):
    check(estimator)


def test_cart_recovers_known_split(step_ds):
    model = fit(step_ds, "T", ["a"], family="cart", params={"max_depth": 1})
    tree = model.estimator.regressor_.tree_  # inside the target's scale (BinaryScaler)
    assert model.feature_names_out()[tree.feature[0]] == "a"
    assert 4.7 < tree.threshold[0] < 5.3


def test_a_spread_of_rounding_is_not_scaled_up():
    """Session 54's review: 0.3 and 0.30000000000000004 were scaled by 2^53, and the trees
    split on float noise (rules: three rules, each "t ≈ 0.3")."""
    from perflearn.learn.models import BinaryScaler

    assert BinaryScaler().fit(np.array([[0.3], [0.1 + 0.2]])).scale_ == 1.0
    assert BinaryScaler().fit(np.full((7, 1), 0.1)).scale_ == 1.0
    assert BinaryScaler().fit(np.array([[1e-8], [2e-8], [3e-8]])).scale_ == 2.0 ** 27


@pytest.mark.parametrize("scale", [1e-3, 1e4])
def test_bayes_learns_a_target_in_any_unit(scale):
    """ARD and Bayesian ridge priors are set for a target near unit scale: a target in seconds
    (1e-3) or IOPS (1e4) was learned as a constant, R² -0.04 (session 55's audit)."""
    frame = step_frame()
    unit = fit(Dataset.from_frame(frame, metrics=["T"], name="unit"), "T", family="bayes", cv=3)
    scaled = fit(Dataset.from_frame(frame.assign(T=frame["T"] * scale), metrics=["T"], name="scaled"), "T",
                 family="bayes", cv=3)
    assert scaled.cv["r2"] > 0.7 and scaled.cv["r2"] == pytest.approx(unit.cv["r2"], abs=1e-6)  # a step: linear 0.74
    points = frame[["a", "b", "c"]].iloc[::7]
    np.testing.assert_allclose(scaled.predict(points), unit.predict(points) * scale, rtol=1e-6)


@pytest.mark.parametrize("family", ["cart", "rf", "gbm"])
def test_trees_learn_a_target_in_a_small_unit(family):
    """scikit-learn's trees make a node a leaf when its variance is at most 2.2e-16 in the
    target's own unit: seconds per operation (1e-8) were learned as a constant (R² -0.01,
    every importance 0). The same runs in ns and in s now give the same model, scaled."""
    frame = step_frame()
    small = frame.assign(T=frame["T"] * 1e-9)
    big_model = fit(Dataset.from_frame(frame, metrics=["T"], name="ns"), "T", family=family, cv=3)
    small_model = fit(Dataset.from_frame(small, metrics=["T"], name="s"), "T", family=family, cv=3)
    points = frame[["a", "b", "c"]].iloc[::7]
    assert small_model.cv["r2"] > 0.9
    # equal up to near-ties the trees split either way (1e-9 is no power of two: the values differ in rounding)
    np.testing.assert_allclose(small_model.predict(points), big_model.predict(points) * 1e-9, rtol=0.01)
    np.testing.assert_allclose(small_model.predict_dist(points).to_numpy(),
                               big_model.predict_dist(points).to_numpy() * 1e-9, rtol=0.05)
    assert max(small_model.importance(), key=small_model.importance().get) == "a"


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


def test_permutation_importance_is_the_same_however_many_copies_are_predicted_at_once(step_ds, monkeypatch):
    """The shuffled copies are predicted in batches (a call per copy took 93 s of a fit of 30
    runs x 200 knobs); the batch size changes nothing but the time."""
    import perflearn.learn.model as model_module

    model = fit(step_ds, "T", family="linear")
    data = training_data(step_ds, "T")
    together = model.importance(data.X, data.y)
    monkeypatch.setattr(model_module, "PERMUTED_ROWS", 1)  # one feature per call
    assert model.importance(data.X, data.y) == together and max(together, key=together.get) == "a"


def test_auto_leave_one_out_on_tiny_data(smooth_ds):
    data = training_data(smooth_ds, "T")
    X, y = data.X.to_numpy()[:12], data.y[:12]
    auto = AutoRegressor(families=("linear", "knn"), loo_below=20).fit(X, y)
    assert auto.n_splits_ == 12
    assert AutoRegressor(families=("linear",), cv=3, loo_below=5).fit(X, y).n_splits_ == 3


def _options_frame(n_options: int, seed: int):
    """All 2^p settings of p binary options; T = exp(sparse main effects): a log-linear system."""
    rng = np.random.default_rng(seed)
    X = np.array(np.meshgrid(*[[0.0, 1.0]] * n_options)).reshape(n_options, -1).T
    beta = rng.laplace(0, 0.3, n_options) * (rng.random(n_options) < 0.6)
    return X, 100.0 * np.exp(X @ beta)


def test_small_data_rule_keeps_only_low_variance_families():
    X, y = _options_frame(8, seed=3)
    rng = np.random.default_rng(0)
    train = rng.choice(len(y), 9, replace=False)  # 9 runs, 8 options: about one run per feature
    auto = AutoRegressor(loo_below=30, blend=0.2, small_ratio=2.0).fit(X[train], y[train])  # default families
    assert auto.small_data_
    assert {r["family"] for r in auto.cv_results_} == {"linear", "bayes", "gp", "rf"}
    # one forest with fixed settings (nothing chosen among forests on a handful of runs)
    assert [r["params"] for r in auto.cv_results_ if r["family"] == "rf"] == [{"max_features": 1.0}]
    assert len(auto.cv_results_) == 6
    assert all(r["log_target"] for r in auto.cv_results_)  # positive target: log only on small data
    assert all(label.split("(")[0] in SMALL_FAMILIES for label, _ in auto.members_)
    test = np.setdiff1d(np.arange(len(y)), train)
    err = np.mean(np.abs(auto.predict(X[test]) - y[test]) / y[test])
    assert err < 0.10  # the log-linear truth is inside the low-variance families


def test_small_data_rule_is_off_with_enough_runs():
    X, y = _options_frame(4, seed=1)
    X, y = np.vstack([X] * 3), np.concatenate([y] * 3)  # 48 runs of 4 options: 12 per feature
    auto = AutoRegressor(families=("cart", "linear", "bayes"), cv=3, small_ratio=2.0).fit(X, y)
    assert not auto.small_data_
    assert "cart" in {r["family"] for r in auto.cv_results_}
    big = AutoRegressor(families=("rf",), cv=3, small_ratio=2.0).fit(X, y)
    assert sorted(r["params"]["max_features"] for r in big.cv_results_) == [0.5, 0.5, 1.0, 1.0]  # x raw/log
    assert {r["log_target"] for r in auto.cv_results_} == {False, True}
    # a family list with no low-variance family is kept as asked, even on small data
    tiny = AutoRegressor(families=("cart", "knn"), cv=3, small_ratio=2.0).fit(X[:6], y[:6])
    assert tiny.small_data_ and {r["family"] for r in tiny.cv_results_} == {"cart", "knn"}


def test_bayes_family_shrinks_irrelevant_options_to_zero():
    X, y = _options_frame(8, seed=3)
    model = fit(Dataset.from_frame(pd.DataFrame(X, columns=[f"o{i}" for i in range(8)]).assign(T=y), metrics=["T"]),
                "T", family="bayes", params={"prior": "ard"}, log_target=True)
    coef = model.estimator.regressor_.named_steps["bayes"].coef_
    rng = np.random.default_rng(3)
    beta = rng.laplace(0, 0.3, 8) * (rng.random(8) < 0.6)
    assert np.all(np.abs(coef[beta == 0]) < 1e-3)
    assert np.all(np.abs(coef[beta != 0]) > 1e-2)


def test_bayes_prior_must_be_known(smooth_ds):
    with pytest.raises(UsageError, match="prior must be ard or ridge"):
        fit(smooth_ds, "T", family="bayes", params={"prior": "lasso"})


def test_mlp_asked_for_on_small_data_is_a_bag_of_small_nets():
    """A family list with no low-variance family is kept on small data; mlp then takes its one
    small-data setting (L-BFGS, strong weight decay, three random starts averaged)."""
    X, y = _options_frame(8, seed=3)
    train = np.random.default_rng(0).choice(len(y), 9, replace=False)
    auto = AutoRegressor(families=("mlp",), loo_below=30, small_ratio=2.0).fit(X[train], y[train])
    assert auto.small_data_
    assert [r["params"] for r in auto.cv_results_] == [
        {"hidden_layer_sizes": (32,), "alpha": 1.0, "solver": "lbfgs", "bag": 3}]
    nets = auto.best_estimator_.members[0].regressor_.regressor_.named_steps["mlp"]  # one member, bounded
    starts = [n.coefs_[0] for n in nets.estimators_]
    assert len(starts) == 3 and not np.allclose(starts[0], starts[1])  # three different starts


def test_small_data_predictions_stay_in_a_plausible_range():
    """Few runs of a numeric knob with a log-linear effect: a log-linear member extrapolates
    it without bound far outside the runs; auto's small-data average is kept within the
    training range widened by its own width (log scale), and points inside are untouched."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(1, 2, 6), rng.integers(0, 2, (6, 2))])  # 6 runs, 3 features: small data
    y = np.exp(3 * X[:, 0] + 0.2 * X[:, 1])
    auto = AutoRegressor(families=("linear", "bayes"), loo_below=30, small_ratio=2.0).fit(X, y)
    assert auto.small_data_
    lo, hi = auto.bounds_
    assert lo == pytest.approx(y.min() ** 2 / y.max()) and hi == pytest.approx(y.max() ** 2 / y.min())
    far = np.array([[20.0, 1.0, 0.0], [-20.0, 0.0, 0.0]])
    unbounded = np.array([m.predict(far) for m in auto.best_estimator_.members])
    assert unbounded.max() > 1e10 and unbounded.min() < 1e-10  # the members run away
    assert auto.predict(far) == pytest.approx([hi, lo])
    inside = X[:3]
    members = np.array([m.predict(inside) for m in auto.best_estimator_.members])
    assert auto.predict(inside) == pytest.approx(auto.best_estimator_.weights @ members / auto.best_estimator_.weights.sum())


def test_no_bounds_outside_small_data():
    X, y = _options_frame(4, seed=1)
    X, y = np.vstack([X] * 3), np.concatenate([y] * 3)  # 12 runs per feature
    auto = AutoRegressor(families=("linear",), cv=3, small_ratio=2.0).fit(X, y)
    assert not auto.small_data_ and auto.bounds_ is None


def test_raw_target_candidates_are_kept_only_when_clearly_better():
    """Scored by relative error, the raw-target candidates stay only if the best of them
    beats the best log-target one by 2 paired standard errors."""
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, size=(60, 6)).astype(float)
    multiplicative = np.exp(X @ np.array([1.5, -1.0, 0.8, 0.0, 1.2, -0.6])) * np.exp(rng.normal(0, 0.02, 60))
    auto = AutoRegressor(families=("linear",), cv=5, blend=0.2).fit(X, multiplicative)
    assert auto.raw_set_aside_ and auto.best_log_target_
    assert any(not r["log_target"] and np.isfinite(r["score"]) for r in auto.cv_results_)  # tried, then set aside
    additive = 1.0 + X @ np.array([40.0, 30.0, 20.0, 0.0, 10.0, 5.0])  # exact for a linear model of y, not of log y
    auto = AutoRegressor(families=("linear",), cv=5, blend=0.2).fit(X, additive)
    assert not auto.raw_set_aside_ and not auto.best_log_target_
    small = AutoRegressor(families=("linear",), cv=5, blend=0.2, small_ratio=20.0).fit(X, multiplicative)
    assert not small.raw_set_aside_  # small data tries the log target only
