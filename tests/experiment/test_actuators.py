"""Actuators, applied for real through the runner: the workload reports what it got."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from perflearn.errors import UnsupportedError
from perflearn.experiment import cgroups
from perflearn.experiment.actuators import parse_cpus
from perflearn.experiment.spec import load_spec
from perflearn.runner.runner import check_machine, run_experiment
from perflearn.store import open_store


def run_spec(path):
    spec = load_spec(path)
    store = open_store(":memory:")
    outcome = run_experiment(spec, store)
    return outcome, store.dataset(spec.name), store


def test_parse_cpus():
    assert parse_cpus("0-2,5") == {0, 1, 2, 5}
    assert parse_cpus([0, 3]) == {0, 3} and parse_cpus(1) == {1}
    for bad in ("a-b", "", True):
        with pytest.raises(ValueError):
            parse_cpus(bad)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_affinity_of_workload_and_companion(write_spec, tmp_path):
    path = write_spec(f"""
        [workload]
        command = "grep Cpus_allowed_list /proc/self/status; cat {tmp_path}/server.cpus"
        shell = true
        [workload.companions.server]
        command = "grep Cpus_allowed_list /proc/self/status > {tmp_path}/server.cpus; exec sleep 30"
        shell = true
        ready_delay = "0.2s"
        [knobs.client]
        categorical = [0, 1]
        apply = "affinity"
        [knobs.server]
        categorical = [0, 1]
        apply = "affinity"
        target = "server"
        [metrics.client_cpu]
        source = "regex"
        pattern = 'Cpus_allowed_list:\\s+(\\d+)'
        match = "first"
        [metrics.server_cpu]
        source = "regex"
        pattern = 'Cpus_allowed_list:\\s+(\\d+)'
        match = "last"
    """)
    outcome, ds, _ = run_spec(path)
    assert outcome.by_status == {"ok": 4}
    frame = ds.ok()
    assert (frame["client_cpu"] == frame["client"]).all()
    assert (frame["server_cpu"] == frame["server"]).all()


@pytest.mark.skipif(cgroups.version() != 1, reason="cgroup v1 cpu controller not mounted")
def test_cgroup_quota_and_cpuset_v1(write_spec):
    path = write_spec("""
        [workload]
        command = "d=$(grep -E ':cpu(,cpuacct)?:' /proc/self/cgroup | cut -d: -f3); cat /sys/fs/cgroup/cpu$d/cpu.cfs_quota_us; grep Cpus_allowed_list /proc/self/status"
        shell = true
        [knobs.quota]
        values = [0.5, 1.5, 0]
        apply = "cgroup-quota"
        [knobs.cpus]
        categorical = ["1", "0-1"]
        apply = "cgroup-cpuset"
        [metrics.quota_us]
        source = "regex"
        pattern = '^(-?\\d+)$'
        [metrics.last_cpu]
        source = "regex"
        pattern = 'Cpus_allowed_list:\\s+(?:\\d+-)?(\\d+)'
    """)
    outcome, ds, _ = run_spec(path)
    assert outcome.by_status == {"ok": 6}
    frame = ds.ok()
    expected = frame["quota"].map(lambda q: q * 100_000 if q else -1)
    assert (frame["quota_us"] == expected).all()
    assert (frame["last_cpu"] == 1).all()  # "1" and "0-1" both end at CPU 1
    assert not any(p.exists() for p in Path("/sys/fs/cgroup/cpu/perflearn").glob("spec-*"))  # removed after


@pytest.mark.parametrize("domain, said", [("values = [0.5, 1, {over}]", "{over}"),
                                           ("range = [0.5, {over}]\n        step = 0.5", "up to {over}"),
                                           ("values = [0.5, 0]", None)])
def test_a_quota_above_the_cpus_is_said_to_cap_nothing(write_spec, domain, said):
    """A quota of 5 CPUs on a 2-CPU host was taken silently: it measures the unlimited
    case again under another name."""
    over = len(os.sched_getaffinity(0)) + 3
    path = write_spec(f"""
        [workload]
        command = "true"
        [knobs.quota]
        {domain.format(over=over)}
        apply = "cgroup-quota"
        [metrics.t]
        source = "time"
    """)
    _, _, warnings = check_machine(load_spec(path))
    quota = [w for w in warnings if "quota" in w]
    if said is None:
        assert quota == []
    else:
        assert quota == [f"knob 'quota': a quota above the {over - 3} CPUs the runs may use here "
                         f"({said.format(over=over)}) caps nothing, as unlimited (0) does"]


def test_env_knob_and_hook(write_spec, tmp_path):
    marker = tmp_path / "hook.log"
    path = write_spec(f"""
        [workload]
        command = "echo threads=$OMP_NUM_THREADS"
        shell = true
        [knobs.threads]
        values = [1, 3]
        apply = "env"
        var = "OMP_NUM_THREADS"
        [knobs.mode]
        categorical = ["a", "b"]
        apply = "hook"
        command = "echo {{value}} >> {marker}"
        restore = "echo restored >> {marker}"
        [metrics.threads_seen]
        source = "regex"
        pattern = 'threads=(\\d+)'
    """)
    outcome, ds, _ = run_spec(path)
    assert outcome.by_status == {"ok": 4}
    assert (ds.ok()["threads_seen"] == ds.ok()["threads"]).all()
    assert marker.read_text().split() == ["a", "b", "a", "b", "restored"]


def test_failing_hook_fails_the_run_not_the_sweep(write_spec):
    path = write_spec("""
        [workload]
        command = "true"
        [knobs.x]
        values = [1, 2]
        apply = "hook"
        command = "test {value} -eq 1"
        [metrics.t]
        source = "time"
    """)
    outcome, ds, store = run_spec(path)
    assert outcome.by_status == {"ok": 1, "failed": 1}
    runs = store.runs("spec")
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert "hook of knob 'x' exited 1" in failed["error"]
    assert ds.frame.loc[ds.frame["status"] == "failed", "t"].isna().all()  # NULL, never 0


def test_sysctl_applied_then_restored(write_spec):
    sysctl = Path("/proc/sys/vm/swappiness")
    if not os.access(sysctl, os.W_OK):
        pytest.skip("needs root to write sysctls")
    before = sysctl.read_text().strip()
    path = write_spec("""
        [workload]
        command = "cat /proc/sys/vm/swappiness"
        [knobs.swappiness]
        values = [11, 13]
        apply = "sysctl"
        key = "vm.swappiness"
        [metrics.seen]
        source = "regex"
        pattern = '(\\d+)'
    """)
    outcome, ds, _ = run_spec(path)
    assert (ds.ok()["seen"] == ds.ok()["swappiness"]).all() and len(ds.ok()) == 2
    assert sysctl.read_text().strip() == before


def test_missing_sysctl_is_refused_before_the_sweep(write_spec):
    spec = load_spec(write_spec("""
        [workload]
        command = "true"
        [knobs.x]
        values = [1]
        apply = "sysctl"
        key = "net.nothing.here"
        [metrics.t]
        source = "time"
    """))
    with pytest.raises(UnsupportedError, match="sysctl net.nothing.here does not exist"):
        check_machine(spec)


ETHTOOL_SPEC = """
    [workload]
    command = "true"
    [knobs.rx_usecs]
    values = [8, 64]
    apply = "ethtool-coalesce"
    iface = "@IFACE@"
    param = "rx-usecs"
    [metrics.t]
    source = "time"
"""


def test_ethtool_coalescing_unsupported_nic_is_one_clear_line(write_spec):
    """Loopback (and veth) have no interrupt coalescing: say so before the sweep."""
    spec = load_spec(write_spec(ETHTOOL_SPEC.replace("@IFACE@", "lo")))
    with pytest.raises(UnsupportedError) as caught:
        check_machine(spec)
    assert "knob rx_usecs" in str(caught.value) and "coalescing on lo is not supported" in str(caught.value)


def test_ethtool_coalescing_applied_and_restored(write_spec, tmp_path, monkeypatch):
    """The supported path, with a stand-in ethtool: no NIC here has coalescing to set."""
    state = tmp_path / "rx-usecs"
    state.write_text("3")
    fake = tmp_path / "bin" / "ethtool"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
if [ "$1" = "-c" ]; then echo "Coalesce parameters for $2:"; echo "rx-usecs: $(cat {state})"; echo "tx-usecs: n/a"; exit 0; fi
if [ "$1" = "-C" ]; then echo "$4" > {state}; echo "$4" >> {state}.log; exit 0; fi
exit 1
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    outcome, _, _ = run_spec(write_spec(ETHTOOL_SPEC.replace("@IFACE@", "eth9")))
    assert outcome.by_status == {"ok": 2}
    assert (tmp_path / "rx-usecs.log").read_text().split() == ["8", "64", "3"]  # both values, then restored


QUOTA_SPEC = """
    [workload]
    command = "true"
    [knobs.quota]
    values = [0.5]
    apply = "cgroup-quota"
    [metrics.t]
    source = "time"
"""


@pytest.mark.skipif(cgroups.version() != 1 or os.geteuid() != 0, reason="needs root and cgroup v1")
def test_stale_groups_of_dead_processes_are_removed_and_no_other():
    """A killed manager leaves its group; the next one removes it, not a live one's."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    controllers = {"cpuset", "cpu"}
    stale = cgroups.create(f"stalecheck-{dead.pid}-service", controllers)
    mine = cgroups.create(f"stalecheck-{os.getpid()}-service", controllers)
    busy = cgroups.create(f"stalecheck-{dead.pid}-busy", controllers)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for procs in busy.procs_files:
            Path(procs).write_text(str(sleeper.pid))
        removed = cgroups.remove_stale("stalecheck")
        assert removed == [stale.name]
        assert not any(d.exists() for d in stale.dirs.values())
        assert all(d.exists() for d in mine.dirs.values()) and all(d.exists() for d in busy.dirs.values())
    finally:
        sleeper.kill()
        sleeper.wait()
        for group in (stale, mine, busy):
            group.remove()


def test_machine_without_cgroups_is_one_clear_line(write_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLEARN_CGROUP_ROOT", str(tmp_path / "no-cgroups"))
    spec = load_spec(write_spec(QUOTA_SPEC))
    with pytest.raises(UnsupportedError, match="knob quota \\(apply = cgroup-quota\\): no cgroup hierarchy under"):
        check_machine(spec)


def test_cgroup_v2_controller_not_enabled(write_spec, tmp_path, monkeypatch):
    """A v2 hierarchy whose cpu controller is not delegated: refused before the sweep."""
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    monkeypatch.setenv("PERFLEARN_CGROUP_ROOT", str(tmp_path))
    spec = load_spec(write_spec(QUOTA_SPEC))
    with pytest.raises(UnsupportedError, match="cgroup v2 controller 'cpu' is not enabled"):
        check_machine(spec)


def test_machine_without_perf_is_one_clear_line(write_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no perf on this PATH
    spec = load_spec(write_spec("""
        [workload]
        command = "/bin/true"
        [metrics.cycles]
        source = "perf"
        event = "cycles"
    """))
    with pytest.raises(UnsupportedError, match="perf is not installed .* cycles"):
        check_machine(spec)


def hook_entry_point(value, values):
    """Used by test_hook_entry_point: records what the runner passed."""
    Path(values["run_dir"]).parent.joinpath("entry-point.log").open("a").write(f"{value}:{values['point_id']}\n")


def test_hook_entry_point(write_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLEARN_RUN_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    path = write_spec("""
        [workload]
        command = "true"
        [knobs.level]
        values = [5, 7]
        apply = "hook"
        entry_point = "test_actuators:hook_entry_point"
        [metrics.t]
        source = "time"
    """)
    outcome, _, _ = run_spec(path)
    assert outcome.by_status == {"ok": 2}
    assert (tmp_path / "entry-point.log").read_text().split() == ["5:1", "7:2"]


def test_bad_entry_point_is_refused_before_the_sweep(write_spec):
    spec = load_spec(write_spec("""
        [workload]
        command = "true"
        [knobs.level]
        values = [5]
        apply = "hook"
        entry_point = "no_such_module_xyz:f"
        [metrics.t]
        source = "time"
    """))
    with pytest.raises(UnsupportedError, match="entry point 'no_such_module_xyz:f' cannot be loaded"):
        check_machine(spec)


EMU = Path(__file__).resolve().parents[2] / "native" / "emu" / "build"


@pytest.mark.skipif(not (EMU / "libperflearn_emu.so").exists(), reason="native/emu not built")
def test_emulated_latency_is_a_knob(write_spec):
    """The emulate actuator preloads the shim into the workload: 500 µs one way shows in the half round trip
    (large enough to stand out of this VM's 2-30 µs swings of the base ping-pong)."""
    path = write_spec(f"""
        [workload]
        command = "{EMU}/emu_osu_tcp latency --min 8 --max 8 --iters 200 --warmup 20"
        [knobs.latency]
        values = ["0us", "500us"]
        apply = "emulate"
        param = "latency"
        [knobs.overhead]
        values = ["0us"]
        apply = "emulate"
        param = "overhead"
        [metrics.half_rtt]
        source = "regex"
        pattern = '^\\s*8\\s+([0-9.]+)'
        unit = "us"
    """)
    outcome, ds, _ = run_spec(path)
    assert outcome.by_status == {"ok": 2}, outcome
    by = ds.ok().set_index("latency")["half_rtt"]
    added = by["500us"] - by["0us"]
    assert 250 < added < 2000, added  # the wire delay, however busy the machine


def test_emulate_value_errors_are_spec_errors(write_spec):
    from perflearn.errors import SpecError

    with pytest.raises(SpecError, match="knobs.lat"):
        load_spec(write_spec("""
            [workload]
            command = "true"
            [knobs.lat]
            values = ["fast"]
            apply = "emulate"
            param = "latency"
            [metrics.t]
            source = "time"
        """))
    with pytest.raises(SpecError, match="param: expected one of latency, overhead, bandwidth"):
        load_spec(write_spec("""
            [workload]
            command = "true"
            [knobs.lat]
            values = ["1us"]
            apply = "emulate"
            param = "jitter"
            [metrics.t]
            source = "time"
        """, "b.toml"))


@pytest.mark.skipif(not (EMU / "libperflearn_emu.so").exists(), reason="native/emu not built")
def test_inherited_emulation_is_not_passed_to_the_runs(write_spec, monkeypatch):
    """A PERFLEARN_EMU_* left in the shell (an earlier ``export``) would slow every run of a
    sweep, recorded nowhere: the runs get the knobs' emulation only, and the user is told."""
    monkeypatch.setenv("PERFLEARN_EMU_LATENCY", "0.002")
    monkeypatch.setenv("PERFLEARN_EMU_PEERS", "10.0.0.1")
    path = write_spec("""
        [workload]
        command = 'echo latency=${{PERFLEARN_EMU_LATENCY%ns}} peers=${{PERFLEARN_EMU_PEERS:+1}}0'
        shell = true
        [knobs.overhead]
        values = ["1us"]
        apply = "emulate"
        param = "overhead"
        [metrics.latency]
        source = "regex"
        pattern = 'latency=([0-9.]+)'
        [metrics.peers]
        source = "regex"
        pattern = 'peers=([0-9]+)'
    """)
    _, _, warnings = check_machine(load_spec(path))
    assert sum("PERFLEARN_EMU_LATENCY (inherited from the environment) is not passed" in w for w in warnings) == 1
    assert any(w.startswith("PERFLEARN_EMU_PEERS") for w in warnings)
    outcome, ds, _ = run_spec(path)
    assert outcome.by_status == {"ok": 1}, outcome
    run = ds.ok().iloc[0]
    # the knobs' latency (none), and no peers filter: before, the inherited one kept the emulation
    # to sockets of 10.0.0.1, so the run was not slowed at all, silently
    assert run["latency"] == 0 and run["peers"] == 0, run
