"""SIGKILL the runner at random moments, then resume: every run is stored exactly
once, and each kill loses at most the run that was in flight."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest

from perflearn.store import open_store

SPEC = """
    [workload]
    command = "echo {x} >> @LOG@; sleep 0.05"
    shell = true
    [knobs.x]
    range = [1, 24]
    step = 1
    [metrics.t]
    source = "time"
    [design]
    repeat = 1
    order = "random"
    seed = 4
"""


def start(path, store_path, *extra):
    cmd = [sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "runs planned" in line, line
    return proc


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(write_spec, store_path, tmp_path):
    log = tmp_path / "executions.log"
    path = write_spec(SPEC.replace("@LOG@", str(log)))
    rng = random.Random(20261122)
    kills = 0
    proc = start(path, store_path)
    for _ in range(4):
        time.sleep(rng.uniform(0.05, 0.6))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        proc = start(path, store_path, "--resume")
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert kills >= 2
    with open_store(store_path) as store:
        runs = store.runs("spec")
    assert sorted(runs["point_id"]) == list(range(1, 25))  # every point once, none twice
    assert (runs["status"] == "ok").all()
    executions = log.read_text().split()
    assert set(executions) == {str(x) for x in range(1, 25)}
    assert len(executions) <= 24 + kills  # at most the run in flight is lost per kill


def test_resume_stops_what_a_killed_runner_left_running(write_spec, store_path, tmp_path, alive):
    """A SIGKILLed runner cannot stop its workload; the next run of the same store does,
    so that no measurement overlaps with a leftover."""
    pidfile = tmp_path / "workload.pid"
    path = write_spec(f"""
        [workload]
        command = "echo $$ > {pidfile}; exec sleep 30"
        shell = true
        timeout = "0.2s"
        [metrics.t]
        source = "time"
    """)
    proc = start(path, store_path)
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    orphan = int(pidfile.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert alive(orphan)
    pidfile.unlink()
    resumed = subprocess.run([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q",
                              "--resume"], capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped 1 process group(s) left running by a killed runner" in resumed.stderr
    assert not alive(orphan)


def kill_runner_once(condition: str, mark) -> str:
    """Shell: SIGKILL the runner from its workload the first time ``condition`` holds (``mark`` remembers)."""
    return f"if [ {condition} ] && [ ! -e {mark} ]; then touch {mark}; kill -9 $PERFLEARN_RUNNER_PID; sleep 5; fi"


def test_a_killed_runners_sysctl_is_put_back_by_the_resume(write_spec, store_path, tmp_path):
    """The resumed runner read the killed one's last value as the original, and "restored" that."""
    import os
    from pathlib import Path

    sysctl = Path("/proc/sys/vm/swappiness")
    if not os.access(sysctl, os.W_OK):
        pytest.skip("needs root to write sysctls")
    before = sysctl.read_text().strip()
    path = write_spec(f"""
        [workload]
        command = "{kill_runner_once('{swappiness} = 13', tmp_path / 'killed-once')}"
        shell = true
        [knobs.swappiness]
        values = [11, 13, 17]
        apply = "sysctl"
        key = "vm.swappiness"
        [metrics.t]
        source = "time"
    """)
    first = subprocess.run([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q"],
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == -signal.SIGKILL, first.stderr
    try:
        assert sysctl.read_text().strip() == "13"  # what the killed runner left
        resumed = subprocess.run([sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q",
                                  "--resume"], capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
        assert f"it will be put back to {before}, its value before that runner" in resumed.stderr
        assert sysctl.read_text().strip() == before
    finally:
        sysctl.write_text(before)
    with open_store(store_path) as store:
        assert sorted(store.runs("spec")["point_id"]) == [1, 2, 3]


def test_a_killed_runners_cpu_governor_is_put_back_by_the_resume(write_spec, store_path, tmp_path, cpufreq_tree):
    """A SIGKILLed runner left its CPUs in cpufreq's userspace governor at its last
    frequency (a node's later benchmarks all ran slow); the next runner puts the governor
    back. This machine has no cpufreq: a sysfs tree laid out as the kernel's is mounted
    over CPU 0's in a private mount namespace, where both runners run."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    cpufreq = cpufreq_tree(tmp_path, cpus=(0,)) / "cpu0" / "cpufreq"
    path = write_spec(f"""
        [workload]
        command = "{kill_runner_once('{mhz} = 1600', tmp_path / 'killed-once')}"
        shell = true
        [knobs.mhz]
        values = [800, 1600, 2400]
        apply = "cpufreq"
        cpus = [0]
        [metrics.t]
        source = "time"
    """)

    def run(*extra: str) -> subprocess.CompletedProcess:
        script = (f"mount --bind {tmp_path / 'cpu0'} /sys/devices/system/cpu/cpu0 && exec {sys.executable} -m perflearn "
                  f"run {path} --store {store_path} -q {' '.join(extra)}")
        return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)

    first = run()
    if first.returncode and "mount" in first.stderr:
        pytest.skip(f"cannot mount in a private namespace here: {first.stderr.strip()}")
    assert first.returncode == -signal.SIGKILL, first.stderr
    governor = cpufreq / "scaling_governor"
    assert governor.read_text().strip() == "userspace" and (cpufreq / "scaling_setspeed").read_text() == "1600000"
    resumed = run("--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "cpufreq governor (every CPU) was left at a killed runner's value; it will be put back to 0:performance" \
        in resumed.stderr
    assert governor.read_text().strip() == "performance"
    with open_store(store_path) as store:
        assert sorted(store.runs("spec")["point_id"]) == [1, 2, 3]


def test_a_killed_runners_run_directory_is_removed_by_the_next(write_spec, store_path, tmp_path):
    """Run directories live in /dev/shm (memory until reboot): a SIGKILLed runner's stayed
    there for good. The next runner removes it; directories kept on purpose stay."""
    import os

    root = tmp_path / "runs"
    root.mkdir()
    mark = tmp_path / "killed-once"
    path = write_spec(f"""
        [workload]
        command = "head -c 100000 /dev/zero > {{run_dir}}/big; {kill_runner_once('{x} = 2', mark)}"
        shell = true
        [knobs.x]
        values = [1, 2, 3]
        [metrics.t]
        source = "time"
    """)
    env = {**os.environ, "PERFLEARN_RUN_DIR": str(root)}
    run = [sys.executable, "-m", "perflearn", "run", str(path), "--store", str(store_path), "-q"]
    kept = subprocess.run([*run, "--name", "kept", "--keep-run-dirs"], capture_output=True, text=True, env=env, timeout=60)
    assert kept.returncode == -signal.SIGKILL  # x = 2 killed it: its directories were to be kept
    mark.unlink()
    first = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60)
    assert first.returncode == -signal.SIGKILL, first.stderr
    left = sorted(p.name for p in root.iterdir() if p.name.startswith("perflearn-r"))
    assert len(left) == 1 and (root / left[0] / "big").stat().st_size == 100000
    resumed = subprocess.run([*run, "--resume"], capture_output=True, text=True, env=env, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert "removed 1 run directory(ies) that killed runners left" in resumed.stderr
    assert not [p for p in root.iterdir() if p.name.startswith("perflearn-r")]
    assert len([p for p in root.iterdir() if p.name.startswith("perflearn-k")]) == 2  # x = 1 and the killed x = 2


def test_a_run_directory_someone_holds_is_not_removed(tmp_path):
    """A runner in another PID namespace sharing /dev/shm looks dead from here: its lock keeps its directory."""
    import fcntl
    import os

    from perflearn.runner.execute import remove_dead_run_dirs

    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    run_dir = tmp_path / f"perflearn-r{gone.pid}-1.0-abc"
    run_dir.mkdir()
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], pass_fds=(fd,))
    os.close(fd)  # the other process holds the lock now
    try:
        assert remove_dead_run_dirs(tmp_path) == 0 and run_dir.exists()
    finally:
        holder.kill()
        holder.wait()
    assert remove_dead_run_dirs(tmp_path) == 1 and not run_dir.exists()


def test_originals_are_kept_only_in_a_private_directory(tmp_path, monkeypatch):
    """Another user could plant an "original" a root runner would write back: a directory others may write is refused."""
    from perflearn.experiment.actuators import Sysctl
    from perflearn.experiment.knobs import Domain, Knob
    from perflearn.runner import originals

    shared = tmp_path / "originals"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setattr(originals, "_dir", lambda: shared)
    knob = Knob("swappiness", Domain("values", (10,)), "sysctl", {"key": "vm.swappiness"})
    said = []
    assert originals.take({"swappiness": Sysctl(knob, "x")}, said.append) == []
    assert "is not a directory of this user's alone" in said[0] and not list(shared.iterdir())
    shared.chmod(0o700)
    held = originals.take({"swappiness": Sysctl(knob, "x")}, said.append)
    assert len(held) == 1 and held[0].exists()
    originals.release(held)
    assert not held[0].exists()


def test_a_killed_writers_half_written_original_is_removed(tmp_path, monkeypatch):
    """A runner killed while writing an original left its temporary file for ever."""
    from perflearn.experiment.actuators import Sysctl
    from perflearn.experiment.knobs import Domain, Knob
    from perflearn.runner import originals

    private = tmp_path / "originals"
    monkeypatch.setattr(originals, "_dir", lambda: private)
    private.mkdir(mode=0o700)
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        (private / f"0123456789abcdef.{dead.pid}.tmp").write_text('{"setting": "sysctl vm.swap')
        (private / f"0123456789abcdef.{live.pid}.tmp").write_text("{")  # its writer may still finish it
        knob = Knob("swappiness", Domain("values", (10,)), "sysctl", {"key": "vm.swappiness"})
        held = originals.take({"swappiness": Sysctl(knob, "x")}, print)
        assert sorted(p.name for p in private.iterdir()) == sorted([held[0].name, f"0123456789abcdef.{live.pid}.tmp"])
        originals.release(held)
    finally:
        live.kill()
        live.wait()


def test_a_net_sysctl_has_an_original_per_network_namespace(tmp_path):
    """A net.* sysctl is per network namespace, but one originals file stood for all: a
    runner under `ip netns exec` and one outside took each other's original."""
    import shutil

    if shutil.which("ip") is None or subprocess.run(["ip", "netns", "add", "perflearn-orig-test"]).returncode:
        pytest.skip("cannot add a network namespace here")
    try:
        code = ("from perflearn.experiment.actuators import Sysctl; from perflearn.experiment.knobs import Domain, Knob; "
                "print(*(Sysctl(Knob('k', Domain('values', (1,)), 'sysctl', {'key': key}), 'x').setting() "
                "for key in ('net.core.somaxconn', 'vm.swappiness')), sep='|')").replace("setting()", "key()")
        outside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        inside = subprocess.run(["ip", "netns", "exec", "perflearn-orig-test", sys.executable, "-c", code],
                                capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run(["ip", "netns", "delete", "perflearn-orig-test"])
    net_out, vm_out = outside.split("|")
    net_in, vm_in = inside.split("|")
    prefix = "sysctl net.core.somaxconn in network namespace "
    assert net_out.startswith(prefix) and net_in.startswith(prefix)
    assert net_in != net_out and vm_in == vm_out == "sysctl vm.swappiness\n"  # vm.* is the machine's
