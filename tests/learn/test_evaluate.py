import numpy as np
import pytest

from perflearn.errors import UsageError
from perflearn.learn.evaluate import (
    evaluate, html_page, learning_curve, oob_score, plot_learning_curve, plot_pred_vs_actual, plot_residuals,
)
from perflearn.learn.features import training_data
from perflearn.learn.metrics import mape, mre, r2, rmse

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_metrics_by_hand():
    y, p = np.array([10.0, 20.0, 40.0]), np.array([11.0, 18.0, 40.0])
    assert mre(y, p) == pytest.approx((0.1 + 0.1 + 0) / 3 * 100)
    assert mape(y, p) == pytest.approx(mre(y, p))
    assert rmse(y, p) == pytest.approx(np.sqrt(5 / 3))
    assert r2(y, y) == 1.0


def test_kfold_scores_every_run_once(step_ds):
    data = training_data(step_ds, "T")
    res = evaluate(data, "cart", folds=4, repeats=2)
    assert len(res.splits) == 8
    assert sorted(res.y_true) == sorted(data.y)  # first repeat pools each run once
    s = res.summary()
    assert s["r2"]["mean"] > 0.9 and s["mre"]["mean"] < 5 and s["mre"]["std"] > 0


def test_random_splits_and_oob(step_ds):
    data = training_data(step_ds, "T")
    res = evaluate(data, "rf", scheme="random", repeats=3, test_size=0.3, params={"n_estimators": 30})
    assert len(res.splits) == 3 and (res.splits["n_test"] == 36).all()
    assert 0.9 < res.oob["r2"] <= 1.0
    assert oob_score(data)["mre"] < 5


def test_auto_is_nested_in_each_split(smooth_ds):
    data = training_data(smooth_ds, "T")
    res = evaluate(data, "auto", folds=3, families=["linear", "knn"])
    assert len(res.chosen) == 3 and all(c.startswith(("linear", "knn")) for c in res.chosen)


def test_residuals_of_a_target_measured_at_zero_keep_every_run():
    """A run measured at 0 has no relative error: it was left out of residuals.png, unsaid."""
    from perflearn.learn.evaluate import residuals

    values, label = residuals([2.0, 4.0], [2.2, 3.0])
    assert np.allclose(values, [10.0, -25.0]) and label == "relative error of prediction (%)"
    values, label = residuals([0.0, 4.0], [0.5, 3.0])
    assert np.allclose(values, [0.5, -1.0]) and label == "predicted - measured (1 measured 0)"


def test_a_learning_curve_tells_each_size_as_it_ends(step_ds):
    """With auto, a curve of 150 fits ran 29 minutes without a word (session 55's audit)."""
    data = training_data(step_ds, "T")
    told = []
    learning_curve(data, "cart", ks=[2, 4], repeats=1, progress=lambda *a: told.append(a))
    learning_curve(data, "cart", fractions=[0.2, 0.8], repeats=1, progress=lambda *a: told.append(a))
    assert told == [(1, 2, "k = 2"), (2, 2, "k = 4"), (1, 2, "20%"), (2, 2, "80%")]


def test_inverse_kfold_learning_curve_shrinks_training_set(step_ds):
    data = training_data(step_ds, "T")
    lc = learning_curve(data, "cart", ks=[2, 4, 8], repeats=1)
    assert list(lc["n_train"]) == [60.0, 30.0, 15.0]
    # less training data, larger error (a step function learned from fewer points)
    assert lc["mre_mean"].iloc[0] < lc["mre_mean"].iloc[-1]
    fr = learning_curve(data, "cart", fractions=[0.2, 0.8], repeats=2)
    assert list(fr["n_train"]) == [24.0, 96.0]


def test_learning_curve_bad_sizes(step_ds):
    data = training_data(step_ds, "T")
    with pytest.raises(UsageError, match="fewer than 2 training runs"):
        learning_curve(data, "cart", ks=[100])
    with pytest.raises(UsageError, match="fraction must be in"):
        learning_curve(data, "cart", fractions=[1.5])


def test_bad_scheme(step_ds):
    with pytest.raises(UsageError, match="unknown scheme"):
        evaluate(training_data(step_ds, "T"), "cart", scheme="loo")


def test_figures_are_pngs(step_ds, tmp_path):
    data = training_data(step_ds, "T")
    res = evaluate(data, "cart", folds=3)
    a = plot_pred_vs_actual(res.y_true, res.y_pred, tmp_path / "a.png")
    b = plot_residuals(res.y_true, res.y_pred, tmp_path / "b.png")
    c = plot_learning_curve(learning_curve(data, "cart", ks=[2, 3], repeats=1), tmp_path / "c.png")
    for p in (a, b, c):
        assert p.read_bytes()[:4] == b"\x89PNG"
    page = html_page("t", [a, b], ["<table></table>"], tmp_path / "x.html").read_text()
    assert page.count("data:image/png;base64,") == 2


def test_evaluate_tells_its_progress_split_by_split(step_ds):
    from perflearn.learn import evaluate as ev
    from perflearn.learn.features import training_data

    told = []
    ev.evaluate(training_data(step_ds, "T"), "cart", folds=4, repeats=2, progress=lambda *a: told.append(a))
    assert [(d, t) for d, t, _ in told] == [(i, 8) for i in range(1, 9)] and told[0][2] == "cart"


def test_learning_curve_error_bars_stop_at_zero(tmp_path, monkeypatch):
    """Session 57's audit: a bar of ± one std reached below 0 % MRE, an error no model makes."""
    import pandas as pd
    from matplotlib.axes import Axes

    drawn = []
    errorbar = Axes.errorbar

    def kept(self, *args, **kwargs):
        drawn.append(errorbar(self, *args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(Axes, "errorbar", kept)
    curve = pd.DataFrame({"n_train": [3.0, 6.0, 12.0], "mre_mean": [14.7, 3.6, 0.4], "mre_std": [15.0, 9.7, 0.1]})
    plot_learning_curve(curve, tmp_path / "c.png")
    bars = drawn[0].lines[2][0].get_segments()  # one (x, bottom) .. (x, top) segment per point
    assert [round(float(seg[0][1]), 9) for seg in bars] == [0.0, 0.0, 0.3]
    assert [round(float(seg[1][1]), 9) for seg in bars] == [29.7, 13.3, 0.5]
