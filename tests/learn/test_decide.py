from pathlib import Path

import pytest

from perflearn.errors import UsageError
from perflearn.learn.decide import decide
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

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


def test_decide_fills_a_partly_given_context_and_warns_beyond_the_runs():
    """Given part of the context, decide chose the rest among the settings ("size=10" as if a
    knob); a context beyond the runs was extrapolated without a word (recommend warns)."""
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"])
    d = decide(ds, "MBps", "max", family="cart", context={"hole": 4})
    line = next(x for x in d.lines() if x.startswith("recommended"))
    assert d.context["hole"] == 4 and d.context["size"] in (16, 256) and d.taken == ["size"]
    assert "for hole=4, size=16 (size: the lower median of 2 contexts measured as often with hole=4" in line
    assert "size=" not in line.split("): ", 1)[1] and not d.warnings  # a context, not a setting; measured
    unmeasured = decide(ds, "MBps", "max", family="cart", context={"hole": 3})  # inside the range, never measured
    line = next(x for x in unmeasured.lines() if x.startswith("recommended"))
    assert "size: the lower median of 2 contexts measured as often of all runs (no run had hole=3)" in line, line
    assert unmeasured.warnings[0] == "no run had hole=3: a context never measured (size: the most common of all runs)"
    far = decide(ds, "MBps", "max", family="cart", context={"hole": 128, "size": 16})
    assert far.taken == [] and "measured as often" not in next(x for x in far.lines() if x.startswith("recommended"))
    assert far.warnings == ["no run had hole=128, size=16: a context never measured",
                            "1 point(s) with hole outside the trained range 1 to 64 (e.g. 128): extrapolated"]
    # under auto the table's choices are a forest's (auto per context would refit its search each time): said
    from dataclasses import replace

    said = replace(d, table_family="rf").lines()[-1]
    assert "learned choices per context (a random forest's, cross-fitted by context)" in said
    assert "random forest" not in d.lines()[-1]


def test_decide_never_recommends_a_setting_whose_every_run_left_the_target_empty():
    """Session 54's review: recommend left such settings out, decide (searching as recommend
    does) recommended a=4, every run of which was empty."""
    import pandas as pd

    rows = [(a, b, 10.0 - 2 * a + b + 0.01 * r) for a in (1, 2, 3) for b in (1, 2) for r in range(3)]
    rows += [(4, b, None) for b in (1, 2) for _ in range(3)]
    ds = Dataset.from_frame(pd.DataFrame(rows, columns=["a", "b", "t"]), metrics=["t"], name="e")
    d = decide(ds, "t", "min", family="linear")
    assert d.recommendation.point == {"a": 3, "b": 1}, d.recommendation.point
    assert any("failed or left t empty" in n for n in d.recommendation.notes)


def _decide_cli(*args):
    from typer.testing import CliRunner

    from perflearn.cli import app

    return CliRunner().invoke(app, ["decide", *map(str, args)])


def test_decide_without_a_setting_in_every_context_still_decides(tmp_path):
    """Session 57's audit: a knob measured at other values in each context left no system-wide
    default, and decide ended with exit 2 after its fit: the CV error, rules and recommendation
    lost, where recommend answered. Now the comparison alone is skipped, said in one line."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    threads = rng.uniform(1, 32, 24).round(2)  # no value twice: no setting shared by two contexts
    load = np.repeat([100, 200, 300], 8)
    csv = tmp_path / "c.csv"
    pd.DataFrame({"load": load, "threads": threads, "lat": 10 + (threads - 8) ** 2 / 20 + load / 100}).to_csv(
        csv, index=False)
    r = _decide_cli("--csv", csv, "-t", "lat", "--context-cols", "load", "--family", "cart")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines.pop(0) == ("knobs: threads (every column of c.csv but the metrics (lat) and context (load)); "
                            "name a measured column with -m")
    assert lines[0].startswith("model of lat: cart on 24 runs") and any(x.startswith("recommended") for x in lines)
    assert lines[-1] == ("learned vs system-wide defaults: not compared (no knob setting was measured in every "
                         "context: a default is one setting for all)")
    # recommend --table the same (it printed its recommendation, then ended with exit 2)
    from typer.testing import CliRunner

    from perflearn.cli import app

    r = CliRunner().invoke(app, ["recommend", "--csv", str(csv), "-t", "lat", "--context-cols", "load", "-c",
                                 "load=200", "--table", "--family", "cart"])
    assert r.exit_code == 0 and "recommended: threads=" in r.output, r.output
    assert "learned vs system-wide defaults: not compared (no knob setting" in r.output


def test_decide_says_a_categorical_context_is_unseen_by_the_learned_choice(tmp_path):
    """Session 57's audit: decide printed the learned choices' gain over the default (-23 %)
    without the caveat recommend --table gives: cross-fitted, the model choosing for a context
    never saw its categorical value."""
    import pandas as pd

    rows = [dict(ctx=ctx, threads=t, gov=g, runtime=10 + (t - (4 if ctx == "small" else 16)) ** 2 / 10
                 + (2 if g == "save" else 0) + 0.01 * rep)
            for ctx in ("small", "large") for t in (1, 4, 16) for g in ("perf", "save") for rep in range(2)]
    csv = tmp_path / "d.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    r = _decide_cli("--csv", csv, "-t", "runtime", "--context-cols", "ctx", "--family", "cart")
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert ("learned choices per context vs best single default" in said
            and "learned: ctx is categorical: the model choosing for a context never saw its value, so its choice "
                "there cannot depend on it (a numeric context is interpolated)" in said), r.output


def test_decide_reads_a_context_given_as_text_as_the_cli_does_and_checks_sense_before_fitting(monkeypatch):
    """Session 57's audit: the API's context={"hole": "4"} (text, for the numeric hole) matched
    no run: "no run had hole=4: a context never measured", the rest of the context taken from
    all runs, where the CLI's --context hole=4 is 4. And an invalid sense was refused only
    after the fit, which can take minutes."""
    import perflearn.learn.decide as decide_module

    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"])
    as_text = decide(ds, "MBps", "max", family="cart", context={"hole": "4"})
    as_number = decide(ds, "MBps", "max", family="cart", context={"hole": 4})
    assert as_text.context == as_number.context and as_text.context["hole"] == 4 and not as_text.warnings
    assert as_text.lines() == as_number.lines()

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the sense was checked")

    monkeypatch.setattr(decide_module, "fit_data", no_fit)
    with pytest.raises(UsageError, match="objective sense must be min or max, got 'maximum'"):
        decide(ds, "MBps", "maximum", family="cart")
    with pytest.raises(UsageError, match="'bs' is no context column"):  # a context name too, before the fit
        decide(ds, "MBps", "max", family="cart", context={"bs": 8})
