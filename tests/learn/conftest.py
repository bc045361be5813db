"""Synthetic datasets of known structure for the learning tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perflearn.store import Dataset


def step_frame(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """T = 10 below a = 5, 20 above, plus a small effect of c and of category b."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "a": rng.uniform(0, 10, n),
        "b": rng.choice(["x", "y", "z"], n),
        "c": rng.integers(1, 5, n),
    })
    df["T"] = 10 + 10 * (df["a"] > 5) + 0.5 * df["c"] + 1.0 * (df["b"] == "y") + rng.normal(0, 0.2, n)
    return df


@pytest.fixture
def step_ds() -> Dataset:
    return Dataset.from_frame(step_frame(), metrics=["T"], name="step")


@pytest.fixture
def smooth_ds() -> Dataset:
    """A smooth positive function of two numeric knobs (any decent family learns it)."""
    rng = np.random.default_rng(1)
    n = 80
    df = pd.DataFrame({"x1": rng.uniform(1, 4, n), "x2": rng.uniform(1, 4, n)})
    df["T"] = 5 + 2 * df["x1"] + df["x2"] ** 2
    return Dataset.from_frame(df, metrics=["T"], name="smooth")
