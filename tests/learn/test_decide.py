from pathlib import Path

import pytest

from perflearn.errors import UsageError
from perflearn.learn.decide import decide
from perflearn.store import Dataset

DATA = Path(__file__).resolve().parents[1] / "data" / "learn"


def test_decide_with_context_reports_gain_over_default():
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"])
    d = decide(ds, "MBps", "max", family="cart")
    text = "\n".join(d.lines())
    assert d.defaults is not None
    assert "best single default (sieving=on,buffer=4)" in text
    # the recommended point is for the most common context, and sieving pays off for small holes
    assert d.recommendation.point["sieving"] == ("on" if d.recommendation.point["hole"] < 8 else "off")
    s = d.defaults.summary.set_index("choice")
    assert s.iloc[0]["mean"] > s[s.index.str.startswith("default ")]["mean"].max()


def test_decide_without_context():
    ds = Dataset.from_csv(DATA / "step.csv", metrics=["T", "lat"])
    d = decide(ds, "T", "min", family="rf")
    assert d.defaults is None
    assert d.recommendation.point["a"] < 5 and d.recommendation.point["b"] != "y"
    assert "predicted gain over the median point" in d.lines()[-1]


def test_a_gain_and_its_share_carry_one_sign():
    from perflearn.learn.decide import _gain

    assert _gain(-0.0, 58750.0) == "0 (0.0%)"  # the demo's tie printed "-0 (0.0%)"
    assert _gain(-500.0, 40000.0) == "-500 (-1.2%)"  # a loss was "-500 (1.2%)"
    assert _gain(500.0, -40000.0) == "500 (+1.2%)"


def test_decide_says_which_model_and_which_context_it_took():
    """It printed the first member's family for an ensemble, and a context it picked itself
    among the settings, as if chosen."""
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"])
    d = decide(ds, "MBps", "max", family="cart")
    line = next(x for x in d.lines() if x.startswith("recommended"))
    assert "(the first of 14 contexts measured as often; --context NAME=VALUE for another)" in line
    settings = line.split("): ", 1)[1]
    assert "hole=" not in settings and "size=" not in settings and "sieving=" in settings
    given = decide(ds, "MBps", "max", family="cart", context=dict(d.context))
    assert "measured as often" not in next(x for x in given.lines() if x.startswith("recommended"))
    with pytest.raises(UsageError, match="'sieving' is no context column"):  # a knob is no context
        decide(ds, "MBps", "max", family="cart", context={"sieving": "on"})
    assert d.lines()[0].startswith(f"model of MBps: {d.model.chosen} on ")
