import numpy as np
import pytest

from perflearn.errors import UsageError
from perflearn.learn.knee import find_knee

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once


def test_latency_knee_of_a_hockey_stick():
    load = np.arange(0, 101, 2.0)
    p95 = np.where(load < 60, 1 + 0.01 * load, 1.6 + 0.2 * (load - 60))
    k = find_knee(load, p95)
    assert (k.curve, k.direction) == ("convex", "increasing")
    assert k.x == 60.0


def test_elbow_of_decreasing_inertia():
    ks = np.arange(1, 11)
    inertia = np.array([1000, 420, 90, 80, 72, 65, 60, 56, 52, 49.0])
    k = find_knee(ks, inertia)
    assert (k.curve, k.direction) == ("convex", "decreasing")
    assert k.x == 3


def test_concave_increasing_knee_matches_kneedle_paper():
    # Satopää et al.: y = -1/x + 5 on x in [1, 10]... knee near the sharpest bend
    x = np.linspace(1, 10, 91)
    k = find_knee(x, -1 / x + 5)
    assert k.curve == "concave"
    assert 2.5 <= k.x <= 3.7


def test_explicit_shape_and_unsorted_input():
    x = np.array([5, 1, 3, 2, 4, 6, 7, 8.0])
    y = np.array([1.5, 1.1, 1.3, 1.2, 1.4, 5, 9, 13.0])
    k = find_knee(x, y, curve="convex", direction="increasing")
    assert k.x == 5.0


def test_straight_line_and_flat_have_no_knee():
    x = np.arange(10.0)
    assert find_knee(x, 2 * x + 1) is None
    assert find_knee(x, np.ones(10)) is None


def test_bad_input():
    with pytest.raises(UsageError, match="at least 3 distinct x"):
        find_knee([1, 2], [1, 2])
    with pytest.raises(UsageError, match="differ in length"):
        find_knee([1, 2, 3], [1, 2])
    with pytest.raises(UsageError, match="curve must be"):
        find_knee([1, 2, 3], [1, 2, 3], curve="round")
    with pytest.raises(UsageError, match="sensitivity must be 0 or more"):  # it took the first local maximum
        find_knee([1, 2, 3, 4], [1, 1.1, 1.3, 3], sensitivity=-1)


def test_load_knee_ignores_the_falling_start_and_noise():
    """A measured load-latency curve: latency first falls with load (idle wake-ups),
    then is flat and noisy, then turns up as the server saturates."""
    from perflearn.learn.knee import load_knee

    load = np.arange(1, 17) * 10_000.0
    latency = np.array([220, 150, 100, 95, 104, 96, 101, 98, 103, 110, 125, 160, 260, 480, 900, 1700], dtype=float)
    knee = load_knee(np.repeat(load, 2), np.repeat(latency, 2))
    assert knee is not None and 110_000 <= knee.x <= 140_000, knee
    assert load_knee(load[:6], latency[:6]) is None  # never turns up: no knee, said as None
    # memcached on this project's machine (examples/memcached-knee, medians)
    rate = [5e3, 20e3, 40e3, 60e3, 80e3, 100e3, 120e3, 140e3, 160e3]
    p95 = [691, 230, 167, 170, 212, 651, 585, 777, 893]
    assert load_knee(rate, p95).x == 80e3


def test_load_knee_takes_the_median_of_repeats_as_perflearn_knee_does():
    """Session 52's audit: the CLI took each load's median p95, load_knee its mean (one
    sweep: 121.7 against 125.4). A spike in one repeat now moves neither."""
    from perflearn.learn.knee import load_knee

    loads = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=float)
    p95 = np.array([1.0, 1.0, 1.1, 1.2, 1.5, 3.0, 8.0, 20.0])
    spiked = p95.copy()
    spiked[3] = 50.0  # one repeat of load 4 with a tail spike
    repeats = load_knee(np.repeat(loads, 3), np.column_stack([p95, spiked, p95]).ravel())
    assert repeats == load_knee(loads, p95)


def test_a_noisy_load_that_latency_comes_back_down_from_moves_no_knee():
    """Session 54's audit: one load of 900 µs amid 100 µs up to 30 000 req/s became, in the
    isotonic fit, a plateau of 189 µs over 14 000-30 000, and the knee read 12 000 for 30 000."""
    from perflearn.learn.knee import load_knee, noisy_loads

    rate = np.arange(2, 41, 2) * 1000.0
    p95 = np.where(rate <= 30_000, 100.0, 100.0 + (rate - 30_000) ** 2 / 1e5)
    clean = load_knee(rate, p95)
    spiked = p95.copy()
    spiked[rate == 14_000] = 900.0
    assert clean is not None and load_knee(rate, spiked).x == clean.x >= 28_000
    assert noisy_loads(rate, spiked) == ["load 14000 left out of the knee: its latency 900 comes back down at the "
                                         "loads after it (a noisy load, not saturation)"]
    assert noisy_loads(rate, p95) == []  # saturation does not come back down: never a noisy load


def test_a_knees_index_counts_the_distinct_x_values_not_the_rows():
    """Session 57's audit: Knee.index was documented as a position in the input; it is, as
    load_knee and knee_before_jump use it, the position among the distinct finite x values,
    sorted (a doc fix: the value is as before)."""
    load = np.arange(0, 101, 2.0)
    p95 = np.where(load < 60, 1 + 0.01 * load, 1.6 + 0.2 * (load - 60))
    rows = np.concatenate([[np.nan], load, load])  # a NaN first, every load twice
    k = find_knee(rows, np.concatenate([[1.0], p95, p95]))
    assert k.x == 60.0 and k.index == 30 == int(np.flatnonzero(load == 60)[0])
