"""Runs under bad input (fuzzing, session 20): a metric fails for its own reason only, and
a user's regular expression cannot hang a run past its time budget."""

from __future__ import annotations

import time

import pytest

from perflearn.experiment.spec import load_spec
from perflearn.runner.runner import run_experiment
from perflearn.store import open_store


def run(path):
    store = open_store(":memory:")
    return run_experiment(load_spec(path), store), store


@pytest.mark.timeout(60)  # it hung for ever before the fix
def test_a_backtracking_regex_metric_is_bounded_by_the_workload_timeout(write_spec):
    """16: '^(a+)+$' on forty a's and a b backtracked for ever after the workload had exited;
    10: one json path raising blanked the other json metrics."""
    path = write_spec("""
        [workload]
        command = "echo '{{\\"a\\": 1, \\"b\\": \\"s\\"}}'; printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\\n'"
        shell = true
        timeout = "1s"
        [metrics.bad]
        source = "regex"
        pattern = '^(a+)+$'
        match = "count"
        [metrics.good]
        source = "regex"
        pattern = '"a": (\\d+)'
        [metrics.a]
        source = "json"
        path = "a"
        [metrics.b]
        source = "json"
        path = "abs(b)"
    """)
    started = time.monotonic()
    outcome, store = run(path)
    assert time.monotonic() - started < 20
    assert outcome.by_status == {"ok": 1}
    m = store.measurements("spec").set_index("metric")
    assert m.loc["good", "value"] == 1.0 and m.loc["a", "value"] == 1.0
    assert "took more than 1 s" in m.loc["bad", "missing_reason"]
    assert "JMESPathTypeError" in m.loc["b", "missing_reason"]


@pytest.mark.timeout(60)
def test_a_backtracking_ready_pattern_is_bounded_by_the_ready_timeout(write_spec):
    """16: the same pattern as a companion's ready_pattern hung the wait for it."""
    path = write_spec("""
        [workload]
        command = "true"
        [workload.companions.server]
        command = "sh -c 'printf aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab; sleep 30'"
        ready_pattern = '^(a+)+$'
        ready_timeout = "1s"
        [metrics.t]
        source = "time"
    """)
    started = time.monotonic()
    outcome, store = run(path)
    assert time.monotonic() - started < 20
    assert outcome.by_status == {"failed": 1}
    assert "ran out of time" in store.runs("spec")["error"][0]


def test_a_ready_port_filled_with_no_port_fails_the_run_in_one_line(write_spec):
    """ready_port = "{x}x" passed validation, then every run crashed the runner:
    "internal error (ValueError: invalid literal for int() with base 10: '1x')"."""
    path = write_spec("""
        [workload]
        command = "true"
        [workload.companions.server]
        command = "sleep 30"
        ready_port = "{x}x"
        [knobs.x]
        values = [1]
        [metrics.t]
        source = "time"
    """)
    outcome, store = run(path)
    assert outcome.by_status == {"failed": 1}
    assert store.runs("spec")["error"][0] == "companion server: ready_port '{x}x' gave '1x', not a TCP port (1-65535)"
