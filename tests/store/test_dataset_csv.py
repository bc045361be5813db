"""How a CSV's columns are read, and what the reader is told."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perflearn.errors import UsageError
from perflearn.store import Dataset

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_a_column_of_numbers_with_a_stray_word_is_said(tmp_path):
    """One '?' among 400 numbers made the column 400 categories and the fit 3 times worse,
    without a word (session 46's review); a knob with a few settings and an 'auto' is no typo."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(0, 5, 40).astype(object), "threads": ([1, 2, 4, "auto"] * 10),
                          "t": rng.uniform(1, 2, 40)})
    frame.loc[3, "x"] = "?"
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    ds = Dataset.from_csv(path, metrics=["t"])
    assert ds.kinds["x"] == "categorical"
    assert ds.notes == ["column 'x' is read as categories: 39 of its 40 values are numbers, but '?' (data row 4) "
                        "is not; fix the cell if it is a typo"]


def test_an_unseen_category_names_a_few_known_ones(tmp_path):
    from perflearn.learn import fit

    frame = pd.DataFrame({"c": [f"v{i:03d}" for i in range(40)], "t": np.arange(40.0) + 1})
    model = fit(Dataset.from_frame(frame, ["t"]), "t", family="linear")
    with pytest.raises(UsageError) as caught:
        model.predict(pd.DataFrame({"c": ["new"]}))
    assert "not seen in training (known: v000, v001" in str(caught.value) and "(40 in all)" in str(caught.value)
    assert len(str(caught.value)) < 300


def test_import_knobs_split_at_commas(tmp_path):
    """`import -k a,b` looked for one column named 'a,b', where -f and -m split."""
    from typer.testing import CliRunner

    from perflearn.cli.app import app

    path = tmp_path / "runs.csv"
    pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9], "t": [1.0, 2.0, 3.0]}).to_csv(path, index=False)
    out = CliRunner().invoke(app, ["import", str(path), "-m", "t", "-k", "a,b", "--store", str(tmp_path / "s.duckdb")])
    assert out.exit_code == 0 and "knobs a, b;" in out.output, out.output


def test_a_column_without_a_name_is_refused_but_a_trailing_delimiter_is_dropped(tmp_path):
    """pandas' to_csv writes its row index as a column without a name: it became a knob
    'Unnamed: 0', every run its own configuration; a trailing comma on every line, the
    header's too, was blamed as "feature 'Unnamed: 5' is NULL in every run" (session 51's audit)."""
    frame = pd.DataFrame({"threads": [1, 2, 4, 8] * 3, "t": np.arange(12.0) + 1})
    frame.to_csv(tmp_path / "indexed.csv")
    with pytest.raises(UsageError, match="column 1 has no name in the header: pandas' to_csv writes its row index"):
        Dataset.from_csv(tmp_path / "indexed.csv", metrics=["t"])
    (tmp_path / "middle.csv").write_text("threads,,t\n1,5,2\n2,6,3\n")
    with pytest.raises(UsageError, match="column 2 has no name in the header; name it"):
        Dataset.from_csv(tmp_path / "middle.csv", metrics=["t"])
    (tmp_path / "last.csv").write_text("threads,t,\n1,2,9\n2,3,\n")
    with pytest.raises(UsageError, match="column 3 has no name"):
        Dataset.from_csv(tmp_path / "last.csv", metrics=["t"])
    lines = frame.to_csv(index=False).splitlines()
    (tmp_path / "trailing.csv").write_text("".join(line + ",\n" for line in lines))
    ds = Dataset.from_csv(tmp_path / "trailing.csv", metrics=["t"])
    assert ds.knobs == ["threads"] and ds.frame["t"].tolist() == frame["t"].tolist()


def test_true_and_false_are_two_categories_set_and_shown_as_written(tmp_path):
    """A True/False column was numbers 0 and 1: --set flag=True was refused and recommend said
    flag=1, a value the data never had (session 51's audit)."""
    from typer.testing import CliRunner

    from perflearn.cli import app

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"threads": rng.choice([1, 2, 4], 40), "flag": rng.choice([True, False], 40)})
    frame["t"] = 10 / frame["threads"] + 3 * frame["flag"] + rng.normal(0, 0.01, 40)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    assert Dataset.from_csv(tmp_path / "runs.csv", metrics=["t"]).kinds["flag"] == "categorical"
    cli = CliRunner()
    result = cli.invoke(app, ["fit", "--csv", str(tmp_path / "runs.csv"), "-t", "t", "--family", "rf",
                              "-o", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    result = cli.invoke(app, ["predict", str(tmp_path / "m"), "--set", "threads=4,flag=True"])
    assert result.exit_code == 0 and "True" in result.output, result.output
    result = cli.invoke(app, ["recommend", "--csv", str(tmp_path / "runs.csv"), "-t", "t", "--family", "rf"])
    assert result.exit_code == 0 and "recommended: threads=4, flag=False" in result.output, result.output
