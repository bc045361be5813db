"""Spec validation: every error path gives one line with file, line and key."""

from __future__ import annotations

import pytest

from perflearn.errors import SpecError
from perflearn.experiment.spec import load_spec

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

GOOD = """
[experiment]
name = "demo"

[workload]
command = "echo {bs} {mode}"
timeout = "2s"

[knobs.bs]
values = [1, 2, 4]

[knobs.mode]
categorical = ["a", "b"]

[metrics.t]
source = "time"
"""


def error_of(write_spec, text: str) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(text))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_good_spec_reads(write_spec):
    spec = load_spec(write_spec(GOOD))
    assert spec.name == "demo"
    assert spec.workload.main.command == ["echo", "{bs}", "{mode}"]
    assert spec.workload.timeout == 2.0
    assert spec.knobs["bs"].domain.levels() == [1, 2, 4]
    assert spec.knobs["mode"].categorical and not spec.knobs["bs"].categorical
    assert spec.warnings == []


def test_hash_ignores_comments_but_not_values(write_spec):
    base = load_spec(write_spec(GOOD)).hash
    assert load_spec(write_spec("# a comment\n" + GOOD, "b.toml")).hash == base
    assert load_spec(write_spec(GOOD.replace("[1, 2, 4]", "[1, 2, 8]"), "c.toml")).hash != base


def test_malformed_toml_names_the_line(write_spec):
    message = error_of(write_spec, GOOD.replace('values = [1, 2, 4]', 'values = [1, 2,'))
    assert "spec.toml:" in message and "not valid TOML" in message


def test_unknown_key_names_line_and_key(write_spec):
    message = error_of(write_spec, GOOD.replace("timeout = ", "timout = "))
    assert "spec.toml:6" in message and "workload.timout" in message and "unknown key" in message


def test_unknown_placeholder(write_spec):
    message = error_of(write_spec, GOOD.replace("echo {bs} {mode}", "echo {bs} {size}"))
    assert "spec.toml:5" in message and "unknown placeholder {size}" in message


def test_value_outside_domain_in_list_design(write_spec):
    text = GOOD + '\n[design]\nkind = "list"\npoints = [{bs = 3, mode = "a"}]\n'
    message = error_of(write_spec, text)
    assert "design.points" in message and "bs = 3 is outside" in message


def test_default_outside_domain(write_spec):
    message = error_of(write_spec, GOOD.replace("values = [1, 2, 4]", "values = [1, 2, 4]\ndefault = 3"))
    assert "knobs.bs.default" in message


def test_bad_regex(write_spec):
    text = GOOD + '\n[metrics.r]\nsource = "regex"\npattern = "(unclosed"\n'
    message = error_of(write_spec, text)
    assert "metrics.r.pattern" in message and "not a valid regular expression" in message


def test_regex_group_out_of_range(write_spec):
    text = GOOD + '\n[metrics.r]\nsource = "regex"\npattern = "x (\\\\d+)"\ngroup = 2\n'
    assert "has 1 group" in error_of(write_spec, text)


def test_unknown_source_and_actuator(write_spec):
    assert "unknown source 'clock'" in error_of(write_spec, GOOD.replace('source = "time"', 'source = "clock"'))
    assert "unknown actuator 'magic'" in error_of(write_spec, GOOD.replace("values = [1, 2, 4]", 'values = [1, 2, 4]\napply = "magic"'))


def test_missing_metrics(write_spec):
    text = GOOD[: GOOD.index("[metrics.t]")]
    assert "metrics: missing" in error_of(write_spec, text)


def test_wrong_type(write_spec):
    message = error_of(write_spec, GOOD.replace('timeout = "2s"', "timeout = true"))
    assert "workload.timeout" in message
    assert "duration" in error_of(write_spec, GOOD.replace('timeout = "2s"', 'timeout = "soon"'))


def test_continuous_range_needs_step_for_factorial(write_spec):
    message = error_of(write_spec, GOOD.replace("values = [1, 2, 4]", "range = [1.0, 4.0]"))
    assert "continuous range" in message and "design.kind" in message


def test_log_range_needs_positive_low(write_spec):
    assert "low > 0" in error_of(write_spec, GOOD.replace("values = [1, 2, 4]", "log_range = [0, 64]"))


def test_constraint_on_unknown_knob(write_spec):
    text = GOOD + '\n[design]\nconstraints = ["bs * threads < 8"]\n'
    assert "threads, which is not a knob" in error_of(write_spec, text)


def test_constraint_refuses_code(write_spec):
    text = GOOD + '\n[design]\nconstraints = ["__import__(\'os\').system(\'true\')"]\n'
    assert "not allowed" in error_of(write_spec, text)


def test_derived_metric_cycle_and_unknown(write_spec):
    text = GOOD + '\n[metrics.a]\nsource = "derived"\nexpr = "b + 1"\n[metrics.b]\nsource = "derived"\nexpr = "a * 2"\n'
    assert "cycle" in error_of(write_spec, text)
    text = GOOD + '\n[metrics.a]\nsource = "derived"\nexpr = "nothing / t"\n'
    assert "'nothing' is neither a metric nor a knob" in error_of(write_spec, text)


def test_affinity_target_must_be_a_process(write_spec):
    text = GOOD.replace("values = [1, 2, 4]", 'values = [1, 2, 4]') + '\n[knobs.cpu]\nvalues = [0]\napply = "affinity"\ntarget = "server"\n'
    assert "no process 'server'" in error_of(write_spec, text)


def test_affinity_cpu_must_exist(write_spec):
    text = GOOD + '\n[knobs.cpu]\nvalues = [0, 4096]\napply = "affinity"\n'
    assert "not available here" in error_of(write_spec, text)


def test_companion_stop_signal_and_placeholder(write_spec):
    text = GOOD + '\n[workload.companions.server]\ncommand = "sleep {port}"\nstop_signal = "NOPE"\n'
    assert "unknown signal 'NOPE'" in error_of(write_spec, text)


def test_metric_process_must_exist(write_spec):
    text = GOOD + '\n[metrics.r]\nsource = "regex"\npattern = "x"\nprocess = "server"\n'
    assert "no process 'server'" in error_of(write_spec, text)


def test_unused_knob_warns(write_spec):
    spec = load_spec(write_spec(GOOD + "\n[knobs.unused]\nvalues = [1]\n"))
    assert any("unused" in w for w in spec.warnings)


def test_setup_may_not_use_run_placeholders(write_spec):
    text = GOOD.replace('timeout = "2s"', 'timeout = "2s"\nsetup = "mkdir {run_dir}"')
    assert "setup/teardown run once" in error_of(write_spec, text)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "nope.toml")


def test_shell_needs_string(write_spec):
    text = GOOD.replace('command = "echo {bs} {mode}"', 'command = ["echo", "{bs}", "{mode}"]\nshell = true')
    assert "shell = true needs the command as one string" in error_of(write_spec, text)


def test_literal_braces_in_setup_say_how_to_escape(write_spec):
    message = error_of(write_spec, GOOD.replace('timeout = "2s"', 'timeout = "2s"\nsetup = "test -s x || { echo; }"'))
    assert "workload.setup" in message and "{{" in message


def test_regression_values_on_a_spec_whose_knobs_is_not_a_table(write_spec):
    """`run --values` read [knobs] with .get before validating it: a spec with
    `knobs = "bs"` crashed with a traceback instead of one line."""
    text = 'knobs = "bs"\n' + GOOD.split("[knobs.bs]")[0] + '\n[metrics.t]\nsource = "time"\n'
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(text), values={"bs": [8]})
    assert "--values bs: the spec has no knob 'bs' (knobs: none)" in str(caught.value)


@pytest.mark.parametrize("change, fragment", [
    (('timeout = "2s"', 'timeout = 0'), "timeout: must be more than 0"),
    (("values = [1, 2, 4]", "values = [1, nan, 4]"), "nan is not a finite number"),
    (("values = [1, 2, 4]", "range = [1, inf]\nstep = 1"), "expected [low, high] finite numbers"),
    (("values = [1, 2, 4]", "range = [1, 9]\nstep = inf"), "step: must be a finite number > 0"),
    (('source = "time"', 'source = "time"\n[sampling]\ninterval = nan'), "interval: a duration of at most a year, got nan"),
    (('source = "time"', 'source = "time"\n[sampling]\ninterval = "2h"'), "interval: must be from 10ms to 1h"),
    (('timeout = "2s"', 'timeout = 1e400'), "timeout: a duration of at most a year"),
    (('timeout = "2s"', 'timeout = "1e10s"'), "timeout: a duration of at most a year"),
    (("values = [1, 2, 4]", 'values = ["0-100000000000"]\napply = "affinity"'), "is beyond any machine"),
    (('source = "time"', 'source = "regex"\npattern = \'\''), "pattern: must not be empty"),
    (('timeout = "2s"', 'timeout = "2s"\nmeasure_from = "(start"'), "measure_from: not a valid regular expression"),
])
def test_values_that_would_silently_misbehave_are_refused(write_spec, change, fragment):
    """A zero timeout timed out every run; nan/inf knob values were accepted; an empty
    regex matched anywhere (found by fuzzing, session 19)."""
    assert fragment in error_of(write_spec, GOOD.replace(*change))


@pytest.mark.parametrize("port, ok", [("11211", True), ("{port}", True), ('"abc"', False), ("99999", False), ("0", False)])
def test_companion_ready_port_is_a_port_or_a_placeholder(write_spec, port, ok):
    text = GOOD + f'''
[workload.companions.srv]
command = "sleep 5"
ready_port = {port if port[0] in '"0123456789' else repr(port)}
'''
    if ok:
        load_spec(write_spec(text))
    else:
        assert "ready_port: expected a TCP port (1-65535)" in error_of(write_spec, text)


def test_a_plan_too_large_is_refused_before_it_is_listed(write_spec):
    """validate with step 1e-9 over [1, 1e9] hung and took gigabytes listing the points."""
    from perflearn.experiment.design import plan

    text = GOOD.replace("values = [1, 2, 4]", "range = [1, 1e9]\nstep = 1e-9")
    assert "values, more than 1,000,000 (is the step too small?)" in error_of(write_spec, text)
    # each knob within bounds, their product not
    text = GOOD.replace("values = [1, 2, 4]", "range = [1, 1000]\nstep = 1").replace(
        'categorical = ["a", "b"]', "range = [1, 2000]\nstep = 1")
    with pytest.raises(SpecError, match=r"factorial design has 2,000,000 points \(bs 1,000 x mode 2,000\), more than 1,000,000"):
        plan(load_spec(write_spec(text)))


def test_a_power_too_large_in_a_constraint_is_an_error_not_a_hang(write_spec):
    text = GOOD + '\n[design]\nconstraints = ["(bs + 1) ** 10 ** 10 > 1"]\n'
    with pytest.raises(SpecError, match="is too large"):
        from perflearn.experiment.design import plan

        plan(load_spec(write_spec(text)))


def test_a_constraint_that_is_not_true_or_false_is_refused(write_spec):
    """'bs + 1' kept every point (a number is truthy): a typo for a comparison."""
    from perflearn.experiment.design import plan

    with pytest.raises(SpecError, match=r"'bs \+ 1' gives 2 on .*, not true or false"):
        plan(load_spec(write_spec(GOOD + '\n[design]\nconstraints = ["bs + 1"]\n')))


@pytest.mark.parametrize("key", ["../../tmp/victim", "", "vm..swappiness"])
def test_a_sysctl_key_never_leaves_proc_sys(write_spec, key):
    """'../../tmp/x' passed validate and the run wrote to /tmp/x (fuzzing, session 19)."""
    text = GOOD.replace("values = [1, 2, 4]", f'values = [1, 2, 4]\napply = "sysctl"\nkey = "{key}"')
    assert "key: not a sysctl name" in error_of(write_spec, text)


def test_values_replace_a_categorical_or_range_knob_too(write_spec):
    """--values on a knob given as categorical or range was refused, blaming the spec."""
    text = """
[workload]
command = "echo {cpu} {rate} {size}"
[knobs.cpu]
categorical = ["0", "1"]
[knobs.rate]
range = [1000, 5000]
step = 1000
[knobs.size]
log_range = [1, 1024]
base = 4
[metrics.t]
source = "time"
"""
    spec = load_spec(write_spec(text), values={"cpu": [0, 1], "rate": [1500, 2500], "size": [8]})
    domains = {name: knob.domain for name, knob in spec.knobs.items()}
    assert domains["cpu"].categorical and list(domains["cpu"].values) == [0, 1]
    assert list(domains["rate"].values) == [1500, 2500] and not domains["rate"].categorical
    assert list(domains["size"].values) == [8]
