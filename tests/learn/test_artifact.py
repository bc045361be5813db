import json

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn import Model, fit, load
from perflearn.learn.model import FORMAT

from .conftest import step_frame

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


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


def test_a_model_is_saved_only_where_it_replaces_a_model_or_fills_an_empty_directory(step_ds, tmp_path):
    """`-o results` into a folder of the user's files mixed a model in silently."""
    model = fit(step_ds, "T", family="linear")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"is a directory of other files \(notes.txt\), not a model's"):
        model.save(tmp_path / "results")
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["notes.txt"]
    with pytest.raises(UsageError, match="exists and is not a directory"):
        model.save(tmp_path / "results" / "notes.txt")
    # a model's directory is replaced; so is one a killed save left without its model.json
    path = model.save(tmp_path / "m")
    fit(step_ds, "T", family="rf", params={"n_estimators": 5}).save(path)
    assert load(path).family == "rf" and sorted(p.name for p in path.iterdir()) == ["model.json", "pipeline.joblib"]
    (path / "model.json").unlink()
    (path / "pipeline.joblib.partial").write_bytes(b"half")
    with pytest.raises(UsageError, match="no model.json"):
        load(path)
    assert load(model.save(path)).family == "linear"


def test_a_save_cut_short_leaves_no_model_json_to_describe_a_new_pipeline(step_ds, tmp_path, monkeypatch):
    """model.json is removed first and written last: a save that fails (or is killed) half-way
    leaves a directory that does not load, never the new pipeline under the old description."""
    import joblib

    from perflearn.learn import artifact

    path = fit(step_ds, "T", family="linear").save(tmp_path / "m")
    forest = fit(step_ds, "T", family="rf", params={"n_estimators": 5})

    dump = joblib.dump

    def dump_then_fail(obj, name):
        dump(obj, name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(artifact.joblib, "dump", dump_then_fail)
    with pytest.raises(OSError):
        forest.save(path)
    assert not (path / "model.json").exists()
    with pytest.raises(UsageError, match="no model.json"):
        load(path)


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
    with pytest.raises(UsageError, match="pipeline.joblib is not the file model.json describes .*damaged"):
        load(path)
    meta = json.loads((path / "model.json").read_text())
    del meta["files"]  # saved before checksums were kept: the pickle itself fails to load, said as such
    (path / "model.json").write_text(json.dumps(meta))
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


def test_band_calibration_takes_the_conformal_residual():
    """Symmetric: the ceil((n+1) 0.9)-th smallest |log(y/oof)| of n (the largest with 9 runs);
    a quantile model: its 5 % and 95 % residuals; a value <= 0: residuals y - oof."""
    from perflearn.learn.uncertainty import band_calibration, calibrated_band

    r = np.linspace(0.01, 0.19, 19)
    oof = np.full(19, 100.0)
    band = band_calibration(oof * np.exp(r), oof)
    assert band["scale"] == "log" and band["hi"] == pytest.approx(0.18) and band["lo"] == -band["hi"]
    assert band_calibration(oof[:9] * np.exp(r[:9]), oof[:9])["hi"] == pytest.approx(0.09)
    q = band_calibration(oof * np.exp(r - 0.1), oof, quantile=0.9)
    assert q["lo"] == pytest.approx(-0.09) and q["hi"] == pytest.approx(0.09)
    a = band_calibration(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 1.0, 2.5, 3.0]))
    assert a["scale"] == "absolute" and a["hi"] == pytest.approx(0.5)
    lo, hi = calibrated_band(np.array([10.0]), band)
    assert lo[0] == pytest.approx(10 * np.exp(-0.18)) and hi[0] == pytest.approx(10 * np.exp(0.18))
    assert band_calibration(np.array([1.0]), np.array([1.0])) is None
    # 60 rows of 12 runs (cross-validation kept each run's rows together): 12 errors' worth, the largest
    rows = np.linspace(0.01, 0.60, 60)
    grouped = band_calibration(100 * np.exp(rows), np.full(60, 100.0), units=12)
    assert grouped["hi"] == pytest.approx(0.60) and grouped["n"] == 12 and grouped["rows"] == 60
    assert band_calibration(100 * np.exp(rows), np.full(60, 100.0))["hi"] == pytest.approx(0.55)  # 55th of 60


def _noisy(rng, n):
    """Multiplicative noise, sd 0.25 in log: no model can predict a run closer than that."""
    df = pd.DataFrame({"x1": rng.uniform(0, 3, n), "x2": rng.uniform(0, 3, n)})
    df["T"] = np.exp(1 + df.x1 + 0.3 * df.x2 + rng.normal(0, 0.25, n))
    return df


def test_forest_band_covers_new_values_as_cross_validation_measured():
    """A forest's trees agree more than runs do: their band alone held 78 % of new values
    (mean of 20 fits on 40 runs); widened to the out-of-fold residuals, about 90 %."""
    from perflearn.learn.uncertainty import predict_spread
    from perflearn.store import Dataset

    rng = np.random.default_rng(3)
    new = _noisy(rng, 2000)
    own, calibrated = [], []
    for _ in range(20):
        model = fit(Dataset.from_frame(_noisy(rng, 40), metrics=["T"], name="noisy"), "T", family="rf",
                    params={"n_estimators": 50})
        assert model.cv["band"]["n"] == 40
        d = model.predict_dist(new[["x1", "x2"]])
        calibrated.append(np.mean((new["T"] >= d["lo"]) & (new["T"] <= d["hi"])))
        assert (d["lo"] <= d["pred"]).all() and (d["pred"] <= d["hi"]).all()
        _, _, lo, hi = predict_spread(model.estimator, model.transform(new[["x1", "x2"]]))
        own.append(np.mean((new["T"] >= lo) & (new["T"] <= hi)))
    assert 0.87 <= np.mean(calibrated) <= 0.97
    assert np.mean(own) < np.mean(calibrated) - 0.05


def test_auto_band_is_saved_and_rests_on_honest_residuals(tmp_path):
    """auto's band comes from out-of-fold predictions whose members were chosen without the
    run they predict (``honest_oof_``), and is saved with the model."""
    from perflearn.store import Dataset

    rng = np.random.default_rng(4)
    model = fit(Dataset.from_frame(_noisy(rng, 12), metrics=["T"], name="noisy"), "T", family="auto",
                families=["linear", "cart"])  # no family with a spread of its own: the band is the residuals'
    est = model.pipeline.named_steps["model"]
    assert np.isfinite(est.honest_oof_).all() and len(est.honest_oof_) == 12
    again = load(model.save(tmp_path / "m"))
    assert again.cv["band"] == pytest.approx(model.cv["band"])
    d = again.predict_dist(_noisy(rng, 5)[["x1", "x2"]])
    assert np.allclose(d["hi"] / d["pred"], np.exp(model.cv["band"]["hi"]))
