"""Designs choose the points of an experiment; the plan orders their runs.

factorial: every combination of knob levels; random: independent uniform draws;
lhs: a Latin hypercube (scipy.stats.qmc); list: the points the spec names.
Constraints drop points; repeats and a seeded shuffle give the run order.
"""

from __future__ import annotations

import itertools
import json
import math
import random as random_mod
from dataclasses import dataclass
from typing import Any

from perflearn.errors import SpecError

from .knobs import Knob
from .spec import Spec

MAX_DRAWS_PER_SAMPLE = 1000
# More runs than this is a mistake (a step too small, a knob too many), not a sweep: at a
# second a run it is eleven days. Refused before anything is listed, which would take minutes
# and gigabytes (10 million points took 46 s and 6 GB to validate).
MAX_RUNS = 1_000_000


@dataclass(frozen=True)
class PlannedRun:
    seq: int  # position in the run order, 0-based
    point_id: int  # 1-based index of the point in the design
    rep: int  # repetition, 0-based
    values: tuple[tuple[str, Any], ...]

    @property
    def point(self) -> dict[str, Any]:
        return dict(self.values)


def points(spec: Spec) -> list[dict[str, Any]]:
    """The design's points, in design order, constraints applied."""
    knobs = list(spec.knobs.values())
    design = spec.design
    if design.kind == "factorial":
        sizes = [k.domain.count() for k in knobs]
        if math.prod(sizes) > MAX_RUNS:
            raise SpecError(f"the factorial design has {math.prod(sizes):,} points ("
                            + " x ".join(f"{k.name} {n:,}" for k, n in zip(knobs, sizes))
                            + f"), more than {MAX_RUNS:,}: use a larger step, fewer values, or design kind "
                            "random or lhs with samples", where=str(spec.path))
        levels = [k.domain.levels() for k in knobs]
        candidates = [dict(zip((k.name for k in knobs), combo)) for combo in itertools.product(*levels)]
        chosen = [p for p in candidates if _allowed(spec, p)]
    elif design.kind == "list":
        chosen = [dict(p) for p in design.points if _allowed(spec, p)]
    else:
        chosen = _sampled(spec, knobs)
    if not chosen:
        raise SpecError("the design has no point left: every point breaks a constraint", where=str(spec.path))
    return chosen


def _sampled(spec: Spec, knobs: list[Knob]) -> list[dict[str, Any]]:
    from scipy.stats import qmc  # imported here: scipy.stats costs a second at start-up

    design = spec.design
    if all(k.domain.finite for k in knobs):
        size = math.prod(k.domain.count() for k in knobs)
        if size < design.samples:
            raise SpecError(f"design.samples = {design.samples}, but the knobs have only {size} configurations: "
                            "sample fewer, or measure them all with kind = \"factorial\"", where=str(spec.path))
    rng = random_mod.Random(design.seed)
    sampler = qmc.LatinHypercube(d=max(len(knobs), 1), seed=design.seed) if design.kind == "lhs" else None
    out: list[dict[str, Any]] = []
    seen: set[str] = set()  # a configuration drawn again is redrawn: it would be a point of its own, unrepeated
    draws = 0
    while len(out) < design.samples:
        # LHS draws whole batches so that each batch is stratified; rejected points are redrawn.
        needed = design.samples - len(out)
        batch = sampler.random(needed) if sampler else [[rng.random() for _ in knobs] for _ in range(needed)]
        for row in batch:
            point = {k.name: k.domain.from_unit(float(u)) for k, u in zip(knobs, row)}
            key = json.dumps(point, sort_keys=True, default=str)
            if key not in seen and _allowed(spec, point):
                seen.add(key)
                out.append(point)
        draws += needed
        if draws > MAX_DRAWS_PER_SAMPLE * design.samples:
            raise SpecError(f"could draw only {len(out)} of {design.samples} distinct samples that meet the "
                            "constraints", where=str(spec.path))
    return out


def _allowed(spec: Spec, point: dict[str, Any]) -> bool:
    for constraint in spec.design.constraints:
        try:
            verdict = constraint(point)
            if not isinstance(verdict, bool):  # "x + 1" is a number: almost surely a typo for a comparison
                raise SpecError(f"design.constraints: {constraint.source!r} gives {verdict!r} on {point}, "
                                "not true or false", where=str(spec.path))
            if not verdict:
                return False
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            raise SpecError(f"design.constraints: {constraint.source!r} fails on {point}: {exc}",
                            where=str(spec.path)) from None
    return True


def plan(spec: Spec) -> list[PlannedRun]:
    """Every run of the experiment in execution order (deterministic for a spec)."""
    if spec.design.kind in ("random", "lhs") and spec.design.samples > MAX_RUNS:
        raise SpecError(f"design.samples = {spec.design.samples:,} is more than {MAX_RUNS:,} points",
                        where=str(spec.path))
    chosen = points(spec)
    if len(chosen) * spec.design.repeat > MAX_RUNS:
        raise SpecError(f"the plan has {len(chosen) * spec.design.repeat:,} runs ({len(chosen):,} points x "
                        f"{spec.design.repeat} repeats), more than {MAX_RUNS:,}", where=str(spec.path))
    runs = [(pid, rep) for rep in range(spec.design.repeat) for pid in range(1, len(chosen) + 1)]
    if spec.design.order == "random":
        random_mod.Random(spec.design.seed).shuffle(runs)
    else:
        runs.sort()  # all repetitions of a point together, points in design order
    return [
        PlannedRun(seq, pid, rep, tuple(chosen[pid - 1].items()))
        for seq, (pid, rep) in enumerate(runs)
    ]


def point_key(values: dict[str, Any]) -> str:
    """A stable text key of a point, to recognise it across resumes."""
    return json.dumps(values, sort_keys=True, default=list)
