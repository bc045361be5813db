"""Every bad input is one clear line (UsageError with a where=)."""

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn import fit
from perflearn.learn.evaluate import evaluate
from perflearn.learn.features import training_data
from perflearn.store import Dataset

from .conftest import step_frame


def _one_line(exc):
    msg = str(exc.value)
    assert "\n" not in msg and exc.value.where
    return msg


def test_unknown_target(step_ds):
    with pytest.raises(UsageError, match=r"unknown target 'nope' \(metrics: T\)") as exc:
        fit(step_ds, "nope")
    _one_line(exc)


def test_unknown_feature(step_ds):
    with pytest.raises(UsageError, match=r"unknown feature 'zz'") as exc:
        fit(step_ds, "T", ["a", "zz"])
    _one_line(exc)


def test_fewer_rows_than_folds():
    ds = Dataset.from_frame(step_frame(4), metrics=["T"])
    with pytest.raises(UsageError, match="4 usable runs are fewer than the 5 cross-validation folds") as exc:
        fit(ds, "T", family="cart", cv=5)
    _one_line(exc)
    with pytest.raises(UsageError, match="fewer than the 10 folds"):
        evaluate(training_data(ds, "T"), "cart", folds=10)


def test_constant_target():
    df = step_frame(20)
    df["T"] = 3.0
    with pytest.raises(UsageError, match="target 'T' is constant") as exc:
        fit(Dataset.from_frame(df, metrics=["T"]), "T")
    _one_line(exc)


def test_all_null_feature():
    df = step_frame(20)
    df["d"] = np.nan
    with pytest.raises(UsageError, match="feature 'd' is NULL in every run") as exc:
        fit(Dataset.from_frame(df, metrics=["T"]), "T")
    _one_line(exc)


def test_all_runs_failed():
    df = step_frame(20)
    df["T"] = np.nan
    with pytest.raises(UsageError, match="no run has a value for 'T'"):
        fit(Dataset.from_frame(df, metrics=["T"]), "T")


def test_unseen_category_at_predict(step_ds):
    model = fit(step_ds, "T", family="cart")
    with pytest.raises(UsageError, match=r"feature 'b' has category 'w' not seen in training \(known: x, y, z\)") as exc:
        model.predict({"a": 1.0, "b": "w", "c": 1})
    _one_line(exc)


def test_model_trained_on_other_knobs(step_ds):
    model = fit(step_ds, "T", family="cart")
    with pytest.raises(UsageError, match="model was trained on features a, b, c; missing b") as exc:
        model.predict(pd.DataFrame({"a": [1.0], "c": [2], "q": [3]}))
    _one_line(exc)
    other = Dataset.from_frame(pd.DataFrame({"q": [1, 2], "T": [1.0, 2.0]}), metrics=["T"], name="other")
    with pytest.raises(UsageError, match="this data lacks a, b, c"):
        model.check_dataset(other)


def test_non_numeric_value_for_numeric_feature(step_ds):
    model = fit(step_ds, "T", family="cart")
    with pytest.raises(UsageError, match="feature 'a' needs a number, got 'big'"):
        model.predict({"a": "big", "b": "x", "c": 1})


def test_unknown_family(step_ds):
    with pytest.raises(UsageError, match="unknown model family 'tree'"):
        fit(step_ds, "T", family="tree")
