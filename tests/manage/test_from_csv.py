"""`perflearn manage --from-csv`: a run's --csv recorded in the store afterwards, as the
run would have recorded it (a comparison killed outright kept its intervals only there)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.manage.journal import COLUMNS
from perflearn.store import open_store

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

RUN = ["--step-seconds", "2", "--cores", "2", "--levels", "4"]  # the steps trace: 22 intervals of 1 s


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """A comparison recorded by the run itself (--store) and written as it went (--csv)."""
    where = tmp_path_factory.mktemp("sim")
    result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static", "-p", "ondemand", "-p", "hipster", *RUN,
                                      "--csv", str(where / "sim.csv"), "--store", str(where / "s.duckdb"),
                                      "--name", "direct"])
    assert result.exit_code == 0, result.output
    # a live run's file has no seed column, and its 0 % step offers none (the simulator's offers 5 %); the rows are
    # the same (the 0 % step's intervals are counted as they had requests)
    journal = pd.read_csv(where / "sim.csv").drop(columns="seed")
    journal["offered_rps"] = journal["offered_rps"].where(journal["offered_rps"] > journal["offered_rps"].min(), 0.0)
    assert list(journal.columns) == COLUMNS
    return where, journal


def from_csv(csv, store, *more):
    # the trace's options; the file has its own configurations (--cores, --levels are said to be ignored)
    return CliRunner().invoke(app, ["manage", "--from-csv", str(csv), "--store", str(store), *RUN[:2], *more])


def test_a_whole_run_is_recorded_as_the_run_recorded_it(simulated, tmp_path):
    where, journal = simulated
    journal.to_csv(tmp_path / "live.csv", index=False)
    result = from_csv(tmp_path / "live.csv", where / "s.duckdb", "--name", "replayed")
    assert result.exit_code == 0, result.output
    assert "4 passes recorded, each of the 22 intervals of the trace" in result.output
    with open_store(where / "s.duckdb", read_only=True) as store:
        direct, replayed = store.dataset("direct").frame, store.dataset("replayed").frame
        samples = {n: store.samples(n).drop(columns="run_id") for n in ("direct", "replayed")}
    key = ["policy", "status", "qos_guarantee", "qos_tardiness", "energy_j", "energy_reduction", "changes", "intervals"]
    assert sorted(replayed["policy"]) == ["hipster", "hipster (learning)", "ondemand", "static"]
    pd.testing.assert_frame_equal(direct[key].sort_values("policy").reset_index(drop=True),
                                  replayed[key].sort_values("policy").reset_index(drop=True))
    assert (replayed["status"] == "ok").all()
    with open_store(where / "s.duckdb", read_only=True) as store:  # a simulated pass's time: its simulated seconds
        walls = {n: store.runs(n).set_index("run_id")["wall_s"].sort_values().tolist() for n in ("direct", "replayed")}
    assert walls["direct"] == walls["replayed"] and min(walls["direct"]) == 22.0, walls
    assert len(samples["replayed"]) == len(samples["direct"]) > 0
    assert samples["replayed"]["value"].isna().sum() == samples["direct"]["value"].isna().sum()


def test_the_store_keeps_each_intervals_note_and_change(simulated, tmp_path):
    """The run's notes were a sorted set of distinct notes cut at 2000 characters, mid-word,
    and the samples had no `changed` (session 56's audit): each interval's note is there at
    its time, whole, and every interval's change."""
    _, journal = simulated
    hip = journal[journal["policy"] == "hipster"].reset_index(drop=True)
    long = hip.assign(note=[f"interval {i}: " + "x" * 300 for i in range(len(hip))])
    long.to_csv(tmp_path / "long.csv", index=False)
    result = from_csv(tmp_path / "long.csv", tmp_path / "n.duckdb", "--name", "n")
    assert result.exit_code == 0, result.output
    with open_store(tmp_path / "n.duckdb", read_only=True) as store:
        notes = store.runs("n")["notes"].iloc[0].splitlines()
        samples = store.samples("n")
    assert len(notes) == len(hip) and notes[3] == f"t={hip['t'][3]:g}: interval 3: " + "x" * 300
    changed = samples[samples["metric"] == "changed"].sort_values("t")["value"].to_numpy()
    assert changed.tolist() == hip["changed"].astype(float).tolist() and changed.sum() > 0


def test_a_pass_cut_short_is_a_failed_run_with_every_interval_it_ran(simulated, tmp_path):
    where, journal = simulated
    cut = journal.drop(journal.index[journal["policy"] == "ondemand"][-5:])  # killed five intervals early
    cut.to_csv(tmp_path / "cut.csv", index=False)
    result = from_csv(tmp_path / "cut.csv", tmp_path / "c.duckdb")
    assert result.exit_code == 0, result.output
    assert "cut short (failed runs): ondemand (17 of 22 intervals)" in result.output
    with open_store(tmp_path / "c.duckdb", read_only=True) as store:
        runs = store.dataset("manage-cut").frame.set_index("policy")
        samples = store.samples("manage-cut")
    assert runs.loc["ondemand", "status"] == "failed" and runs.loc["static", "status"] == "ok"
    assert runs.loc["ondemand", "intervals"] == 17
    with open_store(tmp_path / "c.duckdb", read_only=True) as store:  # why, in show --runs (it was empty)
        errors = store.runs("manage-cut").set_index("status")["error"]
    assert errors["failed"] == "cut short: 17 of the trace's 22 intervals"
    p95 = samples[samples["metric"] == "p95"]
    assert len(p95) == len(cut) and sorted(p95["value"].dropna()) == sorted(cut["p95"].dropna())
    # energy against static's over the same intervals, its first 17 (against its whole pass, session 52's audit
    # found a pass cut 5 of 110 intervals short reading 9.6 % saved where the whole pass saved 6.1 %)
    static = cut[cut["policy"] == "static"]["energy_j"].iloc[:17].sum()
    ondemand = cut[cut["policy"] == "ondemand"]["energy_j"].sum()
    assert runs.loc["ondemand", "energy_reduction"] == pytest.approx((1 - ondemand / static) * 100)
    whole = cut[cut["policy"] == "static"]["energy_j"].sum()
    assert runs.loc["ondemand", "energy_reduction"] != pytest.approx((1 - ondemand / whole) * 100)


def test_a_row_missing_inside_a_pass_is_refused(simulated, tmp_path):
    """One interval deleted mid-pass read as a pass cut short at its end (21 of 22), the next
    interval charged for two, its energy compared with static's first 21 (session 61's audit)."""
    _, journal = simulated
    hole = journal.drop(journal.index[journal["policy"] == "ondemand"][10])
    hole.to_csv(tmp_path / "hole.csv", index=False)
    result = from_csv(tmp_path / "hole.csv", tmp_path / "h.duckdb")
    assert result.exit_code == 2 and "ondemand has no interval at t = 11 s, before its last at 22 s" in result.output


def test_a_static_pass_cut_short_or_missing_prices_nothing_longer_and_says_so(simulated, tmp_path):
    """Static's first half priced every whole pass (-56 % saved for +22 %), unsaid; without static
    every reduction was empty, unsaid; every pass alike short was each recorded as failed."""
    where, journal = simulated
    half = journal.drop(journal.index[journal["policy"] == "static"][11:])
    half.to_csv(tmp_path / "half.csv", index=False)
    result = from_csv(tmp_path / "half.csv", tmp_path / "h.duckdb")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "static's pass was cut short (11 of 22 intervals): the passes longer than it (ondemand, hipster" in said \
        and "are recorded without an energy reduction" in said, result.output
    with open_store(tmp_path / "h.duckdb", read_only=True) as store:
        runs = store.dataset("manage-half").frame.set_index("policy")
    assert runs.loc[["ondemand", "hipster"], "energy_reduction"].isna().all(), runs["energy_reduction"]
    with open_store(tmp_path / "h.duckdb", read_only=True) as store:  # NULL with a reason, as every missing value
        reasons = store.measurements("manage-half").query("metric == 'energy_reduction' and value.isna()")
    assert len(reasons) == runs["energy_reduction"].isna().sum() >= 2 and reasons["missing_reason"].str.startswith("no static pass at least as long").all()
    # no pass longer than static's: nothing goes unpriced, and it said "the passes longer than it are recorded without"
    short = half.groupby("policy", sort=False).head(11)
    short.to_csv(tmp_path / "short.csv", index=False)
    result = from_csv(tmp_path / "short.csv", tmp_path / "s.duckdb")
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "no pass is longer, so each is priced against static's as far as it ran" in said \
        and "longer than it (" not in said, result.output
    journal[journal["policy"] != "static"].to_csv(tmp_path / "nostatic.csv", index=False)
    result = from_csv(tmp_path / "nostatic.csv", tmp_path / "n.duckdb")
    assert result.exit_code == 0 and "no static pass, the energy's reference" in result.output, result.output
    result = CliRunner().invoke(app, ["manage", "--from-csv", str(tmp_path / "nostatic.csv"), "--store",
                                      str(tmp_path / "w.duckdb"), "--step-seconds", "4"])  # the run's was 2
    # a warning, not a refusal: an interleaved run stopped in a turn has passes alike short too
    assert result.exit_code == 0 and "every pass has 22 intervals, the steps trace at --step-seconds 4 and " \
        "--interval 1 has 44: unless the run was stopped, give its own" in result.output, result.output
    empty = journal.astype({"target": object})
    empty.loc[3, "target"] = None
    empty.to_csv(tmp_path / "notarget.csv", index=False)
    result = from_csv(tmp_path / "notarget.csv", tmp_path / "t.duckdb")
    assert result.exit_code == 2 and "row 5, column target: empty" in result.output, result.output


def test_one_file_is_not_two_outputs(tmp_path):
    """--csv over --store wrote CSV text over the store: its experiments lost, exit 0."""
    same = tmp_path / "same.duckdb"
    for args, said in ((["--csv", str(same), "--store", str(same)], "--store and --csv name the same file"),
                       (["--csv", str(tmp_path / "f.png"), "--figure", str(tmp_path / "f.png")],
                        "--figure and --csv name the same file")):
        result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "ondemand", *RUN, *args])
        assert result.exit_code == 2 and said in result.output, result.output
    assert not same.exists()


def test_an_older_file_has_its_later_columns_missing_not_zero(simulated, tmp_path):
    where, journal = simulated
    journal.drop(columns=["throttled_ms", "host_probe_us", "service_interval"]).to_csv(tmp_path / "old.csv", index=False)
    result = from_csv(tmp_path / "old.csv", tmp_path / "o.duckdb")
    assert result.exit_code == 0, result.output
    with open_store(tmp_path / "o.duckdb", read_only=True) as store:
        samples = store.samples("manage-old")
    assert samples.loc[samples["metric"] == "throttled_ms", "value"].isna().all()
    assert samples.loc[samples["metric"] == "p95", "value"].notna().all()


def test_from_csv_bad_input(simulated, tmp_path):
    where, journal = simulated
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    bad_cell = journal.astype({"p95": object})
    bad_cell.loc[3, "p95"] = "fast"
    bad_cell.to_csv(tmp_path / "cell.csv", index=False)
    journal.to_csv(tmp_path / "ok.csv", index=False)
    for name, column, value in (("neg", "p95", -1.0), ("inf", "p95", float("inf")), ("zero", "target", 0.0)):
        odd = journal.copy()
        odd.loc[3, column] = value  # -1 counted as met, inf made the tardiness inf
        odd.to_csv(tmp_path / f"{name}.csv", index=False)
    # session 51's audit: an empty cores cell crashed the summary; 1e20 cores priced static at 1.8e20 J
    for name, column, value in (("nocores", "cores", None), ("manycores", "cores", 1e20), ("half", "cores", 2.5),
                                ("before", "t", -100.0), ("fast", "level", 5.0), ("busy", "utilisation", float("inf")),
                                ("react", "reactions", -3), ("negrps", "rps", -5.0), ("late", "p95", 1e30)):
        odd = journal.astype({column: object})
        odd.loc[3, column] = value
        odd.to_csv(tmp_path / f"{name}.csv", index=False)
    lines = (tmp_path / "ok.csv").read_text().splitlines(keepends=True)
    lines[4] = ",".join(lines[4].split(",")[:5]) + "\n"  # a row cut short inside the file (two files joined)
    (tmp_path / "short.csv").write_text("".join(lines))
    (tmp_path / "store.duckdb").write_bytes(b"DUCK\x00\x01\r\n\x00binary\nno csv\r\x00")
    pd.concat([journal, journal.iloc[[0]]]).to_csv(tmp_path / "twice.csv", index=False)
    journal.assign(utilisation=journal["utilisation"].mask(journal.index == 2)).to_csv(tmp_path / "idle.csv",
                                                                                      index=False)
    cases = [
        (["manage", "--from-csv", str(tmp_path / "nocores.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column cores: empty"),
        (["manage", "--from-csv", str(tmp_path / "short.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5 has 5 cells, the header"),
        (["manage", "--from-csv", str(tmp_path / "manycores.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column cores: not a whole number of cores, 1 to 4096 (1e+20)"),
        (["manage", "--from-csv", str(tmp_path / "half.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column cores: not a whole number of cores"),
        (["manage", "--from-csv", str(tmp_path / "before.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column t: not a time >= 0 (-100.0)"),
        (["manage", "--from-csv", str(tmp_path / "fast.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column level: not a level in (0, 1] (5.0)"),
        (["manage", "--from-csv", str(tmp_path / "busy.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column utilisation: not a utilisation in [0, 1] (inf)"),
        (["manage", "--from-csv", str(tmp_path / "store.duckdb"), "--store", str(tmp_path / "a.duckdb")],
         "store.duckdb: not a CSV file"),
        (["manage", "--from-csv", str(tmp_path / "neg.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column p95: not a latency of 0 to 3600 s (-1.0)"),
        (["manage", "--from-csv", str(tmp_path / "inf.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column p95: not a latency of 0 to 3600 s (inf)"),
        (["manage", "--from-csv", str(tmp_path / "react.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column reactions: not a whole number of changes >= 0 (-3.0)"),
        (["manage", "--from-csv", str(tmp_path / "negrps.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column rps: not a rate >= 0 (-5.0)"),
        (["manage", "--from-csv", str(tmp_path / "late.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column p95: not a latency of 0 to 3600 s (1e+30)"),
        (["manage", "--from-csv", str(tmp_path / "zero.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column target: not a target > 0 (0.0)"),
        (["manage", "--from-csv", str(tmp_path / "twice.csv"), "--store", str(tmp_path / "a.duckdb"), *RUN[:2]],
         f"row {len(journal) + 2}: static has the interval at t = 1 s twice"),  # was "23 intervals, more than 22"
        # an empty utilisation cell was priced at 0 J (session 56's audit)
        (["manage", "--from-csv", str(tmp_path / "idle.csv"), "--store", str(tmp_path / "a.duckdb"), *RUN[:2],
          "--power", "server"], "static has 1 interval(s) without utilisation: a power model cannot price them"),
        (["manage", "--from-csv", str(where / "sim.csv"), "--store", str(tmp_path / "a.duckdb")],
         "the --csv of a simulation; run it again with --store"),
        (["manage", "--from-csv", str(tmp_path / "x.csv"), "--store", str(tmp_path / "a.duckdb")],
         "not the --csv of perflearn manage (no column t, rps, p95"),
        (["manage", "--from-csv", str(tmp_path / "cell.csv"), "--store", str(tmp_path / "a.duckdb")],
         "row 5, column p95: not a number ('fast')"),
        (["manage", "--from-csv", str(tmp_path / "none.csv"), "--store", str(tmp_path / "a.duckdb")], "no such file"),
        (["manage", "--from-csv", str(tmp_path / "ok.csv")], "--from-csv records in a results store: give --store"),
        (["manage", "--from-csv", str(tmp_path / "ok.csv"), "--simulate", "--store", str(tmp_path / "a.duckdb")],
         "--from-csv records a run that is over: give it without --simulate and --service"),
        (["manage", "--from-csv", str(tmp_path / "ok.csv"), "--store", str(tmp_path / "a.duckdb"), "--power", "x"],
         "--power: expected one of"),
        (["manage", "--from-csv", str(tmp_path / "ok.csv"), "--store", str(where / "s.duckdb"), "--name", "direct",
          *RUN[:2]], "an experiment named 'direct' exists already"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(app, args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "a.duckdb").exists()  # bad input creates no store


def test_a_run_is_priced_by_the_power_model_it_is_recorded_under(simulated, tmp_path):
    """--power tx1 labelled the energy tx1 and kept the server model's joules."""
    where, journal = simulated
    journal.to_csv(tmp_path / "live.csv", index=False)
    assert from_csv(tmp_path / "live.csv", tmp_path / "p.duckdb", "--name", "server").exit_code == 0
    assert from_csv(tmp_path / "live.csv", tmp_path / "p.duckdb", "--name", "tx1", "--power", "tx1").exit_code == 0
    with open_store(tmp_path / "p.duckdb", read_only=True) as store:
        server = store.dataset("server").frame.set_index("policy")["energy_j"]
        tx1 = store.dataset("tx1").frame.set_index("policy")["energy_j"]
    assert server["static"] == pytest.approx(journal[journal["policy"] == "static"]["energy_j"].sum())
    assert (tx1 < 0.5 * server).all()  # the TX1's watts, not the server's


def test_the_files_energy_is_kept_unless_power_reprices_it(simulated, tmp_path):
    """The file's power_w and energy_j were replaced by the server model's, unsaid: a run RAPL
    measured was recorded with modelled joules (session 55's audit)."""
    where, journal = simulated
    measured = journal.assign(power_w=journal["power_w"] * 2, energy_j=journal["energy_j"] * 2)
    measured.to_csv(tmp_path / "rapl.csv", index=False)
    kept = from_csv(tmp_path / "rapl.csv", tmp_path / "k.duckdb")
    assert kept.exit_code == 0 and "repriced" not in kept.output, kept.output
    repriced = from_csv(tmp_path / "rapl.csv", tmp_path / "k.duckdb", "--name", "server", "--power", "server")
    assert repriced.exit_code == 0 and "energy repriced under the" in repriced.output, repriced.output
    with open_store(tmp_path / "k.duckdb", read_only=True) as store:
        kept_j = store.dataset("manage-rapl").frame.set_index("policy")["energy_j"]
        server_j = store.dataset("server").frame.set_index("policy")["energy_j"]
    static = measured[measured["policy"] == "static"]["energy_j"].sum()
    assert kept_j["static"] == pytest.approx(static) and server_j["static"] == pytest.approx(static / 2)


def test_a_row_without_a_policy_or_with_an_odd_flag_is_refused(simulated, tmp_path):
    """Rows with an empty policy were dropped by the grouping: the static pass vanished."""
    where, journal = simulated
    blank = journal.astype({"policy": object})
    blank.loc[blank["policy"] == "static", "policy"] = ""
    blank.to_csv(tmp_path / "blank.csv", index=False)
    result = from_csv(tmp_path / "blank.csv", tmp_path / "b.duckdb")
    assert result.exit_code == 2 and "row 2, column policy: empty" in result.output, result.output
    odd = journal.astype({"changed": object})
    odd.loc[4, "changed"] = "maybe"
    odd.to_csv(tmp_path / "odd.csv", index=False)
    result = from_csv(tmp_path / "odd.csv", tmp_path / "b.duckdb")
    assert result.exit_code == 2 and "row 6, column changed: not True or False ('maybe')" in result.output, result.output


def test_a_last_row_cut_short_is_left_out_and_said(simulated, tmp_path):
    """A file cut inside its last row (copied while written, a full disk) was refused whole,
    for the one interval in flight."""
    where, journal = simulated
    whole = tmp_path / "whole.csv"
    journal.to_csv(whole, index=False)
    text = whole.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    for keep in (3, len(last) - 4):  # cut in its first cell, and near its end (the policy's name cut)
        cut = tmp_path / f"cut{keep}.csv"
        cut.write_text(text[:len(text.rstrip("\n")) - len(last) + keep])
        result = from_csv(cut, tmp_path / f"c{keep}.duckdb")
        assert result.exit_code == 0, result.output
        assert f"its last line (row {len(journal) + 1}) has no line end" in result.output
        last_policy = journal["policy"].iloc[-1]
        assert f"{last_policy} (21 of 22 intervals)" in result.output  # that pass, one interval short
    # a whole file (its last line ended) is read whole, and nothing is said; so is one whose last row is
    # whole without a line end (edited by hand)
    result = from_csv(whole, tmp_path / "w.duckdb")
    assert result.exit_code == 0 and "no line end" not in result.output
    edited = tmp_path / "edited.csv"
    edited.write_text(text.rstrip("\n"))
    result = from_csv(edited, tmp_path / "e.duckdb")
    assert result.exit_code == 0 and "no line end" not in result.output and "each of the 22 intervals" in result.output


def test_a_gzipped_csv_is_read_as_the_csv_it_holds(simulated, tmp_path):
    """The rounds under bench/ are kept gzipped; --from-csv crashed on them (session 51's audit)."""
    import gzip

    where, journal = simulated
    plain, packed = tmp_path / "r.csv", tmp_path / "r.csv.gz"
    journal.to_csv(plain, index=False)
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path, store in ((plain, "p.duckdb"), (packed, "g.duckdb")):
        result = from_csv(path, tmp_path / store, "--name", "r")
        assert result.exit_code == 0, result.output
    with open_store(tmp_path / "p.duckdb", read_only=True) as a, open_store(tmp_path / "g.duckdb", read_only=True) as b:
        x, y = a.dataset("r").frame, b.dataset("r").frame
        assert len(x) == journal["policy"].nunique() and x.drop(columns="run_id").equals(y.drop(columns="run_id"))


@pytest.mark.parametrize("signame, status, why", [("SIGTERM", 143, "terminated"), ("SIGHUP", 129, "hung up")])
def test_a_terminated_simulation_says_what_it_kept(tmp_path, when_written, signame, status, why):
    """SIGTERM to a simulation exited 143 with no word (session 54's audit): it was made an
    interrupt in the live path only, after the models loaded. SIGHUP (an ssh session that
    dropped) killed it outright, unrecorded (session 56's audit)."""
    import signal
    import subprocess
    import sys

    sig = getattr(signal, signame)
    csv = tmp_path / "term.csv"
    proc = subprocess.Popen([sys.executable, "-m", "perflearn", "manage", "--simulate", "-p", "static", "-p", "ondemand",
                             *RUN, "--seeds", "20", "--csv", str(csv)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # even under nohup
    output = when_written(proc, csv, lambda text: "ondemand" in text, lambda p: p.send_signal(sig), 120)
    said = " ".join(output.split())
    assert proc.returncode == status and f"error: {why}" in said, output
    kept = int(re.search(rf"{why}: the intervals of the (\d+) pass\(es\) (?:that had ended|run) are in", said).group(1))
    journal = pd.read_csv(csv)
    assert kept >= 2 and len(journal.groupby(["policy", "seed"])) == kept


def test_a_terminal_that_hangs_up_ends_the_run_as_sighup(tmp_path):
    """An ssh session that drops closes the terminal: the kernel sends SIGHUP, and writes to
    the terminal fail (EIO). A write before the handler ran raised, and the run ended with
    status 1, its cleanup unsaid (session 56's review); it ends as SIGHUP does now (129)."""
    import os
    import pty
    import signal
    import sys
    import time

    csv = tmp_path / "hup.csv"
    try:
        pid, fd = pty.fork()
    except OSError as exc:  # a machine without pseudo-terminals
        pytest.skip(f"no pseudo-terminal: {exc}")
    if pid == 0:  # the child: perflearn on the terminal's slave side
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a test worker may ignore it, and nohup's stays ignored
        os.execvp(sys.executable, [sys.executable, "-m", "perflearn", "manage", "--simulate", "-p", "static", "-p",
                                   "ondemand", *RUN, "--seeds", "300", "--csv", str(csv)])
    os.set_blocking(fd, False)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (csv.exists() and "ondemand" in csv.read_text()):
        try:
            os.read(fd, 65536)  # keep the terminal drained, as a terminal is
        except OSError:
            pass
        time.sleep(0.05)
    os.close(fd)  # the terminal goes
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 129
    assert len(pd.read_csv(csv).groupby(["policy", "seed"])) >= 2


def interrupted_three_passes(tmp_path) -> str:
    """static, ondemand and heracles simulated into cut.csv and s.duckdb (experiment "cut"),
    which the test interrupts (Ctrl-C: exit 130); what the run said."""
    result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static", "-p", "ondemand", "-p", "heracles", *RUN,
                                      "--store", str(tmp_path / "s.duckdb"), "--name", "cut",
                                      "--csv", str(tmp_path / "cut.csv")])
    assert result.exit_code == 130, result.output
    return " ".join(result.output.split())


def test_an_interrupted_simulation_keeps_the_passes_that_ended(tmp_path, monkeypatch):
    """Ctrl-C after some passes had ended stored none of them, and said only "interrupted"
    (session 51's audit): each pass is recorded as it ends now. --csv was written at the
    end, so it had none (session 54): each pass goes there as it ends too."""
    import perflearn.manage.compare as compare_module

    real = compare_module.comparison

    def two_then_interrupt(*args, **kwargs):
        for i, item in enumerate(real(*args, **kwargs)):
            if i == 2:
                raise KeyboardInterrupt
            yield item

    monkeypatch.setattr(compare_module, "comparison", two_then_interrupt)
    said = interrupted_three_passes(tmp_path)
    assert "interrupted: the 2 pass(es) that had ended are recorded (static, ondemand)" in said
    assert f"the intervals of the 2 pass(es) that had ended are in {tmp_path / 'cut.csv'}" in said
    journal = pd.read_csv(tmp_path / "cut.csv")
    assert list(journal["policy"].unique()) == ["static", "ondemand"] and journal["seed"].nunique() == 1
    assert journal.groupby("policy").size().tolist() == [len(journal) // 2] * 2
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        runs = store.dataset("cut").frame
    assert sorted(runs["policy"]) == ["ondemand", "static"] and (runs["status"] == "ok").all()


def test_a_pass_an_interrupt_cuts_short_is_stored_as_stopped_not_ok(tmp_path, monkeypatch):
    """SIGTERM inside a simulated pass stored its intervals so far as an ok run (36 of 55
    intervals read 100 % met, priced against static's first 36) and said "the one running
    is not" (session 57's audit)."""
    from perflearn.manage.baselines import Heracles

    real, calls = Heracles.decide, []

    def decide_then_interrupt(self, obs):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real(self, obs)

    monkeypatch.setattr(Heracles, "decide", decide_then_interrupt)
    said = interrupted_three_passes(tmp_path)
    assert ("interrupted: the 2 pass(es) that had ended are recorded (static, ondemand); the one it cut short, as "
            "stopped: heracles (6 intervals)") in said
    assert f"the intervals of the 3 pass(es) run are in {tmp_path / 'cut.csv'}; the last was cut short" in said
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        runs = store.dataset("cut").frame.set_index("policy")
    assert (runs.loc[["static", "ondemand"], "status"] == "ok").all() and runs.loc["heracles", "status"] != "ok"
    assert pd.read_csv(tmp_path / "cut.csv").groupby("policy").size()["heracles"] == 6


def test_a_policy_that_fails_every_interval_is_said_beside_its_row(tmp_path, monkeypatch):
    """A model failing every interval ran the maximum throughout; its row read 100 % met
    and no energy saved, as if it were the policy's (session 51's audit)."""
    from perflearn.manage.baselines import Ondemand

    def broken(self, obs):
        raise ValueError("no model of this")

    monkeypatch.setattr(Ondemand, "decide", broken)
    result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static", "-p", "ondemand", *RUN])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "ondemand: its policy failed in 22 of 22 intervals, which ran the maximum configuration" in said, said
    assert "static: its policy failed" not in said


def test_options_of_a_run_are_said_to_be_ignored(simulated, tmp_path):
    """Session 52's audit: --figure, --csv, -p, --target-ms ... were taken and ignored without
    a word (no figure, every pass recorded though -p ondemand was asked for)."""
    where, journal = simulated
    journal.to_csv(tmp_path / "ok.csv", index=False)
    result = from_csv(tmp_path / "ok.csv", tmp_path / "o.duckdb", "-p", "ondemand", "--figure", str(tmp_path / "f.png"),
                      "--target-ms", "5")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "ignored with --from-csv, which records every pass its file holds" in said
    assert "--policy, --figure, --target-ms" in said and not (tmp_path / "f.png").exists()


def test_times_past_the_trace_or_out_of_order_and_options_it_ignores_are_said(simulated, tmp_path):
    """Session 57's audit: static's interval at t = 1e12 s was taken (its energy 2.8e13 J
    repriced, every other pass 100 % saved), a reversed file too; --cores, --levels,
    --react-ms, --protocol, --load-args and --host-quantile were ignored unsaid."""
    _, journal = simulated
    late = journal.copy()
    late.loc[late.index[late["policy"] == "static"][-1], "t"] = 1e12
    late.to_csv(tmp_path / "late.csv", index=False)
    result = from_csv(tmp_path / "late.csv", tmp_path / "l.duckdb", "--power", "server")
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "static has an interval at t = 1e+12 s, past the 22 s of the steps trace" in said
    journal.iloc[::-1].to_csv(tmp_path / "reversed.csv", index=False)
    result = from_csv(tmp_path / "reversed.csv", tmp_path / "r.duckdb")
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "row 3: hipster's interval at t = 21 s comes after a later one" in said, said
    journal.to_csv(tmp_path / "live.csv", index=False)
    result = from_csv(tmp_path / "live.csv", tmp_path / "o.duckdb", *RUN[2:], "--react-ms", "5", "--protocol", "redis",
                      "--load-args", "--threads 9", "--host-quantile", "0.5")
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and ("ignored with --from-csv, which records every pass its file holds, at the "
                                      "file's own configurations and target: --cores, --levels, --react-ms, "
                                      "--protocol, --load-args, --host-quantile") in said, said


def test_a_run_lets_go_of_the_store_between_its_passes(tmp_path, monkeypatch):
    """`manage --store` held the file for the whole run: `perflearn ls` and `show` were refused
    ("in use by another perflearn process") for its length, tens of minutes live (session 59's
    audit). It is let go between records, as a sweep lets go of it."""
    import subprocess
    import sys

    from perflearn.manage.baselines import Ondemand

    store = str(tmp_path / "s.duckdb")
    first = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static", *RUN, "--store", store, "--name", "one"])
    assert first.exit_code == 0, first.output
    listed = []
    decide = Ondemand.decide

    def decide_and_list(self, obs):
        if not listed:  # mid-run: another process reads the store
            listed.append(subprocess.run([sys.executable, "-m", "perflearn", "ls", "-s", store],
                                         capture_output=True, text=True, timeout=60))
        return decide(self, obs)

    monkeypatch.setattr(Ondemand, "decide", decide_and_list)
    result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static", "-p", "ondemand", *RUN,
                                      "--store", store, "--name", "two"])
    assert result.exit_code == 0, result.output
    assert listed[0].returncode == 0, listed[0].stderr
    assert "one" in listed[0].stdout and "two" in listed[0].stdout  # static's pass already recorded


def test_offered_loads_that_are_not_the_trace_named_are_said(simulated, tmp_path):
    """A ladder sweep (800, 1 600, ... 8 800 req/s) was recorded as a "steps trace": both are 11
    steps long (session 59's audit). The file's offered loads are checked against the trace's
    shape, at whatever --max-rps the run had."""
    _, journal = simulated
    steps = journal.copy()
    static = steps["policy"] == "static"
    steps.loc[static, "offered_rps"] = [800.0 * (k // 2 + 1) for k in range(int(static.sum()))]  # a ladder
    steps.to_csv(tmp_path / "ladder.csv", index=False)
    result = from_csv(tmp_path / "ladder.csv", tmp_path / "l.duckdb")
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "ladder.csv: static's offered loads are not the steps trace's at --step-seconds 2 " \
        "and --interval 1 (its interval at t = 1 s was offered 800 req/s)" in said, result.output
    journal.to_csv(tmp_path / "steps.csv", index=False)  # the steps trace's own loads: nothing said
    result = from_csv(tmp_path / "steps.csv", tmp_path / "s.duckdb")
    assert result.exit_code == 0 and "offered loads are not" not in result.output, result.output


def test_policies_given_as_one_comma_list(tmp_path):
    """-p static,ondemand was "unknown policy 'static,ondemand'", though the help reads a list."""
    result = CliRunner().invoke(app, ["manage", "--simulate", "-p", "static,ondemand", "--step-seconds", "1",
                                      "--csv", str(tmp_path / "two.csv")])
    assert result.exit_code == 0, result.output
    assert list(pd.read_csv(tmp_path / "two.csv")["policy"].unique()) == ["static", "ondemand"]
