"""Interval samples of real workloads, stored with their runs."""

from __future__ import annotations

import pytest

from perflearn.errors import SpecError
from perflearn.experiment.sampling import perf_interval_samples
from perflearn.experiment.spec import load_spec
from perflearn.runner.runner import run_experiment
from perflearn.store import open_store


def samples_of(write_spec, text):
    spec = load_spec(write_spec(text))
    store = open_store(":memory:")
    outcome = run_experiment(spec, store)
    return outcome, store.samples(spec.name), store


def test_cpu_bound_workload_is_seen_busy(write_spec):
    outcome, samples, _ = samples_of(write_spec, """
        [workload]
        command = ["python3", "-c", "import time\\nt = time.time()\\nwhile time.time() - t < 1.0: pass"]
        [sampling]
        interval = "100ms"
        perf_events = ["task-clock", "instructions"]
        [metrics.t]
        source = "time"
    """)
    assert outcome.by_status == {"ok": 1}
    by = samples.groupby("metric")["value"]
    assert by.count()["proc.cpu.user"] >= 5
    assert by.median()["proc.cpu.user"] > 0.5  # one CPU's worth, spinning
    assert by.median()["perf.task-clock"] > 300  # ms of CPU per second
    assert samples["t"].is_monotonic_increasing or samples.groupby("metric")["t"].apply(lambda t: t.is_monotonic_increasing).all()
    assert samples["value"].notna().all()
    # an event the machine cannot count gives no samples rather than zeros
    instructions = samples[samples["metric"] == "perf.instructions"]
    assert instructions.empty or (instructions["value"] > 0).all()


def test_io_workload_is_seen_writing(write_spec, tmp_path):
    out = tmp_path / "blob"
    outcome, samples, _ = samples_of(write_spec, f"""
        [workload]
        command = "for i in 1 2 3 4 5 6; do dd if=/dev/zero of={out} bs=1M count=8 conv=fsync status=none; sleep 0.1; done"
        shell = true
        [sampling]
        interval = "100ms"
        system = false
        [metrics.t]
        source = "time"
    """)
    assert outcome.by_status == {"ok": 1}
    assert not samples["metric"].str.startswith("sys.").any()
    written = samples[samples["metric"] == "proc.write_bytes"]["value"]
    assert written.sum() * 0.1 > 8 * 2**20  # several fsynced 8 MiB writes were seen


def test_samples_are_kept_for_a_failed_run(write_spec):
    outcome, samples, _ = samples_of(write_spec, """
        [workload]
        command = "sleep 0.5; exit 2"
        shell = true
        [sampling]
        interval = "100ms"
        [metrics.t]
        source = "time"
    """)
    assert outcome.by_status == {"failed": 1}
    assert len(samples) > 0


def test_sampling_spec_errors(write_spec):
    base = '[workload]\ncommand = "true"\n[metrics.t]\nsource = "time"\n[sampling]\n'
    with pytest.raises(SpecError, match="sampling.interval: must be at least 10ms"):
        load_spec(write_spec(base + 'interval = "1ms"\n'))
    with pytest.raises(SpecError, match="samples nothing"):
        load_spec(write_spec(base + "system = false\nprocess = false\n"))


def test_perf_interval_parser(tmp_path):
    path = tmp_path / "perf.csv"
    path.write_text("# started on x\n\n"
                    "0.100,50.0,msec,task-clock,50000000,100.00,0.5,CPUs utilized\n"
                    "0.100,<not supported>,,instructions,0,100.00,,\n"
                    "0.200,100.0,msec,task-clock,100000000,100.00,1.0,CPUs utilized\n")
    samples = perf_interval_samples(path, 0.1)
    assert samples == [("perf.task-clock", 0.1, pytest.approx(500.0)), ("perf.task-clock", 0.2, pytest.approx(1000.0))]
