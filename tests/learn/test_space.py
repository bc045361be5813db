"""The space a recommendation searches holds configurations, not every combination of
the knobs' values: one-hot groups found in the runs, and the stored spec's design
constraints."""

import itertools

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.learn import fit
from perflearn.learn.recommend import recommend
from perflearn.learn.space import one_hot_groups, search_space
from perflearn.store import Dataset, open_store

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


@pytest.fixture(scope="module")
def one_hot():
    """Two 0/1 options and one of three values encoded one-hot (c_1, c_2, c_3), every
    configuration twice; T additive, so a linear model rewards c_2 and c_3 at once."""
    rows = []
    for a, b, c in itertools.product((0, 1), (0, 1), (1, 2, 3)):
        for _ in range(2):
            rows.append({"a": a, "b": b, "c_1": int(c == 1), "c_2": int(c == 2), "c_3": int(c == 3),
                         "T": 10 - 2 * a + b - 3 * (c == 2) - 4 * (c == 3)})
    ds = Dataset.from_frame(pd.DataFrame(rows), metrics=["T"], name="onehot")
    return ds, {"T": fit(ds, "T", family="linear")}


def test_a_one_hot_option_is_searched_as_one_option(one_hot):
    ds, models = one_hot
    knobs = ["a", "b", "c_1", "c_2", "c_3"]
    space = search_space(ds, knobs)
    assert space.groups == [("c_1", "c_2", "c_3")]
    r = recommend(models, "T", "min", space)
    assert r.point == {"a": 1, "b": 0, "c_1": 0, "c_2": 0, "c_3": 1}
    assert r.evaluated == 12  # 2 x 2 x 3 configurations, not 2^5 combinations
    assert any("c_1, c_2, c_3" in note for note in r.notes)
    sampled = recommend(models, "T", "min", space, max_exhaustive=4, samples=6, seed=1)
    assert sampled.method == "sampling+local" and sampled.point == r.point
    # searched freely, the same model recommends a setting no run could have: c_2 = c_3 = 1
    free = recommend(models, "T", "min", search_space(ds, knobs, any_combination=True))
    assert free.point["c_2"] == free.point["c_3"] == 1 and free.evaluated == 32


def test_a_complement_chance_could_show_is_no_group():
    full = pd.DataFrame(list(itertools.product((0, 1), repeat=4)), columns=["x", "y", "z", "v"])
    full["w"] = 1 - full["x"]  # w is "not x" in all 16 configurations: chance shows that once in 65536
    assert one_hot_groups(full, ["x", "y", "z", "v", "w"]) == [("x", "w")]
    few = full[full["v"] == 0]  # in 8 configurations once in 256: no evidence
    assert one_hot_groups(few, ["x", "y", "z", "v", "w"]) == []
    assert one_hot_groups(full.assign(w=full["y"]), ["x", "y", "z", "v", "w"]) == []  # not exclusive


def test_a_small_option_crossed_with_another_knob_is_a_group():
    """A 3-valued option as r1, r5, r9 crossed with six values of q: 18 configurations,
    each with exactly one of them. Its 3 patterns alone (0.44 ** 3) were no evidence, so it
    was never grouped, and recommend proposed r1 = r5 = 1, which no run could have."""
    rows = [dict(r1=int(r == 0), r5=int(r == 1), r9=int(r == 2), q=q) for r in range(3) for q in range(1, 7)]
    frame = pd.DataFrame(rows)
    assert one_hot_groups(frame, ["r1", "r5", "r9", "q"]) == [("r1", "r5", "r9")]
    assert one_hot_groups(frame[frame["q"] == 1], ["r1", "r5", "r9", "q"]) == []  # 3 configurations: no evidence
    # a measured context, or a repetition, is no new draw: 2 configurations x 15 runs are 2 (session 56's review)
    runs = pd.DataFrame([dict(a=a, b=1 - a, temp=20 + i / 7) for a in (0, 1) for i in range(15)])
    assert one_hot_groups(runs, ["a", "b", "temp"], chosen=["a", "b"]) == []
    from perflearn.learn.features import training_data

    ds = Dataset.from_frame(runs.assign(t=1.0 + runs["a"] + runs["temp"]), metrics=["t"], context=["temp"])
    assert training_data(ds, "t").schema.one_hot == []  # the fit's schema counts its knobs' configurations


SPEC = """
    [experiment]
    name = "bounded"
    [workload]
    command = ["python3", "-c", "print('score', 2 * {a} + 3 * {b})"]
    [knobs.a]
    values = [1, 2, 3, 4]
    [knobs.b]
    values = [1, 2, 3, 4]
    [metrics.score]
    source = "regex"
    pattern = 'score (?P<value>\\d+)'
    [design]
    constraints = ["a + b <= 5"]
"""


def test_the_stored_specs_design_constraints_bound_the_recommendation(write_spec, store_path):
    runner = CliRunner()
    r = runner.invoke(app, ["run", str(write_spec(SPEC)), "--store", str(store_path), "-q"])
    assert r.exit_code == 0, r.output
    with open_store(store_path) as s:
        ds = s.dataset("bounded")
    assert ds.constraints == ["a + b <= 5"] and len(ds.frame) == 10
    base = ["recommend", "-e", "bounded", "-s", str(store_path), "-t", "score", "--maximize", "--family", "linear"]
    r = runner.invoke(app, base)
    assert r.exit_code == 0, r.output
    assert "recommended: a=1, b=4" in r.output  # the best the design allows: 14
    assert "design constraint 'a + b <= 5' kept" in r.output
    r = runner.invoke(app, [*base, "--any-combination"])
    assert r.exit_code == 0, r.output
    assert "recommended: a=4, b=4" in r.output  # outside what the design allows
    r = runner.invoke(app, ["decide", "-e", "bounded", "-s", str(store_path), "-t", "score", "--maximize",
                            "--family", "linear"])
    assert r.exit_code == 0, r.output
    assert "a=1, b=4" in r.output


def test_a_context_the_design_rules_out_is_one_line(write_spec, store_path):
    runner = CliRunner()
    assert runner.invoke(app, ["run", str(write_spec(SPEC)), "--store", str(store_path), "-q"]).exit_code == 0
    base = ["recommend", "-e", "bounded", "-s", str(store_path), "-t", "score", "--family", "linear"]
    r = runner.invoke(app, [*base, "-c", "a=4"])  # b=1 is the one configuration left
    assert r.exit_code == 0, r.output
    assert "recommended: b=1, a=4" in r.output and "design constraint 'a + b <= 5' kept" in r.output
    r = runner.invoke(app, [*base, "-c", "a=4.5"])  # a + b > 5 for every b measured
    assert r.exit_code == 2
    assert r.output.startswith("error:") and len(r.output.strip().splitlines()) == 1
    assert "no combination of the knobs' measured values is a configuration the design allows for a=4.5" in r.output


def test_a_rule_bounds_the_exhaustive_and_the_sampled_search():
    from perflearn.experiment.expr import Expression
    from perflearn.learn.space import SearchSpace

    df = pd.DataFrame([(x, y) for x in range(11) for y in range(11)], columns=["x", "y"])
    df["T"] = (df.x - 3) ** 2 + (df.y - 7) ** 2 + 1.0  # least at (3, 7), which x + y <= 6 rules out
    ds = Dataset.from_frame(df, metrics=["T"], name="bowl")
    models = {"T": fit(ds, "T", family="gp")}
    space = SearchSpace(search_space(ds, ["x", "y"]).values, rules=[Expression("x + y <= 6")])
    r = recommend(models, "T", "min", space)
    assert r.point == {"x": 1, "y": 5} and r.evaluated == 28  # the 28 grid points with x + y <= 6
    sampled = recommend(models, "T", "min", space, max_exhaustive=10, samples=12, seed=0)
    assert sampled.method == "sampling+local" and sampled.point == {"x": 1, "y": 5}
    assert all(v["x"] + v["y"] <= 6 for v in sampled.top.to_dict("records"))


def test_predict_says_when_a_point_leaves_what_the_model_was_trained_on(one_hot, tmp_path):
    ds, _ = one_hot
    csv = tmp_path / "onehot.csv"
    ds.frame[["a", "b", "c_1", "c_2", "c_3", "T"]].to_csv(csv, index=False)
    runner = CliRunner()
    r = runner.invoke(app, ["fit", "--csv", str(csv), "-t", "T", "--family", "linear", "-o", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    meta = (tmp_path / "m" / "model.json").read_text()
    assert '"one_hot"' in meta and '"c_3"' in meta

    def warnings(point: str) -> list[str]:
        r = runner.invoke(app, ["predict", str(tmp_path / "m"), "--set", point])
        assert r.exit_code == 0, r.output
        return [line for line in r.output.splitlines()  # of leaving the training data (not of the band's few runs)
                if line.startswith("warning:") and "the band rests on" not in line]

    assert warnings("a=1,b=0,c_1=0,c_2=0,c_3=1") == []
    both = warnings("a=1,b=0,c_1=0,c_2=1,c_3=1")
    assert len(both) == 1 and "exactly one of c_1, c_2, c_3" in both[0]
    far = warnings("a=4,b=0,c_1=1,c_2=0,c_3=0")
    assert len(far) == 1 and "a outside the trained range 0 to 1 (e.g. 4)" in far[0]


def test_a_model_saved_without_one_hot_groups_still_loads():
    from perflearn.learn.features import FeatureSchema

    schema = FeatureSchema.from_dict({"target": "T", "features": ["a"], "kinds": {"a": "numeric"}})
    assert schema.one_hot == [] and schema.outside(pd.DataFrame({"a": [3.0]})) == []


def test_a_large_search_starts_from_the_measured_settings_too():
    """The best setting lies off every one-knob path (an interaction): random points and
    coordinate descent miss it; the measured settings, searched too, hold it."""
    df = pd.DataFrame([(x, y) for x in range(11) for y in range(11)], columns=["x", "y"])
    df["T"] = np.where((df.x == 7) & (df.y == 7), 1.0, 10.0 + 0.01 * df.x)
    ds = Dataset.from_frame(df, metrics=["T"], name="needle")
    models = {"T": fit(ds, "T", family="cart")}
    knobs = {"max_exhaustive": 10, "samples": 5, "starts": 2, "seed": 0}
    blind = recommend(models, "T", "min", search_space(ds, ["x", "y"]).values, **knobs)  # values alone
    assert blind.method == "sampling+local" and blind.point != {"x": 7, "y": 7}
    r = recommend(models, "T", "min", search_space(ds, ["x", "y"]), **knobs)
    assert r.method == "sampling+local" and r.point == {"x": 7, "y": 7}


def test_a_context_that_sets_a_group_member_narrows_the_group(one_hot, tmp_path):
    ds, models = one_hot
    knobs = ["a", "b", "c_1", "c_2"]
    # c_3 = 1 by the context: c_1 and c_2 are 0, not searched freely (c_2 = 1 predicts lower)
    space = search_space(ds, knobs, {"c_3": 1})
    r = recommend(models, "T", "min", space, {"c_3": 1})
    assert (r.point["c_1"], r.point["c_2"]) == (0, 0) and r.evaluated == 4
    assert any("c_1, c_2 are 0: c_3=1" in note for note in r.notes)
    sampled = recommend(models, "T", "min", space, {"c_3": 1}, max_exhaustive=2, samples=3, seed=1)
    assert (sampled.point["c_1"], sampled.point["c_2"]) == (0, 0)
    # c_3 = 0: one of c_1, c_2 is 1
    r = recommend(models, "T", "min", search_space(ds, knobs, {"c_3": 0}), {"c_3": 0})
    assert (r.point["c_1"], r.point["c_2"]) == (0, 1) and r.evaluated == 8
    # two members at 1 is no configuration: one line, naming the context
    runner = CliRunner()
    csv = ds.frame[["a", "b", "c_1", "c_2", "c_3", "T"]]
    csv.to_csv(tmp_path / "onehot.csv", index=False)
    out = runner.invoke(app, ["recommend", "-t", "T", "--csv", str(tmp_path / "onehot.csv"), "--family", "linear",
                              "--context", "c_2=1,c_3=1"])
    assert out.exit_code == 2 and "exactly one of c_1, c_2, c_3 is 1" in out.output, out.output
    assert "Traceback" not in out.output
