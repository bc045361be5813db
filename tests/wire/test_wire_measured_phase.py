"""A spec's measured phase (``measure_from``) at the wire: memcached under perflearn-load
with ``--preload``. The load generator counts only the requests of its profile, so the
wire must count those once the phase is marked (less the few sent before the runner saw
the start line), and the preload's sets besides them when it is not."""

from __future__ import annotations

import shutil

import pytest

from perflearn.experiment.spec import load_spec
from perflearn.runner.runner import run_experiment
from perflearn.store import open_store

pytestmark = pytest.mark.slow

KEYS = 3000


def _spec(write_spec, load: str, marked: bool, lead: str = ""):
    mark = "measure_from = '\"type\":\"start\"'\n" if marked else ""
    return write_spec(f"""
        [experiment]
        name = "phase"
        [workload]
        command = "{load} --server 127.0.0.1:{{port}} --protocol memcache-binary --rate 3000 --duration 1.5 --connections 4 --preload --keys {KEYS}{lead}"
        {mark}timeout = "30s"
        [workload.companions.memcached]
        command = "memcached -u root -l 127.0.0.1 -p {{port}} -U 0 -t 1"
        ready_port = "{{port}}"
        [metrics.wire_requests]
        source = "wire"
        field = "requests"
        port = "{{port}}"
        protocol = "memcache-binary"
        [metrics.wire_p50]
        source = "wire"
        field = "p50_us"
        port = "{{port}}"
        protocol = "memcache-binary"
        [metrics.client_completed]
        source = "regex"
        pattern = '"type":"summary".*?"completed":(\\d+)'
        [design]
        repeat = 2
    """, name=f"spec-{marked}{bool(lead)}.toml")


def _values(write_spec, load: str, marked: bool, lead: str = ""):
    store = open_store(":memory:")
    outcome = run_experiment(load_spec(_spec(write_spec, load, marked, lead)), store)
    assert outcome.by_status == {"ok": 2}, store.runs("phase")[["status", "error"]]
    samples = store.samples("phase")
    return store.dataset("phase").ok(), samples


def test_the_measured_phase_leaves_the_preload_out(wire_tools, can_capture, write_spec):
    if shutil.which("memcached") is None:
        pytest.skip("memcached not installed")
    load = str(wire_tools[1])
    marked, marked_samples = _values(write_spec, load, marked=True)
    whole, _ = _values(write_spec, load, marked=False)
    # marked: the wire counted the requests the generator timed, not one preload set; the
    # mark comes when the runner has seen the start line, some milliseconds after it
    lost = marked["client_completed"] - marked["wire_requests"]
    assert (lost >= 0).all() and (lost < 0.1 * 3000).all(), lost
    assert (marked["client_completed"] > 3000).all()
    # unmarked: every key's set besides them
    assert (whole["wire_requests"] - whole["client_completed"] >= KEYS).all()
    # the samples begin at the mark too: each is an interval of the profile's rate, not the preload's burst
    rps = marked_samples[marked_samples["metric"] == "wire.requests"]
    assert rps["value"].sum() == marked["wire_requests"].sum()
    assert (marked["wire_p50"] > 0).all()
    # a start announced ahead (--start-in): the runner marks the capture before the profile begins, so it
    # counts every request the generator timed, none lost, and no preload set
    ahead, ahead_samples = _values(write_spec, load, marked=True, lead=" --start-in 0.2")
    assert (ahead["wire_requests"] == ahead["client_completed"]).all(), ahead[["wire_requests", "client_completed"]]
    rps = ahead_samples[ahead_samples["metric"] == "wire.requests"]
    assert rps["value"].sum() == ahead["wire_requests"].sum()



def test_a_run_with_no_request_on_the_wire_stores_missing_latency_not_0(wire_tools, can_capture, write_spec):
    # The sniffer said p95_us 0.0 for a capture that matched nothing: wire_p95 was stored as 0.
    from perflearn.runner.process import free_port

    port = free_port()  # nothing listens or connects there
    spec = write_spec(f"""
        [experiment]
        name = "quiet"
        [workload]
        command = "sleep 0.3"
        [metrics.wire_p95]
        source = "wire"
        field = "p95_us"
        port = {port}
        [metrics.wire_requests]
        source = "wire"
        field = "requests"
        port = {port}
    """)
    store = open_store(":memory:")
    assert run_experiment(load_spec(spec), store).by_status == {"ok": 1}
    m = store.measurements("quiet").set_index("metric")
    assert m.loc["wire_requests", "value"] == 0
    assert m.loc["wire_p95", "value"] != m.loc["wire_p95", "value"]  # NULL (NaN), not 0
    assert m.loc["wire_p95", "missing_reason"].startswith(f"no request matched on lo port {port} (")
