"""The simulator's slow host: spells of a slower host, as this project's VM had, read
by a simulated host-speed probe, and the comparison run on it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from perflearn.cli import app
from perflearn.learn.knee import knee_doubts, load_knee
from perflearn.manage.compare import load_sweep, profile, profile_model, qos_from_knee
from perflearn.manage.config import ConfigSpace
from perflearn.manage.hostspeed import slow_flags
from perflearn.manage.simulator import SLOW_CPU, SLOW_LATENCY, ServerModel, SlowHost

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

SPACE = ConfigSpace.make(3, 4)


def flags(server: ServerModel, intervals: int) -> np.ndarray:
    """1.0 for each interval served on a slow host, 0.0 on a fast one."""
    slow = []
    for _ in range(intervals):
        server.step(SPACE.maximum, 1000.0, 1.0)
        slow.append(float(server.slow))
    return np.array(slow)


@pytest.mark.parametrize("share, persistence", [(0.1, 0.3), (0.5, 0.3), (0.8, 0.6)])
def test_the_host_is_slow_its_share_of_intervals_in_spells_as_persistent_as_asked(share, persistence):
    slow = flags(ServerModel(seed=4, host=SlowHost(share, persistence)), 20_000)
    assert abs(slow.mean() - share) < 0.02
    assert abs(np.corrcoef(slow[:-1], slow[1:])[0, 1] - persistence) < 0.04


def test_a_slow_interval_serves_slower_and_the_probe_says_so():
    """The same load and configuration on a fast and on a slow host: utilisation up by
    the CPU factor, p95 up by more than the host's latency factor, the probe's median up
    by its ratio; its fastest sample not."""
    server = ServerModel(seed=1, noise=0.0, host=SlowHost(0.5, spread=0.0))
    config = SPACE.maximum
    load = 0.5 * server.capacity(config)  # half of the fast host's capacity
    out = {}
    while len(out) < 2:
        step = server.step(config, load, 1.0)
        out.setdefault(bool(server.slow), step)
    fast, slow = out[False], out[True]
    assert slow["utilisation"] == pytest.approx(fast["utilisation"] * SLOW_CPU)
    assert slow["p95"] > fast["p95"] * SLOW_LATENCY  # the host's own factor, and a slower queue
    assert slow["host_probe_us"] > 1.4 * fast["host_probe_us"]
    assert abs(slow["host_probe_min_us"] / fast["host_probe_min_us"] - 1) < 0.1
    # the manager's own reading of the probe finds the slow interval
    frame = pd.DataFrame([fast, slow])
    assert slow_flags({"pass": frame})["pass"].tolist() == [0.0, 1.0]


def test_without_a_slow_host_nothing_changes():
    """No host: no probe, and every number as before (the host has its own random stream)."""
    plain, hosted = ServerModel(seed=2), ServerModel(seed=2, host=SlowHost(0.0))
    a = [plain.step(SPACE.maximum, 20_000.0, 1.0) for _ in range(50)]
    b = [hosted.step(SPACE.maximum, 20_000.0, 1.0) for _ in range(50)]
    assert "host_probe_us" not in a[0] and "host_probe_us" in b[0]
    assert [x["p95"] for x in a] == [x["p95"] for x in b]


def test_a_profile_on_a_slow_host_gives_heimdall_a_model_that_knows_the_host():
    server = ServerModel(seed=0, host=SlowHost(0.5))
    samples = profile(server, SPACE, 30_000, fractions=np.linspace(0.1, 0.9, 5), intervals=6)
    assert samples["host_probe_us"].notna().all()
    model = profile_model(samples)
    assert "host_probe_us" in model.model.schema.features
    fast, slow = samples["host_probe_us"].min(), samples["host_probe_us"].max()
    grid = pd.DataFrame({"cores": [2, 2], "level": [0.5, 0.5], "rps": [10_000.0, 10_000.0], "host_probe_us": [fast, slow]})
    (at_fast, at_slow), _ = model(grid)
    assert at_slow > at_fast
    # no reading: the slowest host profiled, never a fast one
    unknown, _ = model(grid.drop(columns="host_probe_us").iloc[[0]])
    assert unknown[0] == pytest.approx(model(grid.iloc[[1]])[0][0])


def test_simulated_comparison_on_a_slow_host_cli(tmp_path):
    result = CliRunner().invoke(app, ["manage", "--simulate", "--slow-host", "0.4", "--cores", "2", "--levels", "4",
                                      "--step-seconds", "10", "-p", "static", "-p", "heimdall-cheapest",
                                      "--host-quantile", "0.5", "--csv", str(tmp_path / "i.csv")])
    assert result.exit_code == 0, result.output
    share = float(result.output.split("host slow in ")[1].split("%")[0])
    assert 20 <= share <= 60
    intervals = pd.read_csv(tmp_path / "i.csv")
    assert intervals["host_probe_us"].notna().all()
    # every pass met the same host, interval by interval: a paired comparison
    by = {p: f["host_probe_us"].to_numpy() for p, f in intervals.groupby("policy")}
    assert np.array_equal(by["static"], by["heimdall-cheapest"])


def test_slow_host_bad_flags():
    def error(*args: str) -> str:
        result = CliRunner().invoke(app, ["manage", *args])
        assert result.exit_code != 0 and "Traceback" not in result.output
        return " ".join(result.output.split())

    assert "--slow-host: a share of the intervals in [0, 1], got 1.5" in error("--simulate", "--slow-host", "1.5")
    assert "--slow-host: a share" in error("--simulate", "--slow-host", "nan")
    assert "--slow-host: the simulator's host" in error("--service", "memcached -p {port}", "--slow-host", "0.3")
    assert "the simulator takes one quantile" in error("--simulate", "-p", "heimdall", "--host-quantile", "q=0.5")


def test_a_knee_found_in_saturation_on_a_slow_host_is_taken_before_the_jump():
    # seed 8 at 50 % slow: kneedle's knee lies past a 10x jump of p95 (8.5 ms, where the load before had 0.84 ms;
    # seed 1 at 70 % had it until session 57 let each request wait for the queue it found, not the one left)
    sweep = load_sweep(ServerModel(mu_max=12000, base_s=100e-6, seed=8, host=SlowHost(0.5)), SPACE)
    load, p95 = sweep["rps"].to_numpy(), sweep["p95"].to_numpy()
    saturated = load_knee(load, p95)
    assert knee_doubts(load, p95, saturated)  # the case: perflearn knee would warn
    target, max_rps = qos_from_knee(sweep)
    assert target < saturated.y / 3 and max_rps < 0.95 * saturated.x
    before = load[load < saturated.x].max()  # the last load before the jump
    assert max_rps == pytest.approx(0.95 * before) and target == pytest.approx(p95[load == before][0])
    # without a slow host there is no jump, and the knee is kneedle's
    fast = load_sweep(ServerModel(mu_max=12000, base_s=100e-6, seed=1), SPACE)
    knee = load_knee(fast["rps"].to_numpy(), fast["p95"].to_numpy())
    assert qos_from_knee(fast) == pytest.approx((knee.y, 0.95 * knee.x))
