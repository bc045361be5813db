"""Designs: counts, constraints, seeds, repeats and order."""

from __future__ import annotations

import pytest

from perflearn.errors import SpecError
from perflearn.experiment.design import plan, points
from perflearn.experiment.spec import parse_spec

pytestmark = pytest.mark.parallel  # computes only: `make test` runs it on every core at once

BASE = """
[workload]
command = "echo {a} {b}"
[knobs.a]
@A@
[knobs.b]
@B@
[metrics.t]
source = "time"
[design]
@D@
"""


def spec(a="values = [1, 2, 3]", b='categorical = ["x", "y"]', design=""):
    return parse_spec(BASE.replace("@A@", a).replace("@B@", b).replace("@D@", design))


def test_factorial_counts_and_repeats():
    runs = plan(spec(design="repeat = 3"))
    assert len(runs) == 3 * 2 * 3
    assert len({r.point_id for r in runs}) == 6
    assert sorted((r.point_id, r.rep) for r in runs) == [(p, r) for p in range(1, 7) for r in range(3)]
    assert [r.seq for r in runs] == list(range(18))


def test_constraints_drop_points():
    chosen = points(spec(a="range = [1, 8]\nstep = 1", design='constraints = ["a * 2 < 7", "b != \'y\' or a == 1"]'))
    assert chosen == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 3, "b": "x"}]


def test_constraint_that_removes_everything():
    with pytest.raises(SpecError, match="no point left"):
        points(spec(design='constraints = ["a > 100"]'))


def test_random_order_is_seeded_and_a_permutation():
    first = plan(spec(design='repeat = 2\norder = "random"\nseed = 5'))
    again = plan(spec(design='repeat = 2\norder = "random"\nseed = 5'))
    other = plan(spec(design='repeat = 2\norder = "random"\nseed = 6'))
    key = lambda runs: [(r.point_id, r.rep) for r in runs]
    assert key(first) == key(again)
    assert key(first) != key(other)
    assert sorted(key(first)) == sorted(key(plan(spec(design="repeat = 2"))))


def test_lhs_is_stratified_and_in_domain():
    s = spec(a="range = [0.0, 1.0]", b="log_range = [1.0, 1024.0]", design='kind = "lhs"\nsamples = 20\nseed = 1')
    chosen = points(s)
    assert len(chosen) == 20
    a = sorted(p["a"] for p in chosen)
    # one value in each twentieth of [0, 1): the Latin hypercube property
    assert [int(v * 20) for v in a] == list(range(20))
    assert all(1.0 <= p["b"] <= 1024.0 for p in chosen)
    assert points(s) == chosen  # seeded


def test_random_design_respects_constraints_and_integers():
    s = spec(a="range = [1, 100]", design='kind = "random"\nsamples = 30\nseed = 2\nconstraints = ["a % 2 == 0"]')
    chosen = points(s)
    assert len(chosen) == 30
    assert all(isinstance(p["a"], int) and p["a"] % 2 == 0 and 1 <= p["a"] <= 100 for p in chosen)


def test_unsatisfiable_sampling_stops_with_an_error():
    s = spec(a="range = [1.0, 2.0]", design='kind = "random"\nsamples = 3\nconstraints = ["a > 5"]')
    with pytest.raises(SpecError, match="could draw only 0 of 3"):
        points(s)


def test_log_range_levels():
    s = spec(a="log_range = [4096, 1048576]", design="")
    assert [p["a"] for p in points(s) if p["b"] == "x"] == [4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]


def test_list_design_fills_defaults():
    s = spec(b='categorical = ["x", "y"]\ndefault = "y"', design='kind = "list"\npoints = [{a = 2}, {a = 3, b = "x"}]')
    assert points(s) == [{"a": 2, "b": "y"}, {"a": 3, "b": "x"}]


def test_sampling_a_finite_space_draws_each_configuration_once():
    """random/lhs over discrete knobs drew (2, "x") three times as three points of one run
    each; 100 samples of a 6-configuration space were planned."""
    for kind in ("random", "lhs"):
        chosen = points(spec(design=f'kind = "{kind}"\nsamples = 6\nseed = 3'))
        assert len(chosen) == 6 and len({(p["a"], p["b"]) for p in chosen}) == 6
    with pytest.raises(SpecError, match="samples = 7, but the knobs have only 6 configurations"):
        points(spec(design='kind = "random"\nsamples = 7'))
