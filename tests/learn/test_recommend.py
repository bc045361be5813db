from pathlib import Path

import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn import fit
from perflearn.learn.recommend import Constraint, defaults_table, recommend
from perflearn.learn.space import search_space
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

DATA = Path(__file__).resolve().parents[1] / "data" / "learn"


@pytest.fixture(scope="module")
def bowl():
    g = [(x, y) for x in range(11) for y in range(11)]
    df = pd.DataFrame(g, columns=["x", "y"])
    df["T"] = (df.x - 3) ** 2 + (df.y - 7) ** 2 + 1.0
    df["lat"] = df.x + 0.5
    ds = Dataset.from_frame(df, metrics=["T", "lat"], name="bowl")
    return ds, {"T": fit(ds, "T", family="gp"), "lat": fit(ds, "lat", family="linear")}


def test_exhaustive_finds_known_optimum(bowl):
    ds, models = bowl
    r = recommend(models, "T", "min", search_space(ds, ["x", "y"]))
    assert r.method == "exhaustive" and r.evaluated == 121
    assert r.point == {"x": 3, "y": 7}
    assert abs(r.predicted["T"] - 1.0) < 0.2 and r.feasible
    assert "violation" not in r.top  # no constraint: no column of zeros


def test_constraint_moves_the_optimum(bowl):
    ds, models = bowl
    r = recommend(models, "T", "min", search_space(ds, ["x", "y"]), constraints=[Constraint.parse("lat<=1.6")])
    assert r.point == {"x": 1, "y": 7} and r.feasible
    r = recommend(models, "T", "min", search_space(ds, ["x", "y"]), constraints=[Constraint.parse("lat <= 0")])
    assert not r.feasible and r.point["x"] == 0  # the least violating
    assert r.top["violation"].iloc[0] > 0  # how far past lat <= 0


def test_a_point_on_a_strict_bound_does_not_meet_it_and_says_so():
    """lat < 1 met with lat = 1 stood as a violation of 1e-12, and the table showed 1e-12."""
    df = pd.DataFrame({"x": list(range(10)) * 2})
    df["lat"] = (df.x > 4) + 1.0  # 1 up to x = 4, then 2: a tree predicts these exactly
    df["T"] = 20.0 - df.x
    ds = Dataset.from_frame(df, metrics=["T", "lat"], name="step")
    models = {"T": fit(ds, "T", family="linear"), "lat": fit(ds, "lat", family="cart")}
    strict = recommend(models, "T", "min", search_space(ds, ["x"]), constraints=[Constraint.parse("lat<1")], top=10)
    assert not strict.feasible and strict.point == {"x": 4}  # on the bound beats past it, then the objective
    assert list(strict.top["violation"][:5]) == [0.0] * 5 and strict.top["on_strict_bound"][:5].all()
    assert (strict.top["violation"][5:] == 1.0).all() and not strict.top["on_strict_bound"][5:].any()
    loose = recommend(models, "T", "min", search_space(ds, ["x"]), constraints=[Constraint.parse("lat<=1")])
    assert loose.feasible and loose.point == {"x": 4} and "on_strict_bound" not in loose.top


def test_sampling_and_local_search_find_known_optimum(bowl):
    ds, models = bowl
    r = recommend(models, "T", "min", search_space(ds, ["x", "y"]), max_exhaustive=10, samples=15, seed=3)
    assert r.method == "sampling+local"
    assert r.point == {"x": 3, "y": 7}
    assert r.evaluated < 121 * 3


def test_context_is_held_fixed(bowl):
    ds, models = bowl
    r = recommend(models, "T", "max", search_space(ds, ["x", "y"]), context={"x": 5})
    assert r.point["x"] == 5 and r.point["y"] in (0,)


def test_constraint_parse_errors():
    assert Constraint.parse("p95<=1.1") == Constraint("p95", "<=", 1.1)
    assert Constraint.parse("tput > 3e3").value == 3000.0
    with pytest.raises(UsageError, match="is not METRIC<=VALUE"):
        Constraint.parse("p95 = 3")


def test_kunkel_defaults_table():
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"], context=["hole", "size"])
    t = defaults_table(ds, "MBps", "max", family="cart")
    assert t.knobs == ["sieving", "buffer"] and t.cross_fitted
    s = t.summary.set_index("choice")
    learned = s.loc["learned (cart)"]
    defaults = s[s.index.str.startswith("default ")]
    best = s.loc["best measured"]
    # no single default is best everywhere; the learned choice is (nearly) the best measured
    assert learned["mean"] > defaults["mean"].max()
    assert learned["loss"] < 0.05 * best["mean"]
    assert (defaults["loss"] > 10).all()
    assert len(t.per_context) == 14
    assert set(t.per_context.columns) >= {"hole", "size", "learned", "learned_value", "default_value", "best_value"}
    small = t.per_context[t.per_context.hole < 8]
    assert small["learned"].str.contains("sieving=on").all()


def test_defaults_table_counts_the_learned_choices_worst_and_gives_relative_losses(tmp_path):
    """The learned row's worst_freq was a constant 0: here it chose the worst setting in
    every context. Per context there was no relative loss, and a tie's gain read "-0"."""
    rows = [(c, k, 100.0 if (k == "a") == (c % 2 == 1) else 50.0) for c in range(1, 9) for k in "ab"]
    csv = tmp_path / "flip.csv"
    pd.DataFrame(rows, columns=["c", "k", "perf"]).to_csv(csv, index=False)
    ds = Dataset.from_csv(csv, metrics=["perf"], context=["c"])
    t = defaults_table(ds, "perf", "max", family="rf")
    s = t.summary.set_index("choice")
    learned = s.loc["learned (rf)"]
    assert learned["mean"] == 50 and (learned["best_freq"], learned["worst_freq"]) == (0, 8)  # cross-fitted: it never sees c
    assert s.loc["best measured", "worst_freq"] == 0 and s.loc["default k=a", "worst_freq"] == 4
    per = t.per_context
    assert (per["relative_to_best"] == 0.5).all()
    assert sorted(per["relative_to_default"].unique()) == [0.5, 1.0]
    assert not any(str(g) == "-0.0" for g in per["gain_vs_default"])


def test_defaults_table_unknown_context():
    ds = Dataset.from_csv(DATA / "sieving.csv", metrics=["MBps"])
    with pytest.raises(UsageError, match="unknown context column 'pattern'"):
        defaults_table(ds, "MBps", "max", context=["pattern"])


def test_recommend_prints_knob_settings_as_they_are_set(tmp_path):
    """The top table printed bs=65536 as 6.554e+04: a setting to copy, rounded."""
    import pandas as pd
    from typer.testing import CliRunner

    from perflearn.cli import app

    rows = [{"bs": bs, "depth": d, "MBps": bs ** 0.5 * d} for bs in (4096, 65536, 1048576) for d in (1, 2, 4)]
    pd.DataFrame(rows).to_csv(tmp_path / "io.csv", index=False)
    out = CliRunner().invoke(app, ["recommend", "-t", "MBps", "--csv", str(tmp_path / "io.csv"), "--maximize",
                                   "--family", "cart"])
    assert out.exit_code == 0, out.output
    assert "1048576" in out.output and "1.049e+06" not in out.output.split("recommended:")[0]


def test_local_search_finds_the_known_optimum_of_many_knobs():
    """60 two-valued knobs (2^60 points: sampling and local search) with one effect each: the
    best point sets each knob by its effect's sign. The search scores every one-knob move at
    once and steps along every improving knob together (a call per knob took over 13 minutes
    on 500 knobs)."""
    import numpy as np

    rng = np.random.default_rng(0)
    effects = rng.normal(0, 1, 60)
    runs = pd.DataFrame(rng.integers(0, 2, (200, 60)), columns=[f"k{i}" for i in range(60)])
    runs["T"] = 100 + runs.to_numpy() @ effects
    ds = Dataset.from_frame(runs, metrics=["T"], name="wide")
    model = fit(ds, "T", family="linear")
    r = recommend({"T": model}, "T", "max", search_space(ds, list(runs.columns[:60]), any_combination=True))
    assert r.method == "sampling+local"
    assert r.point == {f"k{i}": int(effects[i] > 0) for i in range(60)}
    assert r.predicted["T"] == pytest.approx(100 + effects[effects > 0].sum(), rel=1e-6)


def test_relative_is_undefined_where_a_value_is_not_positive(tmp_path):
    """A score below 0 gave the worst default a "relative" of 9.04, above the best's 1; a best of 0
    gave nan for some rows and 0 for others, and decide a gain of "+nan%" (session 51's audit).
    The loss is a difference and stays; the ratio is NaN where it means nothing."""
    rows = [(c, k, -(1.0 + c) * (2.0 if k == "a" else 1.0)) for c in range(1, 7) for k in "ab" for _ in range(2)]
    csv = tmp_path / "neg.csv"
    pd.DataFrame(rows, columns=["c", "k", "score"]).to_csv(csv, index=False)
    ds = Dataset.from_csv(csv, metrics=["score"], context=["c"])
    s = defaults_table(ds, "score", "max", family="rf").summary.set_index("choice")
    assert s["relative"].isna().all() and s.loc["default k=a", "loss"] > s.loc["default k=b", "loss"] >= 0
    from perflearn.learn.decide import _gain

    assert _gain(0.0, 0.0) == "0" and _gain(2.0, 0.0) == "2" and _gain(1.0, 4.0) == "1 (+25.0%)"


def test_a_constraint_on_a_knob_says_so_and_a_family_named_twice_is_one_candidate(tmp_path):
    from typer.testing import CliRunner

    from perflearn.cli import app
    from perflearn.learn.models import AutoRegressor

    rows = [(t, g, 100.0 / t * (1.3 if g == "s" else 1.0)) for t in (1, 2, 4, 8) for g in "ps" for _ in range(3)]
    frame = pd.DataFrame(rows, columns=["threads", "gov", "perf"])
    frame["p95"] = 1.5 * frame["perf"]
    frame.to_csv(tmp_path / "r.csv", index=False)
    result = CliRunner().invoke(app, ["recommend", "--csv", str(tmp_path / "r.csv"), "-m", "perf,p95", "-t", "perf",
                                      "-w", "threads<=2"])
    assert result.exit_code == 2 and "constraint 'threads<=2': threads is a knob or context" in result.output, \
        result.output  # it said "unknown target 'threads'"
    result = CliRunner().invoke(app, ["recommend", "--csv", str(tmp_path / "r.csv"), "-m", "perf", "-t", "perf",
                                      "-w", "p95<=30"])
    assert result.exit_code == 2 and "p95 is a knob or context" in result.output and "name others with -m" in \
        " ".join(result.output.split()), result.output
    twice = AutoRegressor(families=["rf", "rf", "linear"]).candidates(40, 3, True)
    once = AutoRegressor(families=["rf", "linear"]).candidates(40, 3, True)
    assert [c.label() for c in twice] == [c.label() for c in once]


def test_a_setting_every_run_of_which_failed_is_never_recommended(tmp_path):
    """Session 52's audit: t=8, m=a was killed in both runs (out of memory); the model of
    the others predicted it best (a at every t, 8 the fastest) and it was recommended."""
    rows = [(t, m, "ok", 100.0 / t + (5 if m == "b" else 0) + d) for t in (1, 2, 4) for m in "ab" for d in (0, 0.1)]
    rows += [(8, "a", "failed", None), (8, "a", "failed", None), (8, "b", "ok", 17.5), (8, "b", "ok", 17.6)]
    pd.DataFrame(rows, columns=["t", "m", "status", "y"]).to_csv(tmp_path / "f.csv", index=False)
    ds = Dataset.from_csv(tmp_path / "f.csv", metrics=["y"])
    model = fit(ds, "y", family="linear")
    space = search_space(ds, ["t", "m"])
    rec = recommend({"y": model}, "y", "min", space)
    assert rec.point == {"t": 8, "m": "b"}, rec.point
    assert any("1 setting(s) every run of which failed (t=8, m=a)" in n for n in rec.notes), rec.notes
    free = recommend({"y": model}, "y", "min", search_space(ds, ["t", "m"], any_combination=True))
    assert free.point == {"t": 8, "m": "b"}  # nor with --any-combination: nothing was learned there


def test_many_numeric_values_are_searched_at_measured_values(tmp_path):
    """A knob of 100 values was searched at 64 interpolated quantiles: threads=37.14."""
    pd.DataFrame({"t": range(1, 101), "y": [(t - 37.5) ** 2 + 1 for t in range(1, 101)]}).to_csv(tmp_path / "k.csv",
                                                                                                 index=False)
    ds = Dataset.from_csv(tmp_path / "k.csv", metrics=["y"])
    values = search_space(ds, ["t"]).values["t"]
    assert len(values) == 64 and all(float(v).is_integer() for v in values) and values[0] == 1 and values[-1] == 100


def test_a_setting_whose_every_run_left_the_target_empty_is_never_recommended(tmp_path):
    """Session 54's audit: a CSV says a run failed with an empty cell; without a status
    column, the setting whose only runs were empty was recommended (the model's best)."""
    rows = [(t, m, 100.0 / t + (5 if m == "b" else 0) + d) for t in (1, 2, 4) for m in "ab" for d in (0, 0.1)]
    rows += [(8, "a", None), (8, "a", None), (8, "b", 17.5), (8, "b", 17.6)]
    pd.DataFrame(rows, columns=["t", "m", "y"]).to_csv(tmp_path / "e.csv", index=False)
    ds = Dataset.from_csv(tmp_path / "e.csv", metrics=["y"])
    rec = recommend({"y": fit(ds, "y", family="linear")}, "y", "min", search_space(ds, ["t", "m"], target="y"))
    assert rec.point == {"t": 8, "m": "b"}, rec.point
    assert any("1 setting(s) every run of which failed or left y empty (t=8, m=a)" in n for n in rec.notes), rec.notes


def test_defaults_table_keeps_settings_apart_whatever_their_text(tmp_path):
    """Session 54's audit: settings were keyed by their values joined with "|", so a=x|y,b=z
    and a=x,b=y|z were one setting (the best of c1 read 13 for 10); numeric contexts were
    listed as text (1, 16, 2); and a target in seconds made every value a tie for best
    (np.isclose's absolute tolerance of 1e-8)."""
    rows = []
    for n in (1, 2, 4, 8, 16):
        rows += [(n, "x|y", "z", 10.0 + n), (n, "x", "y|z", 60.0 + n), (n, "x", "z", 15.0 + n)]
    frame = pd.DataFrame(rows, columns=["n", "a", "b", "time"])
    for scale in (1.0, 1e-9):
        ds = Dataset.from_frame(frame.assign(time=frame["time"] * scale), metrics=["time"], context=["n"], name="p")
        t = defaults_table(ds, "time", "min", family="cart")
        assert list(t.per_context["n"]) == [1, 2, 4, 8, 16]
        assert (t.per_context["best"] == "a=x|y,b=z").all() and len(t.summary) == 5  # learned, 3 defaults, best
        s = t.summary.set_index("choice")
        assert s.loc["default a=x|y,b=z", "best_freq"] == 5 and s.loc["default a=x,b=z", "best_freq"] == 0, scale
        assert s.loc["default a=x,b=y|z", "worst_freq"] == 5, scale
        assert t.blind_to == []  # a numeric context


def test_defaults_table_says_a_categorical_context_is_never_seen_by_the_model_choosing_for_it():
    rows = [(c, k, (1.0 if (k == "p") == (c == "small") else 2.0) + 0.01 * i)
            for c in ("small", "large") for k in "pq" for i in range(3)]
    ds = Dataset.from_frame(pd.DataFrame(rows, columns=["ctx", "k", "t"]), metrics=["t"], context=["ctx"], name="c")
    t = defaults_table(ds, "t", "min", family="cart")
    assert t.blind_to == ["ctx"] and t.cross_fitted


def test_recommend_says_what_the_model_cannot_choose_and_when_no_point_meets_the_constraints(tmp_path):
    from typer.testing import CliRunner

    from perflearn.cli import app

    rows = [(c, x, a, 10 + x * (1 if c == "s" else -1) + (a == "q"), 10 + 2 * x)
            for c in "sl" for x in (1, 2, 3) for a in "pq"]
    pd.DataFrame(rows, columns=["ctx", "x", "a", "time", "p95"]).to_csv(tmp_path / "r.csv", index=False)
    base = ["recommend", "--csv", str(tmp_path / "r.csv"), "-m", "time,p95", "-t", "time", "--context-cols", "ctx",
            "--family", "cart"]
    out = CliRunner().invoke(app, [*base, "-c", "ctx=s", "-f", "x"])
    said = " ".join(out.output.split())
    assert out.exit_code == 0, out.output
    assert "--context ctx: not a feature of the model (-f): the recommendation is the same for any ctx" in said
    assert "not chosen: a, not a feature of the model (-f)" in said
    out = CliRunner().invoke(app, [*base, "-c", "ctx=s", "-w", "p95<=11"])
    assert "recommended, though no point meets every constraint (the least violating): x=1" in " ".join(
        out.output.split()), out.output
    out = CliRunner().invoke(app, [*base, "--table", "-w", "p95<=20"])
    said = " ".join(out.output.split())
    assert "the table fits its own cart models on every knob, for time alone: -w shapes the recommendation only" in said
    assert "ctx is categorical: the model choosing for a context never saw its value" in said
