"""The compiled forest kernel gives scikit-learn's own predictions, and its absence changes nothing but speed."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

from perflearn.learn import fastforest, fit, load, uncertainty
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

needs_numba = pytest.mark.skipif(fastforest.unavailable() is not None, reason=str(fastforest.unavailable()))


def _forest(cls=RandomForestRegressor, n=600, trees=20, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(-50, 4e4, n), rng.integers(1, 9, n), rng.choice([0.8, 1.2, 1.6], n),
                         rng.normal(0, 1e-3, n)])
    y = X[:, 0] / X[:, 1] / X[:, 2] + rng.normal(0, 0.1, n)
    return cls(trees, random_state=seed).fit(X, y), X


def _same_std(std, members):
    """Equal to numpy's std across trees, up to rounding at the scale of the predictions (where trees agree,
    numpy's two-pass std is ~1e-12 instead of 0)."""
    np.testing.assert_allclose(std, members.std(axis=0), rtol=1e-9, atol=1e-12 * np.abs(members).max())


def _candidates(forest, X, seed=1):
    """Random points, the training rows, a grid with repeats, and values on and next to every threshold."""
    rng = np.random.default_rng(seed)
    lo, hi = X.min(axis=0), X.max(axis=0)
    rand = rng.uniform(lo, hi, (3001, X.shape[1]))
    grid = np.array([(ld, c, f, 0.0) for ld in np.linspace(lo[0], hi[0], 40) for c in range(1, 9)
                     for f in (0.8, 1.2, 1.6)])
    edges = []
    for tree in forest.estimators_[:3]:
        t = tree.tree_
        for f, thr in zip(t.feature[t.feature >= 0], t.threshold[t.feature >= 0]):
            x32 = np.float32(thr)
            for v in (x32, np.nextafter(x32, np.float32(-np.inf)), np.nextafter(x32, np.float32(np.inf))):
                row = X[rng.integers(len(X))].copy()
                row[f] = v
                edges.append(row)
    return np.vstack([rand, X, np.repeat(grid[:40], 10, axis=0), np.array(edges)])


@needs_numba
@pytest.mark.parametrize("cls", [RandomForestRegressor, ExtraTreesRegressor])
def test_compiled_forest_equals_scikit_learn_bitwise(cls):
    forest, X = _forest(cls)
    C = _candidates(forest, X)
    members = np.stack([t.predict(C.astype(np.float32)) for t in forest.estimators_])
    for threads in (1, 2):
        np.testing.assert_array_equal(fastforest.predict(forest, C, threads), forest.predict(C))
        np.testing.assert_array_equal(fastforest.members(forest, C, threads), members)
        mean, std = fastforest.mean_std(forest, C, threads)
        np.testing.assert_array_equal(mean, forest.predict(C))
        _same_std(std, members)


@needs_numba
def test_compiled_forest_follows_a_refit():
    forest, X = _forest()
    C = _candidates(forest, X)
    before = fastforest.predict(forest, C)
    forest.set_params(n_estimators=7, random_state=3).fit(X, -X[:, 0])
    np.testing.assert_array_equal(fastforest.predict(forest, C), forest.predict(C))
    assert not np.array_equal(before, forest.predict(C))


@needs_numba
def test_compiled_forest_declines_what_scikit_learn_treats_specially():
    forest, X = _forest()
    bad = X[:5].copy()
    bad[0, 0] = np.nan
    assert fastforest.predict(forest, bad) is None  # missing values: scikit-learn routes them per node
    bad[0, 0] = np.inf
    assert fastforest.predict(forest, bad) is None  # scikit-learn refuses infinity
    assert fastforest.predict(forest, X[:, :2]) is None  # wrong width: scikit-learn's error, not ours
    two = RandomForestRegressor(5, random_state=0).fit(X, np.column_stack([X[:, 0], X[:, 1]]))
    assert fastforest.predict(two, X) is None  # multi-output


def _bench_like_model(n=2000, trees=30):
    rng = np.random.default_rng(0)
    train = pd.DataFrame({
        "load": rng.uniform(1000, 40000, n),
        "cores": rng.integers(1, 9, n),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], n),
        "governor": rng.choice(["performance", "powersave"], n),
    })
    util = train["load"] / (train["cores"] * train["freq"] * 6000)
    noise = 1 + rng.normal(0, 0.05, n)
    train["p95"] = 0.3 / np.clip(1 - util, 0.02, None) * noise + 0.05 * (train["governor"] == "powersave")
    model = fit(Dataset.from_frame(train, metrics=["p95"], name="bench"), "p95", family="rf",
                params={"n_estimators": trees}, log_target=False, cv=2)
    cand = pd.DataFrame({
        "load": rng.uniform(1000, 40000, 10_000),
        "cores": rng.integers(1, 9, 10_000),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], 10_000),
        "governor": rng.choice(["performance", "powersave"], 10_000),
    })
    return model, cand


@needs_numba
def test_model_predict_and_dist_of_10000_points_equal_scikit_learn(tmp_path):
    model, cand = _bench_like_model()
    back = load(model.save(tmp_path / "m"))  # a saved model loads and takes the compiled path
    expected = back.pipeline.predict(cand)
    np.testing.assert_allclose(back.predict(cand), expected, rtol=1e-9, atol=0)
    scaled = back.estimator  # the forest inside the target's scale (BinaryScaler)
    X = back.transform(cand)
    members = np.stack([t.predict(X.astype(np.float32)) for t in scaled.regressor_.estimators_])
    members = members / scaled.transformer_.scale_
    d = back.predict_dist(cand)
    np.testing.assert_allclose(d["pred"], expected, rtol=1e-9, atol=0)
    _same_std(d["std"].to_numpy(), members)
    assert (d["lo"] <= d["pred"]).all() and (d["pred"] <= d["hi"]).all()


def test_without_numba_forests_take_the_old_path_with_one_warning(monkeypatch):
    forest, X = _forest()
    C = _candidates(forest, X)
    monkeypatch.setattr(fastforest, "_FAILED", "numba is not installed")
    monkeypatch.setattr(fastforest, "_WARNED", False)
    with pytest.warns(RuntimeWarning, match="numba is not installed; forests predict through scikit-learn"):
        members = uncertainty.forest_members(forest, C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the line is said once per process
        center = uncertainty.fast_predict(forest, C)
        pred, std, lo, hi = uncertainty.predict_spread(forest, C)
    np.testing.assert_array_equal(members, np.stack([t.predict(C.astype(np.float32)) for t in forest.estimators_]))
    np.testing.assert_allclose(center, forest.predict(C), rtol=1e-12)
    np.testing.assert_allclose(pred, forest.predict(C), rtol=1e-12)
    _same_std(std, members)


@needs_numba
def test_small_inputs_skip_the_compiled_path(monkeypatch):
    forest, X = _forest(trees=10)
    calls = []
    real = fastforest.predict
    monkeypatch.setattr(fastforest, "predict", lambda *a: calls.append(1) or real(*a))
    uncertainty.fast_predict(forest, X[:5])
    assert calls == []
    uncertainty.fast_predict(forest, np.repeat(X, 4, axis=0))
    assert calls == [1]
