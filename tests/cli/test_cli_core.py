"""The core commands through the real CLI: output, exit codes, one-line errors."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

SPEC = """
    [experiment]
    name = "cli-demo"
    [workload]
    command = "echo value {x}"
    [knobs.x]
    values = [1, 2]
    [metrics.v]
    source = "regex"
    pattern = 'value (\\d+)'
    unit = "things"
    [design]
    repeat = 2
"""


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def assert_one_line_error(result, code, *fragments):
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def test_validate_run_ls_show_export(cli, write_spec, store_path, tmp_path):
    spec = write_spec(SPEC)
    result = cli("validate", spec, "--plan")
    assert result.exit_code == 0 and "2 points x 2 repeats = 4 runs" in result.output
    result = cli("run", spec, "--store", store_path)
    assert result.exit_code == 0, result.output
    assert "4 ok; 4/4 runs stored" in result.output
    result = cli("ls", "--store", store_path)
    assert "cli-demo" in result.output and " 4 " in result.output
    result = cli("show", "cli-demo", "--store", store_path, "--full")
    assert result.exit_code == 0 and "v [things] mean" in result.output
    result = cli("show", "cli-demo", "--store", store_path, "--runs")
    assert result.output.count(" ok ") == 4
    out = tmp_path / "out.csv"
    result = cli("export", "cli-demo", "--store", store_path, "-o", out)
    assert result.exit_code == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["run_id", "point_id", "rep", "status", "x", "v"]
    assert (frame["v"] == frame["x"]).all()


def test_import_csv_then_show(cli, store_path, tmp_path):
    csv = tmp_path / "measured.csv"
    pd.DataFrame({"threads": [1, 2, 1], "perf": [10.0, 20.0, 12.0]}).to_csv(csv, index=False)
    result = cli("import", csv, "--metric", "perf", "--store", store_path, "--name", "elsewhere")
    assert result.exit_code == 0 and "imported 3 runs as 'elsewhere'" in result.output
    result = cli("show", "elsewhere", "--store", store_path, "--compact")
    assert "11 ± 12.71" in result.output  # mean and 95% CI of 10 and 12
    result = cli("show", "elsewhere", "--store", store_path)
    assert "12.71" in result.output and "1.414" in result.output  # full by default for one metric: std too


def test_bad_inputs_are_one_line(cli, write_spec, store_path, tmp_path):
    spec = write_spec(SPEC.replace("echo value {x}", "echo {y}"))
    assert_one_line_error(cli("run", spec, "--store", store_path), 2, "spec.toml:4", "unknown placeholder {y}")
    assert_one_line_error(cli("validate", tmp_path / "missing.toml"), 2, "no such spec file")
    assert_one_line_error(cli("show", "nope", "--store", store_path), 2, "no results store here")
    good = write_spec(SPEC, "good.toml")
    cli("run", good, "--store", store_path)
    assert_one_line_error(cli("show", "nope", "--store", store_path), 2, "no experiment named 'nope'", "cli-demo")
    assert_one_line_error(cli("show", "cli-demo", "--store", store_path, "-m", "zzz"), 2, "no metric 'zzz'")
    assert_one_line_error(cli("export", "cli-demo", "--store", store_path, "--format", "xls"), 2, "unknown format 'xls'")
    assert_one_line_error(cli("import", tmp_path / "none.csv", "--metric", "p", "--store", store_path), 2, "no such file")
    assert_one_line_error(cli("run", good, "--store", store_path), 1, "exists already", "--resume")


@pytest.mark.parametrize("args, fragments", [
    (["run"], ["perflearn run: Missing argument 'spec_path'", "see perflearn run --help"]),
    (["fit", "--cv", "abc", "-t", "T"], ["perflearn fit: Invalid value for '--cv'"]),
    (["nosuch"], ["No such command 'nosuch'"]),
    (["ls", "--bogus"], ["No such option: --bogus"]),
])
def test_usage_errors_of_the_framework_are_one_line(cli, args, fragments):
    """Click's own usage errors (missing argument, bad number, unknown option) were a
    four-line block with a capitalised 'Error:'."""
    assert_one_line_error(cli(*args), 2, *fragments)


def test_error_text_is_not_read_as_markup(cli, write_spec, store_path):
    """A message naming a section ('[sampling]') prints it, not swallows it as rich markup."""
    from perflearn.cli import terminal

    with terminal.err.capture() as captured:
        terminal.error("no interval samples (does its spec have [sampling]?)")
    assert "[sampling]" in captured.get()


def test_values_replace_a_knobs_values_for_one_run(cli, write_spec, store_path):
    spec = write_spec(SPEC)
    result = cli("validate", spec, "--values", "x=3,4,5")
    assert result.exit_code == 0 and "3 points x 2 repeats = 6 runs" in result.output
    result = cli("run", spec, "--store", store_path, "--values", "x=7")
    assert result.exit_code == 0 and "2 ok; 2/2 runs stored" in result.output, result.output
    out = store_path.parent / "x.csv"
    cli("export", "cli-demo", "--store", store_path, "-o", out)
    assert set(pd.read_csv(out)["v"]) == {7}  # the workload ran with the replaced value
    # the override is part of what the spec asks for: resuming with other values is a changed spec
    assert_one_line_error(cli("run", spec, "--store", store_path, "--resume", "--values", "x=8"), 1, "changed")
    # resumed without them, it said "the spec changed" of a file that had not (session 61's audit)
    assert_one_line_error(cli("run", spec, "--store", store_path, "--resume"), 1,
                          "its file, or the --values given, which a resume repeats")
    assert_one_line_error(cli("validate", spec, "--values", "y=1"), 2, "--values y", "no knob 'y'", "knobs: x")
    assert_one_line_error(cli("validate", spec, "--values", "x=1", "--values", "x=2"), 2, "--values x is given twice")
    assert_one_line_error(cli("validate", spec, "--values", "x"), 2, "expected NAME=V1,V2")


@pytest.mark.parametrize("rows, args, fragment", [
    ("a,b,lat\n1,x,inf\n2,y,5\n", ["-m", "lat"], "metric column 'lat' has an infinite value inf (data row 1)"),
    ("a,b,lat\n", ["-m", "lat"], "no data rows (only a header)"),
    ("a,b,lat\n1,x,3\n", ["-m", "lat", "-m", "lat"], "column 'lat' is given twice"),
    ("a,b,lat\n1,x,3\n", ["-m", "lat", "-k", "lat"], "column 'lat' is both a metric and a knob"),
    ("a,b,lat\n1,x,3\n", ["-m", "lat", "-c", "a", "-k", "a"], "column 'a' is both a context and a knob"),
    ("a,lat,status\n1,3,ok\n2,4,\n", ["-m", "lat"], "column 'status' has nan (data row 2); expected one of ok,"),
    ("a,lat,status\n1,3,OK\n", ["-m", "lat"], "column 'status' has 'OK' (data row 1)"),
    ("a,perf,lat\n1,3,\n2,4,\n", ["-m", "perf"], "column 'lat' is empty in every row: no knob or context"),
])
def test_import_refuses_what_it_would_store_wrongly(cli, store_path, tmp_path, rows, args, fragment):
    """Fuzzing (session 19): inf was stored as a measurement, a header-only file imported
    0 runs, a column given two roles crashed or modelled itself."""
    path = tmp_path / "d.csv"
    path.write_text(rows)
    assert_one_line_error(cli("import", path, *args, "--store", store_path), 2, fragment)


def test_export_checks_its_directories_first(cli, write_spec, store_path):
    cli("run", write_spec(SPEC), "--store", store_path)
    result = cli("export", "cli-demo", "--store", store_path, "-o", "/nonexistent-dir/x.csv")
    assert_one_line_error(result, 2, "--output: no such directory '/nonexistent-dir'")
    result = cli("export", "cli-demo", "--store", store_path, "--samples", "/nonexistent-dir/s.csv")
    assert_one_line_error(result, 2, "--samples: no such directory")  # before the runs' file is written
    result = cli("export", "cli-demo", "--store", store_path, "--samples", "same.csv", "-o", "same.csv")
    assert_one_line_error(result, 2, "the samples would overwrite the runs")
    result = cli("export", "cli-demo", "--store", store_path, "--samples", "-", "-o", "-")
    assert_one_line_error(result, 2, "--output and --samples are both standard output")


def test_export_to_standard_output_and_a_knob_of_numbers_and_text_to_parquet(cli, write_spec, store_path, tmp_path,
                                                                          monkeypatch):
    """-o - wrote a file named "-"; a categorical knob of 0 and "0-1" (one object column)
    was an internal error in Parquet (ArrowInvalid)."""
    spec = write_spec(SPEC.replace("values = [1, 2]", 'categorical = [0, "0-1"]').replace("{x}", "7"))
    assert cli("run", spec, "--store", store_path).exit_code == 0
    monkeypatch.chdir(tmp_path)
    result = cli("export", "cli-demo", "--store", store_path, "-o", "-")
    assert result.exit_code == 0 and result.stdout.splitlines()[0] == "run_id,point_id,rep,status,x,v"
    assert len(result.stdout.splitlines()) == 5 and not (tmp_path / "-").exists()
    result = cli("export", "cli-demo", "--store", store_path, "-f", "parquet", "-o", tmp_path / "m.parquet")
    assert result.exit_code == 0, result.output
    assert sorted(pd.read_parquet(tmp_path / "m.parquet")["x"].unique()) == ["0", "0-1"]


MIXED = """
    [experiment]
    name = "mixed"
    [workload]
    command = "if [ {a} = 2 ]; then exit 3; fi; echo val {a}; if [ {a} = 3 ]; then echo no-extra; else echo extra 7; fi"
    shell = true
    [knobs.a]
    values = [1, 2, 3]
    [metrics.v]
    source = "regex"
    pattern = 'val (\\d+)'
    [metrics.extra]
    source = "regex"
    pattern = 'extra (\\d+)'
"""


def test_show_runs_of_ok_and_failed_runs_gives_errors_and_missing_reasons(cli, write_spec, store_path):
    """An experiment with ok and failed runs crashed `show --runs` (the ok runs' error is NULL)."""
    result = cli("run", write_spec(MIXED), "--store", store_path, "-q")
    result = cli("show", "mixed", "--store", store_path, "--runs")
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()[:1].isdigit()}
    assert len(lines) == 3 and sum(" failed " in line for line in lines.values()) == 1
    missing = [line for line in lines.values() if "extra:" in line]
    assert len(missing) == 1 and " ok " in missing[0]  # a=3: its NULL metric, with the reason


def test_show_gives_a_metric_its_own_count_when_some_runs_miss_it(cli, store_path, tmp_path):
    """`show` gave runs per point only: a metric missing (NULL) in half the runs showed its
    mean over two as if over four."""
    csv = tmp_path / "measured.csv"
    pd.DataFrame({"threads": [1, 1, 1, 1, 2, 2], "perf": [10.0, None, 12.0, None, 20.0, 22.0],
                  "wall": [1.0, 1.1, 1.2, 1.3, 2.0, 2.1]}).to_csv(csv, index=False)
    assert cli("import", csv, "-m", "perf,wall", "--store", store_path, "--name", "half").exit_code == 0
    rows = [line.split() for line in cli("show", "half", "--store", store_path).output.splitlines()]
    header = next(r for r in rows if r[:1] == ["point"])
    assert header.count("n") == 1 and header.index("n") < header.index("wall")  # perf's, not wall's
    # "not ok" and "perf mean" are two words each in the header, one cell each in a row
    assert [r[header.index("n") - 2] for r in rows if r[:1] in (["1"], ["2"])] == ["2", "2"]
    compact = [line for line in cli("show", "half", "--store", store_path, "--compact").output.splitlines()
               if line.split()[:1] == ["1"]]
    assert "11 ± 12.71 (n=2)" in compact[0] and compact[0].count("(n=") == 1  # wall has all four


def test_a_duckdb_query_interrupted_is_an_interruption_not_a_bug():
    """Ctrl-C while DuckDB ran a query came back as DuckDB's exception ("internal error",
    exit 70, in 2 of 5 tries under load); the CLI tells it apart from a bug."""
    import threading

    import duckdb

    from perflearn.cli.app import _interrupted_query

    con = duckdb.connect()
    timer = threading.Timer(0.3, con.interrupt)
    timer.start()
    try:
        with pytest.raises(Exception) as caught:
            con.execute("SELECT count(*) FROM range(10000000000) a, range(1000) b").fetchall()
    finally:
        timer.cancel()
    assert _interrupted_query(caught.value), repr(caught.value)
    assert not _interrupted_query(RuntimeError("Query failed")) and not _interrupted_query(ValueError("x"))


def test_show_runs_says_why_a_metric_added_later_is_missing(cli, write_spec, store_path):
    """A metric a resumed, changed spec added read NULL with no reason in the runs before."""
    assert cli("run", write_spec(SPEC), "--store", store_path).exit_code == 0
    grown = SPEC.replace("values = [1, 2]", "values = [1, 2, 3]") + """
    [metrics.w]
    source = "regex"
    pattern = 'value (\\d+)'
"""
    result = cli("run", write_spec(grown), "--store", store_path, "--resume", "--allow-changed-spec")
    assert result.exit_code == 0, result.output
    result = cli("show", "cli-demo", "--store", store_path, "--runs")
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and text.count("w: not in the spec when the run was measured") == 4, result.output
