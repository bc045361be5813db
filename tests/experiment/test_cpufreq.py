"""The cpufreq actuator: on this machine's kernel, when it has cpufreq; against a
sysfs tree laid out as the kernel lays it out otherwise (VMs have none), and the
one-line refusal when the machine lacks it."""

from __future__ import annotations

import os

import pytest

from perflearn.errors import UnsupportedError
from perflearn.experiment.cpufreq import SYSFS, CpuFreq

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_sets_frequency_and_restores_governor(tmp_path, cpufreq_tree):
    freq = CpuFreq([0, 1], cpufreq_tree(tmp_path))
    assert freq.frequencies_khz == [800000, 1600000, 2400000]
    assert freq.nearest_khz(0.6) == 1600000 and freq.nearest_khz(1.0) == 2400000
    freq.set_khz(freq.nearest_khz(0.3), [1])
    d = tmp_path / "cpu1" / "cpufreq"
    assert (d / "scaling_governor").read_text() == "userspace" and (d / "scaling_setspeed").read_text() == "800000"
    assert (tmp_path / "cpu0" / "cpufreq" / "scaling_governor").read_text().strip() == "performance"  # untouched
    freq.restore()
    assert (d / "scaling_governor").read_text() == "performance"


def test_no_userspace_governor_is_said(tmp_path, cpufreq_tree):
    with pytest.raises(UnsupportedError, match="no userspace governor"):
        CpuFreq([0], cpufreq_tree(tmp_path, governors="performance powersave"))


def test_intel_pstate_lists_no_frequencies(tmp_path, cpufreq_tree):
    root = cpufreq_tree(tmp_path, cpus=(0,), frequencies="")
    (root / "cpu0" / "cpufreq" / "cpuinfo_min_freq").write_text("800000")
    (root / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text("3200000")
    freq = CpuFreq([0], root)
    assert freq.frequencies_khz[0] == 800000 and freq.max_khz == 3200000 and len(freq.frequencies_khz) > 10


def test_this_machine():
    cpu = min(os.sched_getaffinity(0))
    if (SYSFS / f"cpu{cpu}" / "cpufreq").is_dir():
        try:
            CpuFreq([cpu])
        except UnsupportedError as exc:
            assert "governor" in exc.message or "frequencies" in exc.message
    else:
        with pytest.raises(UnsupportedError, match=r"no cpufreq on this machine \(.*cpufreq does not exist\)"):
            CpuFreq([cpu])


def test_spec_with_cpufreq_knob_is_refused_before_the_sweep_without_cpufreq(tmp_path):
    from perflearn.experiment.spec import load_spec

    if (SYSFS / "cpu0" / "cpufreq").is_dir():
        pytest.skip("this machine has cpufreq")
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nname = "f"\n[workload]\ncommand = "true"\n'
                    '[knobs.mhz]\nvalues = [1200, 2400]\napply = "cpufreq"\n[metrics.t]\nsource = "time"\n')
    from perflearn.runner.runner import check_machine

    with pytest.raises(UnsupportedError, match=r"knob mhz \(apply = cpufreq\): no cpufreq on this machine"):
        check_machine(load_spec(spec))
