import json

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn import Model, fit, load
from perflearn.learn.model import FORMAT

from .conftest import step_frame


def test_save_load_round_trip(step_ds, tmp_path):
    model = fit(step_ds, "T", family="rf", params={"n_estimators": 20})
    path = model.save(tmp_path / "m")
    assert (path / "model.json").is_file() and (path / "pipeline.joblib").is_file()
    back = load(path)
    points = step_frame(10, seed=5)
    np.testing.assert_allclose(back.predict(points), model.predict(points))
    assert back.schema == model.schema
    assert back.data_hash == model.data_hash and back.data_hash.startswith("sha256:")
    meta = json.loads((path / "model.json").read_text())
    assert meta["format"] == FORMAT
    assert meta["family"] == "rf"
    assert meta["n_train"] == 120
    assert {"scikit-learn", "numpy", "perflearn"} <= set(meta["versions"])
    assert 0 < meta["cv"]["mre"] < 20 and "oob" in meta["cv"]


def test_auto_model_round_trip_keeps_choice(smooth_ds, tmp_path):
    model = fit(smooth_ds, "T", family="auto", families=["linear", "knn"], cv=3)
    back = load(model.save(tmp_path / "m"))
    assert back.family == model.family and back.params == model.params
    assert back.cv["candidates"] == json.loads(json.dumps(model.cv["candidates"]))


def test_incompatible_versions_fail_in_one_line(step_ds, tmp_path):
    path = fit(step_ds, "T", family="cart").save(tmp_path / "m")
    meta = json.loads((path / "model.json").read_text())
    meta["versions"]["scikit-learn"] = "0.22.1"
    (path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match=r"saved with scikit-learn 0\.22\.1, this is .*refit") as exc:
        Model.load(path)
    assert "\n" not in str(exc.value)


def test_other_format_and_missing_dir_fail(tmp_path):
    with pytest.raises(UsageError, match="not a perflearn model directory"):
        load(tmp_path / "nothing")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.json").write_text('{"format": "other/9"}')
    with pytest.raises(UsageError, match="refit"):
        load(tmp_path / "m")


def test_corrupt_pipeline_fails(step_ds, tmp_path):
    path = fit(step_ds, "T", family="cart").save(tmp_path / "m")
    (path / "pipeline.joblib").write_bytes(b"not a pickle")
    with pytest.raises(UsageError, match="cannot load pipeline.joblib"):
        load(path)


def test_predict_dist_forest_spread_brackets_prediction(step_ds):
    model = fit(step_ds, "T", family="rf", params={"n_estimators": 50})
    points = pd.DataFrame({"a": [2.0, 5.0, 8.0], "b": ["x", "y", "z"], "c": [1, 2, 3]})
    d = model.predict_dist(points)
    assert list(d.columns) == ["pred", "std", "lo", "hi"]
    assert (d["lo"] <= d["pred"]).all() and (d["pred"] <= d["hi"]).all()
    assert (d["std"] >= 0).all()
    # the spread is largest right at the step a = 5, where the trees disagree
    assert d["std"].iloc[1] > d["std"].iloc[0]


@pytest.mark.parametrize("family", ["gp", "linear"])
def test_predict_dist_other_families(family, smooth_ds):
    model = fit(smooth_ds, "T", family=family, log_target=True)
    d = model.predict_dist(pd.DataFrame({"x1": [2.0], "x2": [3.0]}))
    assert d["lo"].iloc[0] < d["pred"].iloc[0] < d["hi"].iloc[0]
    assert abs(d["pred"].iloc[0] - model.predict({"x1": 2.0, "x2": 3.0})[0]) < 1e-6 * 18


def test_forest_members_match_each_tree_exactly():
    from sklearn.ensemble import RandomForestRegressor

    from perflearn.learn.uncertainty import forest_members

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 10, 500), rng.integers(1, 9, 500), rng.choice([0.8, 1.2, 1.6], 500)])
    y = X[:, 0] / X[:, 1] / X[:, 2] + rng.normal(0, 0.1, 500)
    forest = RandomForestRegressor(20, random_state=0).fit(X, y)
    grid = np.array([(load, c, f) for load in np.linspace(0, 10, 30) for c in range(1, 9) for f in (0.8, 1.2, 1.6)])
    for C in (rng.uniform(0, 10, (3000, 3)), grid, np.repeat(grid[:50], 20, axis=0)):
        expected = np.stack([t.predict(C.astype(np.float32)) for t in forest.estimators_])
        for threads in (1, 2):
            np.testing.assert_array_equal(forest_members(forest, C, threads=threads), expected)
