"""Window features and the detector, on data of known structure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perflearn.detect.features import STATS, window_features
from perflearn.detect.model import Detector, evaluate, fit, rates, training_set
from perflearn.errors import UsageError

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_window_statistics_are_exact():
    samples = pd.DataFrame({"run_id": 1, "metric": "x", "t": [0.1 * i for i in range(1, 9)],
                            "value": [1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 50.0]})
    features = window_features(samples, 0.1, 4)
    assert features["window"].tolist() == [0, 1]
    assert features["x:mean"].tolist() == [2.5, 20.0]
    assert features["x:max"].tolist() == [4.0, 50.0] and features["x:p50"].tolist() == [2.5, 10.0]
    assert set(features.columns) == {"run_id", "window", *(f"x:{s}" for s in STATS)}


def test_partial_window_is_dropped():
    samples = pd.DataFrame({"metric": "x", "t": [0.1, 0.2, 0.3, 0.4, 0.5], "value": 1.0})
    assert window_features(samples, 0.1, 4)["window"].tolist() == [0]


def synthetic(seed=0, runs_per_class=6, windows=4):
    """Three classes, each raising a different signal; two workloads, two inputs."""
    rng = np.random.default_rng(seed)
    rows, runs = [], []
    run_id = 0
    for label, signal in (("none", None), ("cpuoccupy", "cpu"), ("membw", "mem")):
        for r in range(runs_per_class):
            run_id += 1
            app, inp = ("a", "b")[r % 2], ("small", "large")[(r // 2) % 2]
            runs.append({"run_id": run_id, "point_id": run_id, "rep": 0, "status": "ok", "app": app, "input": inp,
                         "interference": label, "runtime": 1.0 + (0.5 if signal else 0.0) + rng.normal(0, 0.01)})
            for w in range(windows):
                row = {"run_id": run_id, "window": w}
                for metric in ("cpu", "mem", "noise"):
                    base = 5.0 if metric == signal else 1.0
                    for stat in ("mean", "max"):
                        row[f"{metric}:{stat}"] = base + rng.normal(0, 0.2)
                rows.append(row)
    return pd.DataFrame(rows), pd.DataFrame(runs)


def test_detector_separates_known_classes_and_reports():
    windows, runs = synthetic()
    data = training_set(windows, runs, "interference", ["app", "input"], "runtime")
    report = evaluate(data, trees=50, folds=3)
    assert report["kfold"]["macro_f1"] > 0.95
    assert report["leave_one_app_out"]["macro_f1"] > 0.95 and "leave_one_input_out" in report
    assert report["kfold (3 windows)"]["macro_f1"] > 0.95  # the verdict watch gives, over 3 windows
    assert set(report["leave_one_app_out"]["per_group"]) == {"a", "b"}
    assert report["kfold"]["false_alarm"] < 0.1 and report["kfold"]["miss"] < 0.1
    assert sum(map(sum, report["kfold"]["confusion"]["matrix"])) == len(windows)
    assert report["slowdown"]["mape"] < 10


def test_a_class_with_fewer_windows_than_folds_is_one_note_not_a_library_warning():
    import warnings

    windows, runs = synthetic(runs_per_class=3, windows=2)  # 6 windows a class
    gone = runs.loc[runs["interference"] == "membw", "run_id"].iloc[-1]  # membw: 4 windows, 5 folds
    data = training_set(windows[windows["run_id"] != gone], runs[runs["run_id"] != gone], "interference", ["app"], None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn's "least populated class" would raise here
        report = evaluate(data, trees=20, folds=5)
    assert report["kfold"]["note"].endswith("has 4 windows, fewer than the 5 folds: some folds test without it")
    assert "note" not in evaluate(training_set(*synthetic(), "interference", ["app"], None), trees=20, folds=3)["kfold"]
    tiny = training_set(*synthetic(runs_per_class=2, windows=2), "interference", ["app"], None)
    with pytest.raises(UsageError, match="too few windows to evaluate with 5 folds: at most 4 a class"):
        evaluate(tiny, trees=20, folds=5)


def test_fit_importance_save_load(tmp_path):
    windows, runs = synthetic()
    data = training_set(windows, runs, "interference", ["app"], "runtime")
    detector = fit(data, interval=0.2, window=4, trees=50)
    assert detector.info["oob_score"] > 0.9
    top = detector.importance(top=2)["feature"].tolist()
    assert all(f.split(":")[0] in ("cpu", "mem") for f in top)  # the informative signals, not noise
    detector.save(tmp_path / "det")
    loaded = Detector.load(tmp_path / "det")
    probe = windows[windows["run_id"] == runs.loc[runs["interference"] == "membw", "run_id"].iloc[0]]
    assert (loaded.predict(probe)["verdict"] == "membw").all()
    assert (loaded.predict(probe)["slowdown"] > 1.2).all()


def test_rates():
    assert rates(["none", "none", "cpu", "cpu"], ["cpu", "none", "none", "cpu"]) == {"false_alarm": 0.5, "miss": 0.5}


def test_bad_inputs():
    windows, runs = synthetic()
    with pytest.raises(UsageError, match="no knob 'kind'"):
        training_set(windows, runs, "kind", [], None)
    data = training_set(windows, runs[runs["interference"] == "none"], "interference", [], None)
    with pytest.raises(UsageError, match="at least two classes"):
        fit(data, 0.2, 4)
    with pytest.raises(UsageError, match="not a detector directory"):
        Detector.load("/nonexistent")


def test_rest_of_the_node_is_system_minus_workload():
    from perflearn.detect.features import with_rest

    rows = [("sys.cpu.user", 1.5), ("sys.cpu.nice", 0.0), ("sys.cpu.system", 0.5), ("proc.cpu.user", 0.8),
            ("proc.cpu.system", 0.2), ("sys.net.rx_bytes", 1000.0), ("proc.read_bytes", 50.0), ("proc.rchar", 350.0)]
    samples = pd.DataFrame([{"run_id": 1, "metric": m, "t": 0.2, "value": v} for m, v in rows])
    rest = with_rest(samples).set_index("metric")["value"]
    assert rest["rest.cpu"] == pytest.approx(1.0)  # 2 CPUs busy, 1 of them the workload
    assert rest["rest.net_rx"] == pytest.approx(700.0)  # its 300 socket bytes are its own
    assert "rest.write_bytes" not in rest  # a term was not sampled: no value, never a made-up 0


def test_derived_signals_are_attributed_and_normalised():
    from perflearn.detect.features import HEADER_BYTES, with_rest

    tick = {"sys.cpu.user": 1.2, "sys.cpu.nice": 0.0, "sys.cpu.system": 0.4, "sys.cpu.idle": 0.3, "sys.cpu.iowait": 0.1,
            "sys.cpu.irq": 0.0, "sys.cpu.softirq": 0.0, "sys.cpu.steal": 0.0, "proc.cpu.user": 0.9,
            "proc.cpu.system": 0.1, "sys.net.rx_bytes": 10_000.0, "sys.net.rx_packets": 10.0, "proc.rchar": 3000.0,
            "proc.read_bytes": 0.0, "proc.rss": 1e8}
    rows = [{"run_id": 1, "metric": m, "t": 0.2, "value": v} for m, v in tick.items()]
    rows += [{"run_id": 1, "metric": "sys.mem.available", "t": t, "value": v} for t, v in ((0.2, 5e9), (0.4, 4.9e9))]
    rows += [{"run_id": 1, "metric": "proc.rss", "t": 0.4, "value": 1e8}]
    derived = with_rest(pd.DataFrame(rows))
    at = derived[derived["t"] == 0.2].set_index("metric")["value"]
    assert at["rest.cpu"] == pytest.approx(0.6) and at["share.rest_cpu"] == pytest.approx(0.3)  # of 2 CPUs
    assert at["share.own_cpu"] == pytest.approx(0.5) and at["share.iowait"] == pytest.approx(0.05)
    assert at["rest.net_rx_payload"] == pytest.approx(10_000 - 10 * HEADER_BYTES - 3000)
    assert at["rest.mem_avail"] == pytest.approx(5.1e9)  # available + the workload's own resident memory
    later = derived[derived["t"] == 0.4].set_index("metric")["value"]
    assert later["rest.mem_growth"] == pytest.approx(0.1e9 / 0.2)  # the rest of the node took 100 MB in 0.2 s
    assert "rest.mem_growth" not in at  # no tick before the first: missing, not 0


def test_the_classifier_sees_the_node_not_the_workloads_own_activity():
    from perflearn.detect.features import node_columns, node_signal

    assert not node_signal("proc.read_bytes") and not node_signal("sys.disk.read_bytes")
    assert not node_signal("sys.psi.io.some") and not node_signal("sys.softirq.NET_RX")
    assert node_signal("rest.read_bytes") and node_signal("share.steal") and node_signal("proc.run_delay")
    assert node_signal("sys.vm.pgscan") and node_signal("sys.psi.memory.some") and node_signal("perf.cache-misses")
    assert node_columns(["run_id", "proc.rss:mean", "rest.cpu:max"]) == ["rest.cpu:max"]
    assert node_columns(["proc.rss:mean", "proc.minflt:max"]) == ["proc.rss:mean", "proc.minflt:max"]  # nothing else


def test_unseen_workload_own_io_does_not_decide_the_verdict():
    """Regression: held-out fio's own disk reads looked like the iobw injector, because the
    detector learned the workload's raw I/O signals; it now learns the rest of the node's."""
    windows, runs = synthetic()
    rng = np.random.default_rng(1)
    cpu_runs = runs.loc[runs["interference"] == "cpuoccupy", "run_id"]
    own = windows["run_id"].isin(cpu_runs).to_numpy()
    windows["proc.read_bytes:mean"] = np.where(own, 9.0, 1.0) + rng.normal(0, 0.1, len(windows))
    windows = windows.rename(columns={"cpu:mean": "rest.cpu:mean", "cpu:max": "rest.cpu:max"})
    detector = fit(training_set(windows, runs, "interference", [], None), interval=0.2, window=4, trees=50)
    top = detector.importance(top=20)["feature"].tolist()
    assert "proc.read_bytes:mean" not in top and any(f.startswith("rest.cpu:") for f in top)


def test_smoothed_verdict_uses_only_earlier_windows_of_the_same_run():
    from perflearn.detect.model import smooth_proba

    proba = pd.DataFrame({"a": [1.0, 0.0, 0.0, 1.0], "b": [0.0, 1.0, 1.0, 0.0]})
    run = pd.Series([7, 7, 7, 8])
    window = pd.Series([2, 0, 1, 0])  # rows out of time order
    smoothed = smooth_proba(proba, run, window, windows=2)
    assert smoothed["a"].tolist() == [0.5, 0.0, 0.0, 1.0]  # window 2 with window 1; window 0 alone; run 8 alone
    assert smooth_proba(proba, run, window, windows=1).equals(proba.astype(float))


def test_anonymous_memory_of_the_rest_of_the_node():
    """membw and cachecopy differ only in how much memory they hold (arrays beyond the
    last-level cache vs. at most its size): the node's anonymous memory minus the
    workload's, which page cache does not blur."""
    from perflearn.detect.features import node_signal, with_rest

    rows = [{"run_id": 1, "metric": m, "t": t, "value": v} for t, anon in ((0.2, 8e8), (0.4, 9e8))
            for m, v in (("sys.mem.anon", anon), ("proc.rss_anon", 1e8), ("sys.mem.total", 2e10))]
    derived = with_rest(pd.DataFrame(rows))
    at = derived[derived["t"] == 0.2].set_index("metric")["value"]
    assert at["rest.anon"] == pytest.approx(7e8) and at["share.rest_anon"] == pytest.approx(0.035)
    later = derived[derived["t"] == 0.4].set_index("metric")["value"]
    assert later["rate.rest_anon"] == pytest.approx(1e8 / 0.2)
    assert "rate.rest_anon" not in at
    # a kernel without RssAnon: no attributed value, never the node's total as if the workload held none
    without = with_rest(pd.DataFrame([r for r in rows if r["metric"] != "proc.rss_anon"]))
    assert not without["metric"].str.startswith(("rest.anon", "share.rest_anon")).any()
    assert node_signal("rest.anon") and not node_signal("sys.mem.anon") and not node_signal("proc.rss_anon")


def test_watch_refuses_a_pid_that_is_not_a_process():
    from perflearn.detect.watch import watch

    for pid in (0, -5, 2**22 + 1):  # above the kernel's largest PID
        with pytest.raises(UsageError, match=f"no process {pid}"):
            next(watch(None, pid=pid))


def test_a_damaged_detector_directory_is_one_line(tmp_path):
    """Review, session 21: a corrupt models.joblib was an internal error (ValueError), and a
    detector.json without "features" a KeyError, where watch should say one line."""
    import json

    from typer.testing import CliRunner

    from perflearn.cli import app

    windows, runs = synthetic()
    fit(training_set(windows, runs, "interference", [], None), interval=0.2, window=4, trees=10).save(tmp_path / "det")
    fit(training_set(windows, runs, "interference", [], None), interval=0.2, window=4, trees=11).save(tmp_path / "other")
    meta = json.loads((tmp_path / "det" / "detector.json").read_text())
    cases = {"garbage": lambda d: (d / "models.joblib").write_text("garbage\n"),
             # another fit's classifier, under this one's description (session 54: only the model's were checked)
             "swapped": lambda d: (d / "models.joblib").write_bytes((tmp_path / "other" / "models.joblib").read_bytes()),
             "truncated": lambda d: (d / "models.joblib").write_bytes((d / "models.joblib").read_bytes()[:500]),
             "no_features": lambda d: (d / "detector.json").write_text(json.dumps({k: v for k, v in meta.items()
                                                                                     if k != "features"})),
             "zero_interval": lambda d: (d / "detector.json").write_text(json.dumps({**meta, "interval": 0}))}
    for name, damage in cases.items():
        directory = tmp_path / name
        directory.mkdir()
        for f in ("models.joblib", "detector.json"):
            (directory / f).write_bytes((tmp_path / "det" / f).read_bytes())
        damage(directory)
        with pytest.raises(UsageError) as info:
            Detector.load(directory)
        assert str(info.value).startswith(f"{directory}: "), (name, info.value)
        result = CliRunner().invoke(app, ["detect", "watch", "--model", str(directory), "--pid", "1"])
        assert result.exit_code == 2 and "internal error" not in result.output, (name, result.output)
        assert ("models.joblib is not the file detector.json describes" if name in ("garbage", "truncated", "swapped")
                else "detector.json lacks") in " ".join(result.output.split()), (name, result.output)


def test_an_unknown_label_lists_the_knobs_not_the_metrics():
    """Review, session 21: the list was runs.columns[4:], the runtime metric among the "knobs"."""
    windows, runs = synthetic()
    with pytest.raises(UsageError, match=r"^no knob 'kind' in the experiment \(knobs: app, input, interference\)$"):
        training_set(windows, runs, "kind", [], None, knobs=["app", "input", "interference"])
    columns = r"\(app, input, interference, runtime\)$"
    with pytest.raises(UsageError, match=r"^no knob 'kind' among the runs' columns " + columns):
        training_set(windows, runs, "kind", [], None)  # a file: its columns hold knobs and metrics alike


def test_evaluate_reports_progress_and_refuses_one_class():
    windows, runs = synthetic()
    told: list[str] = []
    evaluate(training_set(windows, runs, "interference", ["app"], "runtime"), trees=10, folds=3, progress=told.append)
    assert [line.split(":")[0] for line in told] == ["evaluating (1/3)", "evaluating (2/3)", "evaluating (3/3)"]
    assert "leave one app out (2 folds)" in told[1] and "slowdown regressor" in told[2]
    healthy = training_set(windows, runs[runs["interference"] == "none"], "interference", [], None)
    with pytest.raises(UsageError, match="need at least two classes .* to evaluate a detector; every window is 'none'"):
        evaluate(healthy, trees=10, folds=3)


def test_slowdown_against_a_zero_healthy_runtime_is_missing_not_inf():
    windows, runs = synthetic()
    runs.loc[runs["interference"] == "none", "runtime"] = 0.0
    data = training_set(windows, runs, "interference", [], "runtime")
    assert data.slowdown.isna().all()  # was inf (and the regressor's fit failed on it)
