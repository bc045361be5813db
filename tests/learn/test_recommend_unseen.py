"""recommend says when its point has settings no run had together, or lies outside what the
model was trained on (session 46's review: Apache's Handle=1 never came with InMemory=1 in
192 runs, yet that was the recommendation, without a word)."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli.app import app
from perflearn.learn.recommend import unseen_pairs

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def runs_without(a: int, b: int) -> pd.DataFrame:
    """Every combination of three binary knobs but those with x = a and y = b together."""
    rows = [{"x": x, "y": y, "z": z, "t": 10 + 5 * x + 3 * y + z} for x, y, z in itertools.product((0, 1), repeat=3)
            if not (x == a and y == b)]
    return pd.DataFrame(rows * 3)


def test_a_pair_no_run_had_is_said():
    runs = runs_without(1, 1)
    notes = unseen_pairs({"x": 1, "y": 1, "z": 0}, runs, ["x", "y", "z"])
    assert len(notes) == 1 and notes[0].startswith("x=1 with y=1: no run had both (6 had the first, 6 the second)")
    assert unseen_pairs({"x": 1, "y": 0, "z": 1}, runs, ["x", "y", "z"]) == []


def test_recommend_warns_of_its_unseen_pair_and_of_a_context_beyond_the_runs(tmp_path):
    path = tmp_path / "runs.csv"
    runs_without(1, 1).to_csv(path, index=False)
    out = CliRunner().invoke(app, ["recommend", "--csv", str(path), "-t", "t", "--maximize", "--family", "linear",
                                   "--any-combination"], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "recommended: x=1, y=1, z=1" in out.output and "x=1 with y=1: no run had both" in out.output
    beyond = CliRunner().invoke(app, ["recommend", "--csv", str(path), "-t", "t", "--maximize", "--family", "linear",
                                      "-c", "z=7"], terminal_width=200)
    assert beyond.exit_code == 0 and "z outside the trained range 0 to 1 (e.g. 7): extrapolated" in beyond.output


def test_every_command_that_learns_says_the_runs_it_left_out(tmp_path):
    """fit and evaluate said "10 run(s) left out"; recommend, rules and cluster said nothing."""
    frame = runs_without(1, 1).assign(status="ok")
    frame.loc[:3, "status"] = "failed"
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    for argv in (["rules", "-t", "t"], ["recommend", "-t", "t", "--maximize", "--family", "linear"],
                 ["cluster", "--metrics", "t"]):
        out = CliRunner().invoke(app, [argv[0], "--csv", str(path), *argv[1:]], terminal_width=200)
        assert out.exit_code == 0 and "4 run(s) left out" in out.output, (argv, out.output)


def test_the_runs_left_out_are_counted_by_cause(tmp_path):
    """"10 run(s) left out (failed, or NULL t or feature)" told neither what to rerun nor
    which column to fix; a model saved with the counts says them again when reused."""
    frame = runs_without(1, 1).assign(status="ok").astype({"t": float, "z": float})
    frame.loc[:3, "status"] = "failed"
    frame.loc[4:5, "t"] = None
    frame.loc[6, "z"] = None
    frame.loc[3, "z"] = None  # failed first: counted once, as failed
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    said = "7 run(s) left out: 4 failed, 2 with NULL t, 1 with NULL z"
    for argv in (["fit", "-t", "t", "--family", "linear", "-o", str(tmp_path / "m")], ["evaluate", "-t", "t", "-k", "3"],
                 ["rules", "-t", "t"]):
        out = CliRunner().invoke(app, [argv[0], "--csv", str(path), *argv[1:]], terminal_width=200)
        assert out.exit_code == 0 and said in " ".join(out.output.split()), (argv, out.output)
    out = CliRunner().invoke(app, ["recommend", "--model", str(tmp_path / "m"), "--csv", str(path), "-t", "t",
                                   "--maximize"], terminal_width=200)
    assert out.exit_code == 0 and said in " ".join(out.output.split()), out.output


def test_unseen_pairs_take_missing_values_as_not_had():
    """A nullable column's missing values are no setting a run had (the matrix form refused them)."""
    import pandas as pd

    from perflearn.learn.recommend import unseen_pairs

    runs = pd.DataFrame({"a": pd.array([1] * 6 + [0] * 6 + [pd.NA] * 2, dtype="Int64"),
                         "b": pd.array([0] * 6 + [1] * 6 + [1] * 2, dtype="Int64")})
    notes = unseen_pairs({"a": 1, "b": 1}, runs, ["a", "b"])
    assert notes == ["a=1 with b=1: no run had both (6 had the first, 8 the second); the system may not allow it, "
                     "and the prediction is a guess from runs unlike it"]
