"""Bad input found by fuzzing (session 20): each gives one line naming the key, never a
traceback, never a hang, never a silently wrong sweep."""

from __future__ import annotations

import signal
import time

import pytest

from perflearn.errors import SpecError
from perflearn.experiment.actuators import parse_cpus
from perflearn.experiment.collectors import MetricSpec, Missing
from perflearn.experiment.collectors.text import JsonPath, Regex
from perflearn.experiment.design import plan
from perflearn.experiment.knobs import Domain
from perflearn.experiment.launch import ProcessLaunch, ProcessResult, RunContext, RunResult
from perflearn.experiment.spec import load_spec
from perflearn.experiment.timelimit import TimeLimit, time_limit
from perflearn.runner.runner import check_machine

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

SPEC = """
[workload]
command = "echo {x}"
timeout = "2s"

[knobs.x]
values = [1, 2]

[metrics.t]
source = "time"
"""


def error_of(write_spec, text: str) -> str:
    with pytest.raises(SpecError) as caught:
        plan(load_spec(write_spec(text)))
    message = str(caught.value)
    assert "\n" not in message
    return message


def knob(body: str) -> str:
    return SPEC.replace("values = [1, 2]", body)


@pytest.mark.parametrize("body, fragment", [
    # 1: nan passed "base <= 1" and crashed counting the values
    ('log_range = [1, 100]\nbase = nan', "spec.toml:7: knobs.x.base: must be a finite number > 1, got nan"),
    ('log_range = [1, 100]\nbase = inf', "knobs.x.base: must be a finite number > 1"),
    # 2: high - low overflowed: every sampled value was inf, or counting crashed
    ('range = [-1e308, 1e308]', "knobs.x.range: [-1e+308, 1e+308] is too wide: high - low overflows a float"),
    ('range = [-1e308, 1e308]\nstep = 1e307', "knobs.x.range: [-1e+308, 1e+308] is too wide"),
    ('range = [0, 1e308]\nstep = 1e-308', "knobs.x.step: gives more than 1,000,000 values (is the step too small?)"),
    ('log_range = [1e-308, 1e308]\nbase = 1.0000001', "knobs.x.log_range: gives 14,183,924,874 values, more than "
                                                       "1,000,000 (is the base too small?)"),
    # 14: an integer knob with a fractional step (or bounds) repeated points
    ('range = [1, 3]\nstep = 0.5', "knobs.x.step: an integer knob needs a whole-number step, got 0.5"),
    ('range = [0.5, 3.5]\ninteger = true\nstep = 1', "knobs.x.range: an integer knob needs whole-number bounds"),
    ('log_range = [1, 100]\ninteger = true\nbase = 1.5', "knobs.x.log_range: two of its values round to 2: "
                                                         "use a larger base"),
    ('range = [0, 1e-10]\nstep = 1e-13', "knobs.x.range: two of its values round to 0.0: use a larger step"),
    # 6: TOML dates crashed the JSON of the spec's values
    ('values = [1979-05-27, 2000-01-01]', "knobs.x.values: date datetime.date(1979, 5, 27) is not a knob value"),
    ('categorical = [07:32:00]', "knobs.x.categorical: time datetime.time(7, 32) is not a knob value"),
    # 7: nested lists and tables where a value (or a flat CPU list) is expected
    ('values = [[1, [2]], [3]]', "knobs.x.values: a list [2] inside a list [1, [2]]: a list value is a CPU list"),
    ('values = [{a = 1}]', "knobs.x.values: a table is not a knob value"),
    ('values = [1, 2]\ndefault = [[1]]', "knobs.x.default: a list [1] inside a list [[1]]"),
    ('values = [[0, [1]]]\napply = "affinity"', "knobs.x.values: a list [1] inside a list [0, [1]]"),
    ('values = ["a\\u0000"]', "knobs.x.values: 'a\\x00' contains a NUL byte"),
    # 12: an empty CPU set ran unpinned
    ('values = [[]]\napply = "affinity"', "knobs.x.values: empty CPU list: []"),
    # 5: cpufreq over no CPU crashed (StopIteration)
    ('values = [1000]\napply = "cpufreq"\ncpus = []', "spec.toml:8: knobs.x.cpus: empty CPU list: []"),
    ('values = [1000]\napply = "cpufreq"\ncpus = [[0]]', "knobs.x.cpus: not a CPU list: [[0]] (a list of lists)"),
    # 4: a relative module crashed importlib (TypeError)
    ('values = [1]\napply = "hook"\nentry_point = ".foo:bar"', "spec.toml:8: knobs.x.entry_point: expected "
                                                              "module.path:function, got '.foo:bar'"),
    ('values = [1]\napply = "hook"\nentry_point = "os"', "knobs.x.entry_point: expected module.path:function"),
    # 8: execve refuses these names: validate passed and every run failed
    ('values = [1]\napply = "env"\nvar = "A=B"', "knobs.x.var: 'A=B' is not an environment variable name"),
])
def test_bad_knob_is_one_line_at_its_key(write_spec, body, fragment):
    assert fragment in error_of(write_spec, knob(body))


def test_lhs_seed_must_not_be_negative(write_spec):
    """3: numpy's generator raised ValueError (exit 70)."""
    text = knob("range = [1, 10]") + '\n[design]\nkind = "lhs"\nsamples = 3\nseed = -1\n'
    assert "spec.toml:14: design.seed: must be >= 0, got -1" in error_of(write_spec, text)


@pytest.mark.parametrize("point", ["{x = 1979-05-27T07:32:00Z}", "{x = [1, [2]]}"])
def test_list_design_point_values_are_checked(write_spec, point):
    text = SPEC + f'\n[design]\nkind = "list"\npoints = [{point}]\n'
    assert "design.points: point 1: x: " in error_of(write_spec, text)


@pytest.mark.parametrize("workload, fragment", [
    ('command = "echo 1"\nenv = {"A=B" = "1"}', "spec.toml:3: workload.env: 'A=B' is not an environment variable name"),
    ('command = "echo 1"\nenv = {"A\\u0000" = "1"}', "workload.env: 'A\\x00' is not an environment variable name"),
    ('command = "echo 1"\nenv = {"" = "1"}', "workload.env: an environment variable needs a name"),
    ('command = "echo 1"\nenv = {A = "1\\u0000"}', "workload.env: A: the value contains a NUL byte"),
    ('command = ["echo", "a\\u0000b"]', "workload.command: 'a\\x00b' contains a NUL byte"),
    ('command = "echo 1"\ncwd = "/tmp\\u0000x"', "workload.cwd: contains a NUL byte"),
])
def test_environment_and_arguments_execve_would_refuse(write_spec, workload, fragment):
    """8: these passed validate and every run died with 'ValueError: illegal environment variable name'."""
    text = f'[workload]\n{workload}\n\n[metrics.t]\nsource = "time"\n'
    assert fragment in error_of(write_spec, text)


@pytest.mark.parametrize("workload, fragment", [
    ('command = "echo 1"\n[workload.companions.srv]\ncommand = "true"\nready_port = "{nope}"',
     "spec.toml:5: workload.companions.srv.ready_port: unknown placeholder {nope}"),
    ('command = "echo 1"\nenv = {A = "{zz}"}', "spec.toml:3: workload.env.A: unknown placeholder {zz}"),
    ('command = "echo 1"\ncwd = "/tmp/{x"', "spec.toml:3: workload.cwd: "),
])
def test_a_placeholder_error_names_its_own_key(write_spec, workload, fragment):
    """A bad placeholder in ready_port, env or cwd was reported against `command`, on its line."""
    text = f'[workload]\n{workload}\n\n[metrics.t]\nsource = "time"\n'
    assert fragment in error_of(write_spec, text)


def test_regex_group_must_be_a_group_of_the_pattern(write_spec):
    """11: group = -1 was accepted and failed at every run."""
    text = SPEC + '\n[metrics.r]\nsource = "regex"\npattern = "x (\\\\d+)"\ngroup = -1\n'
    assert "metrics.r.group: the pattern has 1 group(s), so group is 0 to 1, not -1" in error_of(write_spec, text)


def test_parse_cpus_refuses_empty_and_nested():
    for value in ([], (), [[]], "", [[0], [1]]):
        with pytest.raises(ValueError):
            parse_cpus(value)
    assert parse_cpus(["0-2", 5]) == {0, 1, 2, 5}


def test_geometric_levels_up_to_the_largest_float_end():
    """A log range up to 1.7976931348623157e308 looped for ever: its tolerance overflowed to inf."""
    domain = Domain("log_range", low=1.0, high=1.7976931348623157e308, base=2.0)
    started = time.monotonic()
    assert domain.count() == 1024
    assert time.monotonic() - started < 5


def test_validate_leaves_no_cgroup_behind(write_spec, tmp_path, monkeypatch):
    """15: check_machine (what `validate` runs) created perflearn/<experiment>-workload and never removed it."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu cpuset\n")
    (root / "cgroup.subtree_control").write_text("")
    monkeypatch.setenv("PERFLEARN_CGROUP_ROOT", str(root))
    spec = load_spec(write_spec(knob('values = [0.5, 1]\napply = "cgroup-quota"')))
    actuators, _, _ = check_machine(spec)
    assert not (root / "perflearn" / "spec-workload").exists()
    # the first apply of a sweep makes it
    launch = ProcessLaunch("workload", ["true"], {}, str(tmp_path))
    run = RunContext("spec", 0, 1, 0, {}, tmp_path, processes={"workload": launch})
    actuators["x"].apply(0.5, run)
    assert (root / "perflearn" / "spec-workload").is_dir()
    assert launch.cgroup_procs == [str(root / "perflearn" / "spec-workload" / "cgroup.procs")]


# -- collectors: each metric is missing only for its own reason -------------------------------


def result_with(stdout: str) -> RunResult:
    return RunResult("ok", 1.0, 0, None, None, {"workload": ProcessResult("workload", 0, None, stdout, "")})


def metric(name, collector, **options) -> MetricSpec:
    m = MetricSpec(name, collector.source, options=options)
    collector.validate(m)
    return m


def test_one_json_metric_failing_leaves_the_others(tmp_path):
    """10: abs() of a string raised, and every json metric of the run became NULL."""
    metrics = [metric("a", JsonPath, path="a"), metric("b", JsonPath, path="abs(b)")]
    values = JsonPath(metrics).values(RunContext("e", 0, 1, 0, {}, tmp_path), result_with('{"a": 1, "b": "s"}'))
    assert values["a"] == 1.0
    assert isinstance(values["b"], Missing) and "JMESPathTypeError" in values["b"].reason


def test_one_regex_metric_failing_leaves_the_others(tmp_path):
    """10: a mean overflowing (fsum) raised, and every regex metric of the run became NULL."""
    metrics = [metric("first", Regex, pattern=r"v (\S+)"), metric("mean", Regex, pattern=r"v (\S+)", match="mean")]
    values = Regex(metrics).values(RunContext("e", 0, 1, 0, {}, tmp_path), result_with("v 1e308\nv 1e308\n"))
    assert values["first"] == 1e308
    assert isinstance(values["mean"], Missing) and "OverflowError" in values["mean"].reason


def test_a_backtracking_regex_is_bounded_by_the_run_budget(tmp_path):
    """16: '(a+)+$' on forty a's and a b never ended: the run hung past its timeout."""
    metrics = [metric("bad", Regex, pattern=r"^(a+)+$", match="count"), metric("ok", Regex, pattern=r"n (\d+)")]
    run = RunContext("e", 0, 1, 0, {}, tmp_path, timeout=0.5)
    started = time.monotonic()
    values = Regex(metrics).values(run, result_with("a" * 40 + "b\nn 7\n"))
    assert time.monotonic() - started < 10
    assert isinstance(values["bad"], Missing) and "took more than 0.5 s" in values["bad"].reason
    assert values["ok"] == 7.0


def test_time_limit_gives_back_an_outer_timer():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(TimeLimit):
            with time_limit(0.05):
                while True:
                    pass
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.5
        time.sleep(0.6)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("body, fragment", [
    # a knob `status` replaced the run's ok/failed in show and export (session 46's review)
    ('[knobs.status]\nvalues = ["fast", "slow"]', "knobs.status: 'status' is a column every run has in the results"),
    ('[knobs.run_id]\nvalues = [1]', "knobs.run_id: 'run_id' is a column every run has"),
    ('[metrics.run_id]\nsource = "time"', "metrics.run_id: 'run_id' is a column every run has in the results"),
    ('[metrics.rep]\nsource = "time"', "metrics.rep: 'rep' is a column every run has"),
    # 1 and 1.0 were two points of one setting
    ('[knobs.y]\nvalues = [1, 1.0, 2]', "knobs.y.values: lists a value twice"),
    # session 61's audit: 1 and "1" filled a command alike and were two points; three CPU sets were one
    ('[knobs.y]\ncategorical = [1, "1"]', "knobs.y.categorical: lists a value twice (1 and '1' are one setting)"),
    ('[knobs.y]\ncategorical = [[0, 1], [1, 0]]', "lists a value twice ([0, 1] and [1, 0] are one setting)"),
    ('[knobs.y]\ncategorical = [[0, 1], "0-1"]\napply = "affinity"', "([0, 1] and '0-1' are one setting)"),
    # two knobs writing one setting: the later one's value applied, the earlier's effect read as none
    ('[knobs.y]\nvalues = [1, 2]\napply = "env"\nvar = "X"\n[knobs.z]\nvalues = [3]\napply = "env"\nvar = "X"',
     "knobs.z: sets the environment variable X of workload, as knob 'y' does"),
    ('[knobs.y]\nvalues = [1, 2]\napply = "env"\nvar = "X"\ntarget = "*"\n[knobs.z]\nvalues = [3]\napply = "env"\n'
     'var = "X"', "knobs.z: sets the environment variable X of every process, as knob 'y' does"),
    ('[knobs.y]\ncategorical = [0, 1]\napply = "affinity"\n[knobs.z]\ncategorical = [1]\napply = "affinity"',
     "knobs.z: sets the CPU affinity of workload, as knob 'y' does"),
    ('[knobs.y]\nrange = [0, 1]\nstep = 0.1', "integer = false for values between them"),
])
def test_names_and_values_the_results_cannot_hold(write_spec, body, fragment):
    assert fragment in error_of(write_spec, SPEC + "\n" + body + "\n")


@pytest.mark.parametrize("option, values", [
    ("rate=5700,11400", [5700, 11400]),
    ("cpu=[0,1]", [[0, 1]]),  # a CPU list: '[0' and '1]' before (session 46's review)
    ("cpu=[0,1],[2,3]", [[0, 1], [2, 3]]),
    ('cpu="0,1"', ["0,1"]),  # one value, two points before
    ('mode="x,y",z', ["x,y", "z"]),
    ("mode=fast, slow", ["fast", "slow"]),
])
def test_values_split_at_top_level_commas_only(option, values):
    from perflearn.experiment.spec import parse_values

    assert parse_values(option) == (option.split("=")[0], values)


def test_knobs_of_other_settings_or_processes_are_no_conflict(write_spec):
    """Not refused: one variable of two processes, two variables, a CPU list of a plain knob
    written two ways (it fills the command as written)."""
    spec = SPEC.replace('command = "echo {x}"', 'command = "echo {x} {w}"') + """
[workload.companions.srv]
command = "sleep 5"
[knobs.y]
values = [1, 2]
apply = "env"
var = "X"
[knobs.z]
values = [3]
apply = "env"
var = "X"
target = "srv"
[knobs.v]
values = [1]
apply = "env"
var = "V"
[knobs.w]
categorical = [[0, 1], "0-1"]
"""
    assert len(plan(load_spec(write_spec(spec)))) == 2 * 2 * 2
