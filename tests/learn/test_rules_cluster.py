import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.learn.cluster import cluster
from perflearn.learn.features import training_data
from perflearn.learn.rules import tree_rules
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

DATA = Path(__file__).resolve().parents[1] / "data" / "learn"


def test_rules_recover_known_split(step_ds):
    r = tree_rules(training_data(step_ds, "T", ["a"]), max_depth=1)
    assert len(r.rules) == 2
    left, right = r.rules
    assert left.conditions[0].startswith("a <= ") and right.conditions[0].startswith("a > ")
    assert 4.7 < float(left.conditions[0].split("<= ")[1]) < 5.3
    assert abs(left.value - 11.6) < 1.0 and abs(right.value - 21.6) < 1.0
    assert "if a <= " in r.text()


def test_rules_of_a_target_in_a_small_unit_are_its_rules_in_a_larger_one(step_ds):
    """A tree fitted on seconds per operation (1e-8) made no split: "in every run, T ≈ 1.5e-08"."""
    frame = step_ds.frame.copy()
    frame["T"] = frame["T"] * 1e-9
    small = Dataset.from_frame(frame.drop(columns=["run_id", "status"], errors="ignore"), metrics=["T"], name="s")
    big_rules = tree_rules(training_data(step_ds, "T"), max_depth=2)
    small_rules = tree_rules(training_data(small, "T"), max_depth=2)
    assert [r.conditions for r in small_rules.rules] == [r.conditions for r in big_rules.rules]
    assert len(small_rules.rules) == 4
    for s_rule, b_rule in zip(small_rules.rules, big_rules.rules):
        assert s_rule.value == pytest.approx(b_rule.value * 1e-9, rel=1e-9)
    assert small_rules.r2_or_accuracy == pytest.approx(big_rules.r2_or_accuracy, rel=1e-9)


def test_a_leaf_too_large_to_split_is_refused(step_ds):
    """Session 54's audit: --min-leaf 34 of 66 runs read "in every run (no split changes it)",
    as if no knob mattered."""
    data = training_data(step_ds, "T")
    n = len(data.y)
    with pytest.raises(UsageError, match=f"no split of {n} runs leaves {n // 2 + 1} on each side: at most {n // 2}"):
        tree_rules(data, min_samples_leaf=n // 2 + 1)
    assert len(tree_rules(data, max_depth=1, min_samples_leaf=n // 2).rules) <= 2


def test_cluster_of_an_experiment_with_no_ok_run_says_so():
    """Session 54's audit: it said "every metric is NULL in every run", read as an unsupported counter."""
    frame = pd.DataFrame({"n": [1, 2, 3, 4], "wall": [None] * 4, "status": ["failed"] * 3 + ["timeout"]})
    ds = Dataset.from_frame(frame, metrics=["wall"], name="allfail")
    with pytest.raises(UsageError, match=r"no ok run \(4 run\(s\), none ok: 3 failed, 1 timeout\)"):
        cluster(ds)


def test_rules_name_categories_and_classes():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.uniform(0, 10, 200), "b": rng.choice(["x", "y"], 200)})
    df["T"] = np.where(df.a > 5, 20, 10) + np.where(df.b == "y", 5, 0)
    data = training_data(Dataset.from_frame(df, metrics=["T"]), "T")
    r = tree_rules(data, max_depth=2)
    text = r.text()
    assert "b == y" in text and "b == x" in text
    assert r.r2_or_accuracy > 0.99
    c = tree_rules(data, max_depth=2, classes=[12, 22])
    labels = {rule.label for rule in c.rules}
    assert labels == {"<=12", "(12,22]", ">22"}
    assert all(rule.probability == 1.0 for rule in c.rules)


def test_class_rules_merge_a_split_that_does_not_change_the_class():
    """Under a == 1 the tree splits on b (b == 1 is purer), but both sides are ">20": one rule."""
    rows = [(0, b, 10.0) for b in (0, 1) for _ in range(20)]
    rows += [(1, 0, 30.0 if i % 10 < 7 else 15.0) for i in range(20)] + [(1, 1, 30.0)] * 20
    data = training_data(Dataset.from_frame(pd.DataFrame(rows, columns=["a", "b", "T"]), metrics=["T"]), "T")
    c = tree_rules(data, max_depth=2, classes=[20])
    assert c.tree.get_depth() == 2  # the tree did split under a == 1
    assert [(r.conditions, r.label, r.samples) for r in c.rules] == [(["a == 0"], "<=20", 40), (["a == 1"], ">20", 40)]
    assert c.rules[1].probability == pytest.approx(34 / 40)
    assert abs(c.r2_or_accuracy - 74 / 80) < 1e-9  # the same decisions: merging changes how they read


def test_rules_state_each_feature_once_along_a_path():
    """A path that tests a feature twice reads as one interval, one value or one set, as Kunkel's rules do."""
    x = np.repeat([1.0, 2.0, 3.0, 4.0], 30)
    knob = np.tile(["p", "q", "r", "s", "t", "u"], 20)
    df = pd.DataFrame({"x": x, "k": knob})
    # three levels of x (the middle two alike) and k's p, q apart from the rest: every leaf is pure
    df["T"] = np.select([x == 1, x == 4], [10.0, 40.0], 25.0) + np.where(df.k.isin(["p", "q"]), 0.0, 3.0)
    r = tree_rules(training_data(Dataset.from_frame(df, metrics=["T"]), "T"), max_depth=4)
    assert r.r2_or_accuracy == pytest.approx(1.0)
    texts = [" and ".join(rule.conditions) for rule in r.rules]
    for conditions in (rule.conditions for rule in r.rules):
        tested = [re.search(r"[A-Za-z_]\w*", c).group(0) for c in conditions]  # "2 <= x <= 3", "1.5 < f": the name
        assert len(tested) == len(set(tested)), conditions  # each feature once
    # x is measured at integers: it is tested at integers, not at the tree's midpoints 1.5 and 3.5
    assert any(c == "2 <= x <= 3" for t in texts for c in t.split(" and ")), texts
    # an interval that holds one measured value is that value, not the tree's midpoint
    assert any("x == 1 " in t + " " for t in texts) and any("x == 4 " in t + " " for t in texts), texts
    assert any("k not in (" in t or "k == " in t for t in texts), texts
    # every run is covered by exactly one rule, whose value is the run's
    covered = 0
    for rule in r.rules:
        keep = np.ones(len(df), bool)
        for c in rule.conditions:
            if " <= x <= " in c:
                lo, hi = float(c.split(" <= ")[0]), float(c.split(" <= ")[2])
                keep &= (df.x >= lo) & (df.x <= hi)
            elif c.startswith("x >= "):
                keep &= df.x >= float(c.split(">= ")[1])
            elif c.startswith("x <= "):
                keep &= df.x <= float(c.split("<= ")[1])
            elif c.startswith("x > "):
                keep &= df.x > float(c.split("> ")[1])
            elif c.startswith("x == "):
                keep &= df.x == float(c.split("== ")[1])
            elif c.startswith("k == "):
                keep &= df.k == c.split("== ")[1]
            elif c.startswith("k != "):
                keep &= df.k != c.split("!= ")[1]
            elif c.startswith("k not in ("):
                keep &= ~df.k.isin(c.split("(")[1].rstrip(")").split(", "))
            else:
                raise AssertionError(c)
        covered += keep.sum()
        assert np.allclose(df["T"][keep], rule.value), (rule.conditions, df["T"][keep].unique())
    assert covered == len(df)


def test_rules_png(step_ds, tmp_path):
    r = tree_rules(training_data(step_ds, "T"), max_depth=2)
    path = r.plot(tmp_path / "tree.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rules_bad_depth(step_ds):
    with pytest.raises(UsageError, match="depth must be at least 1"):
        tree_rules(training_data(step_ds, "T"), max_depth=0)


def _groups():
    raw = pd.read_csv(DATA / "groups.csv")
    return raw, Dataset.from_frame(raw.drop(columns=["group"]), metrics=["gbps", "l3hit", "ipc"], name="groups")


@pytest.mark.parametrize("pca", [None, 2])
def test_cluster_recovers_separated_groups(pca, tmp_path):
    raw, ds = _groups()
    r = cluster(ds, pca=pca)
    assert r.k == 4 and r.elbow_found
    # same partition as the truth (labels may be permuted)
    truth = raw.sort_values("flow_core")["group"].to_numpy()
    found = r.profiles.sort_values("flow_core")["cluster"].to_numpy()
    assert pd.crosstab(truth, found).gt(0).sum(axis=1).eq(1).all()
    reps = r.representatives
    assert len(reps) == 4 and sorted(reps["size"]) == [12, 12, 12, 12]
    rep_groups = raw.set_index("flow_core").loc[reps["flow_core"], "group"]
    assert sorted(rep_groups) == [0, 1, 2, 3]
    assert r.plot(tmp_path / "c.png").stat().st_size > 1000


def test_cluster_figure_axes_share_all_the_variance_and_kmax_can_find_an_elbow():
    """With --pca the figure's PC shares were of the reduced data (PC1 100 % for --pca 1); k = 1..3
    can never show kneedle an elbow (always k = 1, unsaid); fewer profiles than --kmax capped it unsaid."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    raw, ds = _groups()
    full = PCA().fit(StandardScaler().fit_transform(raw[["gbps", "l3hit", "ipc"]])).explained_variance_ratio_
    for pca in (None, 1, 2):
        r = cluster(ds, pca=pca)
        assert r.explained == pytest.approx(list(full[: 1 if pca == 1 else 2]), abs=1e-9), (pca, r.explained)
    with pytest.raises(UsageError, match=r"an elbow is found among k = 1..4 at least, got 3; or give --k"):
        cluster(ds, kmax=3)
    assert cluster(ds, k=2, kmax=3).k == 2  # k given: no elbow sought
    assert cluster(ds).kmax_capped is None
    few = Dataset.from_frame(raw.drop(columns=["group"]).head(6), metrics=["gbps", "l3hit", "ipc"], name="few")
    assert cluster(few, kmax=10, by="run").kmax_capped == 5


def test_cluster_given_k_and_bad_input():
    _, ds = _groups()
    assert cluster(ds, k=2).k == 2
    with pytest.raises(UsageError, match="unknown column 'nope'"):
        cluster(ds, ["nope"])
    with pytest.raises(UsageError, match="PCA components must be in 1..3"):
        cluster(ds, pca=5)


def test_cluster_keeps_a_knob_called_size_and_skips_a_metric_null_everywhere():
    """A knob named `size` was overwritten by the cluster sizes; the default profile (every
    metric) refused an experiment with one counter this machine lacks (NULL in every run)."""
    raw, _ = _groups()
    raw = raw.assign(size=np.where(raw["group"] % 2 == 0, 100, 1000), instructions=np.nan)
    ds = Dataset.from_frame(raw.drop(columns=["group"]), metrics=["gbps", "l3hit", "ipc", "instructions"],
                            name="groups")
    r = cluster(ds)
    assert r.null_metrics == ["instructions"] and r.columns == ["gbps", "l3hit", "ipc"] and r.k == 4
    reps = r.representatives
    assert sorted(reps["k-means size"]) == [12, 12, 12, 12] and set(reps["size"]) <= {100, 1000}
    with pytest.raises(UsageError, match="NULL in every run"):
        cluster(ds, ["instructions"])


def test_a_points_profile_is_of_the_runs_that_measured_every_column():
    """Session 51's audit: with one repetition NULL in one column, a point's profile mixed
    means over different runs (gbps over both, ipc over the other only)."""
    raw, _ = _groups()
    again = raw.assign(gbps=raw["gbps"] * 10)  # a second repetition of every point, far off in gbps
    again.loc[again.index[0], "ipc"] = np.nan  # ... and without ipc at the first point
    both = pd.concat([raw, again], ignore_index=True)
    ds = Dataset.from_frame(both.drop(columns=["group"]), metrics=["gbps", "l3hit", "ipc"], name="groups")
    r = cluster(ds)
    first = r.profiles.set_index("flow_core").loc[raw.loc[0, "flow_core"]]
    assert first["gbps"] == pytest.approx(raw.loc[0, "gbps"])  # its complete run only (5.5x that before)
    assert first["ipc"] == pytest.approx(raw.loc[0, "ipc"])
    assert r.incomplete_runs == 1 and r.dropped == 0 and len(r.profiles) == len(raw)
    other = r.profiles.set_index("flow_core").loc[raw.loc[1, "flow_core"]]
    assert other["gbps"] == pytest.approx(raw.loc[1, "gbps"] * 5.5)  # both runs, as before


def test_rules_test_integer_settings_at_integers():
    """`t > 1.5` for threads measured at 1, 2, 4, 8 reads `t >= 2`; a threshold that is an
    integer (rps 1500) stays; a feature measured at fractions keeps the tree's midpoint."""
    rows = [(t, rps, f) for t in (1, 2, 4, 8) for rps in (1000, 2000) for f in (0.25, 0.75)]
    df = pd.DataFrame(rows * 3, columns=["t", "rps", "f"])
    df["T"] = np.where(df.t >= 2, 50.0, 10.0) + np.where(df.rps > 1500, 5.0, 0.0) + np.where(df.f > 0.5, 1.0, 0.0)
    r = tree_rules(training_data(Dataset.from_frame(df, metrics=["T"]), "T"), max_depth=4)
    conditions = {c for rule in r.rules for c in rule.conditions}
    assert {"t >= 2", "t == 1"} <= conditions and not any("1.5" in c for c in conditions), conditions
    assert {"rps == 1000", "rps == 2000"} <= conditions, conditions  # one measured value each side: that value
    assert {"f == 0.25", "f == 0.75"} <= conditions, conditions
    # integer threshold with several values on a side: kept as the tree has it
    df2 = pd.DataFrame({"rps": np.repeat([1000, 2000, 3000, 4000], 5)})
    df2["T"] = np.where(df2.rps > 2000, 9.0, 1.0)
    r2 = tree_rules(training_data(Dataset.from_frame(df2, metrics=["T"]), "T"), max_depth=1)
    assert [rule.conditions for rule in r2.rules] == [["rps <= 2500"], ["rps > 2500"]], [x.conditions for x in r2.rules]
    # a large integer threshold in full, not 3.482e+04
    df3 = pd.DataFrame({"bs": np.repeat([4096, 65536, 1048576, 4194304], 5)})
    df3["T"] = np.where(df3.bs > 4096, 9.0, 1.0)
    r3 = tree_rules(training_data(Dataset.from_frame(df3, metrics=["T"]), "T"), max_depth=1)
    assert [rule.conditions for rule in r3.rules] == [["bs == 4096"], ["bs > 34816"]], [x.conditions for x in r3.rules]


def test_a_tree_without_a_split_reads_as_one_rule_for_every_run():
    """It printed "if always then tput is <=8000"."""
    # two of twelve runs above 8000, on both sides of any split: every leaf says <=8000, merged into one rule
    df = pd.DataFrame({"x": np.arange(12) % 4, "T": [100.0] * 5 + [9000.0] + [100.0] * 5 + [9100.0]})
    r = tree_rules(training_data(Dataset.from_frame(df, metrics=["T"]), "T"), max_depth=1, classes=[8000])
    assert r.text() == "in every run (no split changes it), T is <=8000 (p=0.83, n=12)", r.text()


def test_a_rule_threshold_keeps_the_digits_that_put_each_run_on_its_side():
    """2400.5 to 4 digits read "freq <= 2400" (no run is) and "2401 < freq <= 2401" (empty)."""
    rng = np.random.default_rng(0)
    freq = np.round(rng.uniform(2400, 2401, 60), 3)
    frame = pd.DataFrame({"freq": freq, "T": np.where(freq > 2400.5, 200.0, 100.0) + rng.normal(0, 1, 60)})
    r = tree_rules(training_data(Dataset.from_frame(frame, ["T"], name="f"), "T"), max_depth=1)
    low, high = r.rules
    threshold = float(low.conditions[0].split("<= ")[1])
    assert high.conditions[0] == f"freq > {low.conditions[0].split('<= ')[1]}"
    assert (freq <= threshold).sum() == low.samples and (freq > threshold).sum() == high.samples


def test_the_drawn_tree_of_a_tiny_target_shows_its_values(tmp_path, monkeypatch):
    """With 3 decimals, a target of 1e-9 s drew "value = 0.0" in every box."""
    import sklearn.tree

    frame = pd.DataFrame({"a": np.tile(np.arange(8), 10)})
    frame["T"] = (1 + frame["a"]) * 1e-9
    r = tree_rules(training_data(Dataset.from_frame(frame, ["T"], name="tiny"), "T"), max_depth=2)
    drawn = []
    real = sklearn.tree.plot_tree

    def plot_tree(*args, **kwargs):  # what the boxes say
        drawn.extend(a.get_text() for a in real(*args, **kwargs))
        return []

    monkeypatch.setattr(sklearn.tree, "plot_tree", plot_tree)
    assert r.plot(tmp_path / "t.png").stat().st_size > 0
    values = [line.split("= ")[1] for text in drawn for line in text.splitlines() if line.startswith("value")]
    assert len(values) == 7 and "0.0" not in values and "7.5e-09" in values, values


def test_cluster_k_beyond_the_distinct_profiles_is_one_line():
    """Repeated runs measure one profile twice: --k 3 over 2 distinct ones was an internal error."""
    frame = pd.DataFrame([{"k1": i, "m1": 10.0 * (i % 2), "m2": 1.0 + 4 * (i % 2)} for i in range(12)])
    ds = Dataset.from_frame(frame, ["m1", "m2"], name="dup")
    with pytest.raises(UsageError, match="k must be at most 2: the 12 profiles hold only 2 distinct ones, got 3"):
        cluster(ds, k=3)
    # no elbow among k = 1..2 (session 57: k went on past the distinct profiles, to a curve of empty clusters)
    with pytest.raises(UsageError, match="the 12 profiles hold only 2 distinct ones: too few to find an elbow"):
        cluster(ds)
    assert cluster(ds, k=2).k == 2
    four = Dataset.from_frame(pd.DataFrame({"k1": [1, 2, 3, 4], "m": [1.0, 10, 100, 1000]}), ["m"], name="four")
    with pytest.raises(UsageError, match=r"4 profiles are too few to find an elbow \(k = 1..4 at least needs 5\); "
                                         "give --k"):  # it read "k = 1 (no elbow found)"
        cluster(four)
    assert cluster(four, k=2).k == 2


def test_cluster_tries_k_up_to_the_distinct_profiles_only(tmp_path):
    """Session 57's audit: 19 profiles, 6 distinct (pairs of close ones in three groups), each
    repeated. k went up to --kmax 10, past the 6 distinct profiles, where k-means left clusters
    empty and inertia rose above k = 1's; kneedle read that curve and chose k = 2, not 3."""
    from typer.testing import CliRunner

    from perflearn.cli import app

    profiles = [((15.29, -9.18), 4), ((15.14, -9.54), 4), ((-19.74, 8.47), 3), ((-19.56, 8.84), 2),
                ((6.75, 5.82), 4), ((6.59, 6.29), 2)]
    rows = [dict(a=a, b=b) for (a, b), times in profiles for _ in range(times)]
    csv = tmp_path / "c.csv"
    pd.DataFrame([dict(cfg=i, **row) for i, row in enumerate(rows)]).to_csv(csv, index=False)
    r = CliRunner().invoke(app, ["cluster", "--csv", str(csv), "-m", "a,b"])
    assert r.exit_code == 0, r.output
    assert "k = 3 (elbow (kneedle)); inertia by k: 1:" in r.output and ", 6:" in r.output and ", 7:" not in r.output
    assert "k tried up to 6, not 10: the 19 profiles hold only 6 distinct ones" in r.output
    ds = Dataset.from_frame(pd.read_csv(csv), ["a", "b"], name="c")
    inertia = cluster(ds).inertias
    assert len(inertia) == 6 and max(inertia) == inertia[0]  # no k past the distinct profiles, none above k = 1's


def test_rules_say_when_min_leaf_is_what_stops_the_tree(tmp_path):
    """Session 57's audit: --min-leaf 28 on 60 runs read "in every run (no split changes it)",
    though threads changed iops 8x: no split leaves 28 runs on each side (12 per threads value,
    20 per pattern)."""
    from typer.testing import CliRunner

    from perflearn.cli import app

    rows = [dict(threads=t, pattern=p, iops=(100.0 if t <= 4 else 800.0) + 0.1 * i)
            for t in (1, 2, 4, 8, 16) for p in ("read", "write", "rw") for i in range(4)]
    csv = tmp_path / "s.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    r = CliRunner().invoke(app, ["rules", "--csv", str(csv), "-t", "iops", "--min-leaf", "28"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == ("in every run (no split that changes it leaves --min-leaf 28 runs on each "
                                         "side), iops ≈ 380.1 (n=60)"), r.output
    # a feature with one value stops the tree whatever --min-leaf: said as before
    data = training_data(Dataset.from_frame(pd.DataFrame(rows).assign(c=7), ["iops"], name="s"), "iops", ["c"])
    assert tree_rules(data, min_samples_leaf=28).text() == "in every run (no split changes it), iops ≈ 380.1 (n=60)"


def test_a_knob_tested_out_of_all_its_values_but_one_reads_as_that_value():
    """Session 57's audit: `pattern not in (read, write)` where the only value left is rw."""
    rows = [dict(threads=t, pattern=p, iops=(100.0 if p == "read" else 200.0 if p == "write" else 300.0) * t + i)
            for t in (1, 8) for p in ("read", "write", "rw") for i in range(4)]
    data = training_data(Dataset.from_frame(pd.DataFrame(rows), ["iops"], name="p"), "iops")
    text = tree_rules(data, max_depth=3).text()
    assert "not in" not in text and "pattern == rw" in text, text
    assert "pattern == read" in text and "pattern == write" in text, text


def separated_groups(seed: int, count: int, spread: float = 0.3) -> pd.DataFrame:
    """``count`` groups in 3-D (centres uniform in [0, 10]^3, 5-24 profiles each, Gaussian
    ``spread``), as bench/learn_cluster_k.py draws them; with each profile's group."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, (count, 3))
    sizes = rng.integers(5, 25, count)
    profiles = np.vstack([c + rng.normal(0, spread, (s, 3)) for c, s in zip(centres, sizes)])
    return pd.DataFrame({"knob": range(len(profiles)), "a": profiles[:, 0], "b": profiles[:, 1],
                         "c": profiles[:, 2], "group": np.repeat(range(count), sizes)})


def test_the_silhouette_finds_groups_the_elbow_stops_short_of():
    """Kneedle on inertia read 4 groups for 5 well-separated ones (in 21 of 22 such sets,
    bench/learn.md): the silhouette finds all 5, and the elbow's run says so."""
    from sklearn.metrics import adjusted_rand_score

    frame = separated_groups(3, 5)
    ds = Dataset.from_frame(frame.drop(columns="group"), ["a", "b", "c"], name="five")
    by_elbow = cluster(ds)
    assert by_elbow.k == 4 and by_elbow.k_by == "elbow"  # the elbow's reading, kept as NESCAT's default
    assert max(by_elbow.silhouettes, key=by_elbow.silhouettes.get) == 5
    assert by_elbow.silhouette_note().startswith("the silhouette favours k = 5 (")
    by_silhouette = cluster(ds, k_by="silhouette")
    assert by_silhouette.k == 5 and by_silhouette.silhouette_note() is None
    assert adjusted_rand_score(frame["group"], by_silhouette.labels) == 1.0  # the groups themselves
    given = cluster(ds, k=3)
    assert given.k == 3 and given.k_by == "given" and given.silhouette_note() is None  # nothing to contradict
    assert cluster(ds, kmax=2, k_by="silhouette").k == 2  # no elbow sought: 2 k's are enough to choose from


def test_one_group_draws_no_silhouette_note():
    """A single Gaussian blob has no groups: kneedle still reads an elbow, the silhouette's
    best stays under 0.5, and no other k is offered."""
    rng = np.random.default_rng(0)
    blob = rng.normal(0, 1, (40, 3))
    ds = Dataset.from_frame(pd.DataFrame({"knob": range(40), "a": blob[:, 0], "b": blob[:, 1], "c": blob[:, 2]}),
                            ["a", "b", "c"], name="blob")
    r = cluster(ds)
    assert max(r.silhouettes.values()) < 0.5 and r.silhouette_note() is None
    with pytest.raises(UsageError, match="k is chosen by elbow or silhouette, got 'gap'"):
        cluster(ds, k_by="gap")
    same = Dataset.from_frame(pd.DataFrame({"knob": range(6), "a": [1.0] * 6, "b": [2.0] * 6}), ["a", "b"], name="same")
    one = cluster(same, k_by="silhouette")
    assert one.k == 1 and one.silhouettes == {}  # one distinct profile: one cluster, no silhouette


def test_cluster_cli_chooses_k_by_silhouette_and_refuses_one_file_for_two_outputs(tmp_path):
    from typer.testing import CliRunner

    from perflearn.cli import app

    csv = tmp_path / "five.csv"
    separated_groups(3, 5).drop(columns="group").to_csv(csv, index=False)
    cli = CliRunner()
    r = cli.invoke(app, ["cluster", "--csv", str(csv), "-m", "a,b,c"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "k = 4 (elbow (kneedle))" in said and "mean silhouette by k: 2:" in said
    assert "the silhouette favours k = 5" in said and "--k-by silhouette (or --k 5) takes it" in said
    r = cli.invoke(app, ["cluster", "--csv", str(csv), "-m", "a,b,c", "--k-by", "silhouette",
                         "--png", str(tmp_path / "k.png")])
    assert r.exit_code == 0 and "k = 5 (highest silhouette)" in r.output and "favours" not in r.output, r.output
    same = tmp_path / "same.csv"
    pd.DataFrame({"knob": range(6), "a": [1.0] * 6, "b": [2.0] * 6}).to_csv(same, index=False)
    r = cli.invoke(app, ["cluster", "--csv", str(same), "-m", "a,b", "--k-by", "silhouette"])
    assert r.exit_code == 0 and "k = 1 (no silhouette to compare)" in r.output, r.output
    assert (tmp_path / "k.png").read_bytes()[:4] == b"\x89PNG"
    # the profiles were written over the figure (session 57's helper)
    r = cli.invoke(app, ["cluster", "--csv", str(csv), "-m", "a,b,c", "--png", str(tmp_path / "x.png"),
                         "-o", str(tmp_path / "x.png")])
    assert r.exit_code == 2 and "--out and --png name the same file" in r.output, r.output
    assert not (tmp_path / "x.png").exists()
