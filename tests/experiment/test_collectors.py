"""Collectors parse real captured output (tests/data/experiment); missing is never 0."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from perflearn.experiment.collectors import MetricSpec, Missing
from perflearn.experiment.collectors.derived import Derived
from perflearn.experiment.collectors.perf import find_event, parse_perf_csv
from perflearn.experiment.collectors.procfs import TICKS, ProcDelta, parse_net_dev, parse_per_cpu, parse_stat, parse_vmstat
from perflearn.experiment.collectors.rusage import Rusage
from perflearn.experiment.collectors.text import JsonPath, Regex, parse_json_document
from perflearn.experiment.launch import ProcessResult, RunContext, RunResult

DATA = Path(__file__).parent.parent / "data" / "experiment"


def result_with(stdout: str = "", stderr: str = "", rusage=None) -> RunResult:
    return RunResult("ok", 1.0, 0, None, rusage, {"workload": ProcessResult("workload", 0, None, stdout, stderr)})


def context(tmp_path) -> RunContext:
    return RunContext("e", 0, 1, 0, {"run_dir": str(tmp_path)}, tmp_path)


def metric(name, source, **options) -> MetricSpec:
    m = MetricSpec(name, source, options=options)
    collectors = {"json": JsonPath, "regex": Regex, "derived": Derived, "proc": ProcDelta, "rusage": Rusage}
    collectors[source].validate(m)
    return m


def test_perf_csv_supported_and_unsupported_events():
    rows = parse_perf_csv((DATA / "perf_stat.csv").read_text())
    assert rows["task-clock"][0] == pytest.approx(3.46) and rows["task-clock"][1] == "msec"
    assert rows["page-faults"][0] == 339
    assert rows["context-switches"][0] == 1
    assert rows["instructions"] == (None, "", "not supported")  # missing, never 0
    assert find_event({"cycles:u": (5.0, "", None)}, "cycles") == (5.0, "", None)


def test_fio_json_paths(tmp_path):
    text = (DATA / "fio_randread.json").read_text()
    metrics = [
        metric("iops", "json", path="jobs[0].read.iops"),
        metric("p99", "json", path='jobs[0].read.clat_ns.percentile."99.000000"', scale=1e-3),
        metric("nope", "json", path="jobs[0].write.nothing"),
        metric("name", "json", path="jobs[0].jobname"),
    ]
    values = JsonPath(metrics).values(context(tmp_path), result_with("fio: a warning line\n" + text))
    assert values["iops"] == pytest.approx(74081.918082)
    assert values["p99"] > 0
    assert isinstance(values["nope"], Missing) and "not found" in values["nope"].reason
    assert isinstance(values["name"], Missing) and "not a number" in values["name"].reason


def test_iperf3_json(tmp_path):
    text = (DATA / "iperf3_client.json").read_text()
    values = JsonPath([metric("bps", "json", path="end.sum_received.bits_per_second")]).values(
        context(tmp_path), result_with(text))
    assert values["bps"] > 1e8


def test_json_from_file_and_no_document(tmp_path):
    (tmp_path / "out.json").write_text('{"a": {"b": 7}}')
    values = JsonPath([metric("b", "json", path="a.b", file="{run_dir}/out.json")]).values(context(tmp_path), result_with())
    assert values["b"] == 7.0
    values = JsonPath([metric("b", "json", path="a.b")]).values(context(tmp_path), result_with("no json here"))
    assert isinstance(values["b"], Missing)
    with pytest.raises(ValueError):
        parse_json_document("[unclosed")


def test_regex_reducers_and_no_match(tmp_path):
    out = "lat 1.5\nlat 2.5\nlat 5\n"
    ms = [metric(f"m_{r}", "regex", pattern=r"lat ([\d.]+)", match=r) for r in ("first", "last", "sum", "mean", "count")]
    ms.append(metric("none", "regex", pattern=r"nothing (\d+)"))
    ms.append(metric("named", "regex", pattern=r"lat (?P<value>[\d.]+)", scale=1000))
    values = Regex(ms).values(context(tmp_path), result_with(out))
    assert (values["m_first"], values["m_last"], values["m_sum"], values["m_count"]) == (1.5, 5.0, 9.0, 3.0)
    assert values["m_mean"] == pytest.approx(3.0)
    assert values["named"] == 1500.0
    assert isinstance(values["none"], Missing) and "did not match workload stdout" in values["none"].reason
    assert "/nothing (\\d+)/" in values["none"].reason  # as written: repr doubled its backslashes


def test_regex_on_stderr_and_non_numeric(tmp_path):
    ms = [metric("e", "regex", pattern=r"took (\S+)", stream="stderr")]
    values = Regex(ms).values(context(tmp_path), result_with(stderr="took fast"))
    assert isinstance(values["e"], Missing) and "not a number" in values["e"].reason


def test_proc_interrupts_and_softirqs():
    irq = parse_per_cpu((DATA / "proc_interrupts.txt").read_text(), None)
    assert irq["26"] == 14 and irq["ttyS0"] == 14  # by number and by device name
    assert irq["ACPI:Ged"] == 2  # a name shared by two IRQs is summed
    cpu1 = parse_per_cpu((DATA / "proc_interrupts.txt").read_text(), 1)
    assert cpu1["26"] == 14
    soft = parse_per_cpu((DATA / "proc_softirqs.txt").read_text(), None)
    assert soft["NET_RX"] > 0 and "TIMER" in soft
    assert "ERR" in irq and "ERR" not in cpu1  # one count, not per CPU: none for CPU 1 (it read 0)


def test_proc_match_counts_each_interrupt_once():
    """A numbered IRQ is keyed by its number and by its device: ``match`` summed both, so
    `36|virtio1` or `.` counted it twice (session 46's review: 642 against stat's 438)."""
    from perflearn.experiment.collectors.procfs import pick

    irq = parse_per_cpu((DATA / "proc_interrupts.txt").read_text(), None)
    by = lambda pattern: pick(irq, MetricSpec("m", "proc", options={"file": "interrupts", "match": pattern}))  # noqa: E731
    assert by("^26$|ttyS0") == irq["26"] == 14
    assert by("ACPI:Ged") == 2  # a name two IRQs share: both, once each
    assert by(".") == sum(v for _, _, v in irq.rows) < sum(irq.values())


def test_proc_cpu_must_be_one_of_the_machines():
    """cpu = 5 on a 2-CPU machine stored 0 for every run; cpu = -1 read the last CPU."""
    import os

    with pytest.raises(ValueError, match="cpu: a CPU number"):
        ProcDelta.validate(MetricSpec("m", "proc", options={"file": "softirqs", "key": "NET_RX", "cpu": -1}))
    beyond = os.cpu_count() + 8
    collector = ProcDelta([MetricSpec("m", "proc", options={"file": "interrupts", "key": "LOC", "cpu": beyond})])
    with pytest.raises(ValueError, match=f"cpu {beyond}: /proc/interrupts counts CPUs 0-"):
        collector.check()


def test_proc_stat_vmstat_netdev():
    stat = parse_stat((DATA / "proc_stat.txt").read_text())
    first = (DATA / "proc_stat.txt").read_text().split()
    assert stat["cpu.user"] == pytest.approx(int(first[1]) / TICKS)
    assert stat["ctxt"] > 0 and "cpu1.idle" in stat
    vm = parse_vmstat((DATA / "proc_vmstat.txt").read_text())
    assert vm["pgfault"] > 0
    net = parse_net_dev((DATA / "proc_net_dev.txt").read_text())
    assert net["lo.rx_bytes"] >= 0 and "lo.tx_packets" in net


def test_proc_delta_counts_over_the_run(tmp_path):
    collector = ProcDelta([metric("ctxt", "proc", file="stat", key="ctxt"),
                           metric("lo", "proc", file="net/dev", match=r"^lo\.rx_bytes$")])
    collector.check()
    run = context(tmp_path)
    collector.before(run)
    import subprocess
    for _ in range(5):
        subprocess.run(["true"])
    collector.after(run)
    values = collector.values(run, result_with())
    assert values["ctxt"] > 0 and values["lo"] >= 0


def test_proc_key_that_does_not_exist_fails_before_the_sweep():
    with pytest.raises(ValueError, match="no 'nothing-here'"):
        ProcDelta([metric("x", "proc", file="vmstat", key="nothing-here")]).check()


def test_rusage_fields(tmp_path):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    values = Rusage([metric("u", "rusage", field="user"), metric("rss", "rusage", field="maxrss")]).values(
        context(tmp_path), result_with(rusage=usage))
    assert values["u"] == usage.ru_utime and values["rss"] == usage.ru_maxrss > 0
    assert isinstance(Rusage([metric("u", "rusage", field="user")]).values(context(tmp_path), result_with())["u"], Missing)


def test_derived_propagates_missing_and_division_by_zero():
    m = metric("ratio", "derived", expr="a / b")
    assert Derived.evaluate(m, {"a": 6.0, "b": 3.0}) == 2.0
    assert "b is missing" in Derived.evaluate(m, {"a": 6.0, "b": Missing("no PMU")}).reason
    assert "division by zero" in Derived.evaluate(m, {"a": 6.0, "b": 0.0}).reason


def test_maxrss_below_the_runners_own_peak_is_missing_not_the_runners(write_spec):
    """A workload forked from the runner starts from the runner's peak resident set, and
    Linux keeps it across exec: /bin/true read 177 MB (session 46's review). Below that peak
    the workload's own is unknown (NULL, why); above it, it is the workload's."""
    from perflearn.experiment.spec import load_spec
    from perflearn.runner.runner import run_experiment
    from perflearn.store import open_store

    spec = load_spec(write_spec("""
        [workload]
        command = ["python3", "-c", "import sys; b = b'x' * ({size} << 20) if {size} else b''"]
        [knobs.size]
        values = [0, 1500]
        [metrics.rss]
        source = "rusage"
        field = "maxrss"
    """))
    store = open_store(":memory:")
    run_experiment(spec, store)
    rss = store.dataset(spec.name).frame.set_index("size")["rss"]
    reasons = store.measurements(spec.name)["missing_reason"].dropna().tolist()
    assert rss.isna()[0] and len(reasons) == 1 and "the runner's own peak" in reasons[0]
    assert rss[1500] >= 1500 * 1024  # KiB: the workload's 1.5 GB, measured


def test_process_output_is_read_when_a_collector_first_asks(tmp_path):
    """Every process's whole output was read into memory after each run, whether a metric
    read it or not: a 200 MB stdout cost the runner 760 MB (177 MB now with no metric
    reading it). The file is read at first use, once."""
    out, err = tmp_path / "w.stdout", tmp_path / "w.stderr"
    result = ProcessResult("workload", 0, None, out, err)
    out.write_text("answer 42\n")  # written after the result was made: nothing was read then
    run = RunResult("ok", 1.0, 0, None, None, {"workload": result})
    assert Regex([metric("a", "regex", pattern=r"answer (\d+)")]).values(context(tmp_path), run) == {"a": 42.0}
    out.unlink()
    assert result.stdout == "answer 42\n"  # read once, kept
    assert result.stderr == ""  # no file: no output, not an error
