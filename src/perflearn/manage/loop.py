"""The control loop: every interval, observe the service, ask the policy, apply.

Between decisions, a service that reports short ticks (the arrival rate of the last
few milliseconds) lets a policy react to a load rise inside the interval
(``Policy.react``); the interval's configuration is then the one in force at its end.

Reliability rules: when the latency stream stalls (no observation for an interval) or
the policy fails, the maximum configuration is applied within that interval and the
reason is recorded; an actuation that fails is recorded and retried next interval,
never silently skipped; when the loop ends, the service is left at maximum. A live
service that exits ends the run, and one that stops answering is measured as late
(module ``live``).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial

import pandas as pd

from perflearn.errors import PerflearnError, RunnerError, Terminated

from .config import ConfigSpace, Configuration
from .policies import learning_label
from .policy import Observation, Policy
from .power import PowerModel
from .simulator import ServerModel


@dataclass
class Measured:
    """One interval as the service reports it."""

    rps: float
    p95: float
    p99: float
    utilisation: float
    power_w: float | None = None  # measured (RAPL) when the service can; else modelled
    host_probe_us: float | None = None  # CPU µs of the host-speed probe's fixed work (hostspeed.py; simulator: SlowHost)
    host_probe_min_us: float | None = None  # its fastest sample in the interval
    # run-queue ms the CFS quota held the service back (cpu.stat, summed over its CPUs; live only, None
    # where the kernel does not say): where the speed level is a quota, the baselines' misses came with it
    throttled_ms: float | None = None
    note: str = ""  # what the service says of the interval's measurement (e.g. requests left unanswered)
    # its place on the load's clock (the service's intervals from 0; None where the service does not say, as the
    # simulator, whose intervals are its calls): the loop labels it by that, not by how many it has read
    index: int | None = None
    # intervals before it the loop fell behind on (measured, never decided on), oldest first, each with its index
    behind: list[Measured] = field(default_factory=list)
    # its rate is not its load's: requests went unseen (the capture lost packets: it reads as a load drop), or
    # other intervals' requests are in it (the wall clock stepped back); not to decide on
    partial: bool = False
    # the latency stream stalled: its rate and latency are unknown (NaN), its usage and power measured
    stalled: bool = False


React = Callable[[float], None]  # called with the arrival rate of each tick inside an interval


class Service:
    """What the loop manages: a simulated server, or a real one through knobs."""

    space: ConfigSpace
    tick_s: float | None = None  # the service reports ticks this long inside an interval (None: it does not)
    speed_is_quota = False  # its speed level is a CFS quota, whose hold (Measured.throttled_ms) policies may read
    horizon: int | None = None  # set by the loop: the first of the service's intervals past the caller's run

    def apply(self, config: Configuration) -> None: ...
    # a stalled interval: Measured(stalled=True) with the usage it measured, or None where it measures nothing;
    # ``react`` is called at every tick before the interval ends
    def observe(self, t: float, react: React | None = None) -> Measured | None: ...
    def close(self) -> None: ...

    def hand_over(self, owner: str) -> None:
        """A turn of ``owner`` begins (``take_turns``). A real service's queue is the one
        there is: the turn inherits it."""


class SimulatedService(Service):
    def __init__(self, server: ServerModel, space: ConfigSpace, loads: list[float], interval_s: float,
                 tick_s: float | None = None):
        self.server, self.space, self.loads, self.interval, self.tick_s = server, space, loads, interval_s, tick_s
        self.config = space.maximum
        self.segments: list[list] | None = None  # (configuration, seconds) of the interval being served
        self.i = 0
        self.owner: str | None = None
        self.backlogs: dict[str, float] = {}  # each owner's queue between its turns

    def hand_over(self, owner):
        """Each policy taking turns keeps its own queue: the host and the trace are shared in
        time, a backlog is not (static at the maximum read 84 % met at 4-s steps, after
        hipster's turns had left it saturated: session 55's audit)."""
        if self.owner is not None:
            self.backlogs[self.owner] = self.server.backlog
        self.server.backlog, self.owner = self.backlogs.get(owner, 0.0), owner

    def apply(self, config):
        if self.segments is not None and config != self.config:
            self.segments.append([config, 0.0])
        self.config = config

    def observe(self, t, react=None):
        load = self.loads[self.i]
        self.i += 1
        if react is None or not self.tick_s:
            out = self.server.step(self.config, load, self.interval)
        else:
            ticks = max(1, round(self.interval / self.tick_s))
            tick = self.interval / ticks
            self.segments = [[self.config, 0.0]]
            for k in range(ticks):
                self.segments[-1][1] += tick
                if k < ticks - 1:  # the last tick ends with the interval: the decision follows
                    react(self.server.tick_rate(load, tick))
            segments, self.segments = [(c, dt) for c, dt in self.segments if dt > 0], None
            out = self.server.step_segments(segments, load)
        return Measured(out["rps"], out["p95"], out["p99"], out["utilisation"],
                        host_probe_us=out.get("host_probe_us"), host_probe_min_us=out.get("host_probe_min_us"))


@dataclass
class IntervalRecord:
    t: float
    offered_rps: float | None
    rps: float
    p95: float
    p99: float
    target: float
    cores: int
    level: float
    predicted: float | None
    utilisation: float  # of the CPU the configuration allows: energy under another power model, afterwards
    power_w: float
    energy_j: float
    changed: bool
    note: str = ""
    reactions: int = 0  # configuration changes inside the interval (the policy reacted to a tick)
    # its configuration ran through it and the interval before: its latency is that
    # configuration's, not a switch's or a backlog the one before left (training data: --where settled)
    settled: bool = False
    # the service's CPU time per request (busy full-speed CPUs / requests/s), as Heimdall
    # follows it; a sweep's is the profile of it (--cost-model), measured the same way
    cpu_us_per_request: float | None = None
    # how fast the machine ran fixed work meanwhile (CPU µs, median and fastest; None in the simulator without a
    # SlowHost): a slow host's misses
    host_probe_us: float | None = None
    host_probe_min_us: float | None = None
    throttled_ms: float | None = None  # the CFS quota's hold on the service in the interval (Measured)
    # the interval's place on the service it ran on (from 0): passes that took turns on one service
    # (``interleaved``) are put back in the order the host ran them
    service_interval: int | None = None


class Controller:
    """One policy's side of the loop: its configuration, its clock (the intervals it has
    run) and its records. ``run`` drives it on a service for some intervals; the
    service's own lifetime (leaving it at maximum, closing it) is the caller's, so one
    service can be handed from one policy's controller to another's (``interleaved``)."""

    def __init__(self, policy: Policy, space: ConfigSpace, interval_s: float, power: PowerModel,
                 log: Callable[[IntervalRecord], None] | None = None):
        self.policy, self.interval, self.power = policy, interval_s, power
        self.config = space.maximum
        # an actuation failed part way (the cpuset written, the quota refused): the service may run
        # neither configuration, so the next decision is applied even when it equals ``config``
        # (a failed quota write left one core for 15 s while "maximum" was recorded and never re-applied)
        self.unsure = False
        # the policy's latency forecast for the configuration in force, made when it chose it: a record's
        # ``predicted`` (policy.predicted after a decision is the next interval's, and was recorded beside
        # this one's p95: on each change, the new configuration's forecast beside the old one's latency)
        self.forecast: float | None = None
        self.records: list[IntervalRecord] = []
        self.log = log  # told each interval as it ends (its record complete): a file that outlives a kill

    def run(self, service: Service, offered: list[float | None], realtime: bool = False, first: int = 0) -> None:
        """``len(offered)`` intervals on ``service`` (``offered``: the rate each was offered,
        None where unknown); ``first``: the service's count of intervals before these. Its
        own configuration is applied first: the interval before was another controller's
        (or none), so the first is never settled."""
        events: list[str] = []
        first_note = []  # the first interval's to say
        try:
            service.apply(self.config)
            self.unsure = False
        except Exception as exc:  # said in the first interval's note, and applied again at its decision
            first_note.append(f"actuation failed: {exc}")
            self.unsure, self.forecast = True, None  # neither configuration's forecast holds
        started = time.monotonic()
        policy, interval_s, power = self.policy, self.interval, self.power

        def react(rps: float) -> None:
            forecast = None  # the maximum forced: no forecast of the policy's
            try:
                new = policy.react(rps, service.tick_s, self.config)
                forecast = policy.predicted
            except Exception as exc:  # as for a decision: never leave the service under-provisioned
                new = service.space.maximum
                events.append(f"policy failed in a tick ({type(exc).__name__}: {exc}): maximum configuration applied")
            if new is None or new == self.config:
                return
            try:
                service.apply(new)
            except Exception as exc:  # tried again at the next tick, or by the interval's decision
                events.append(f"actuation failed in a tick: {exc}")
                self.unsure = True
                return
            events.append(f"reacted at {rps:.0f} req/s: {self.config} -> {new}")
            self.config, self.unsure, self.forecast = new, False, forecast

        reacting = bool(service.tick_s) and policy.reacts
        i = 0
        while i < len(offered):
            if realtime:
                time.sleep(max(0.0, started + (i + 1) * interval_s - time.monotonic()))
            t = (len(self.records) + 1) * interval_s  # the policy's own clock
            note = ""
            events[:] = first_note if i == 0 else []
            service.horizon = first + len(offered)  # a live service keeps later intervals for the next turn
            measured = service.observe(t, react) if reacting else service.observe(t)
            if measured is not None and measured.index is not None and measured.index > first + i:
                # the service's clock went past intervals this run never decided on: each in its place,
                # so that every later interval keeps its own load (read by count, a 6-s stall of the
                # capture left the rest of the pass one interval off)
                said = len(first_note) if i == 0 else 0  # the run's first note goes with its first record
                i = self._passed_over(measured, offered, first, i, events[:said])
                del events[:said]  # a tick's reactions stay with the interval they end in
                if i >= len(offered):  # what was measured lies past this run (the next turn's, or the trace's end)
                    break
                t = (len(self.records) + 1) * interval_s
            reactions = sum(e.startswith("reacted") for e in events)
            config = self.config  # a reaction's, if any
            # its configuration ran through it and the interval before: the record's and the policy's to know
            settled = (i > 0 and not self.records[-1].changed and not self.records[-1].reactions and not reactions
                       and not self.unsure)  # a half-applied configuration ran: neither one's latency
            cost_us, decided = None, False
            if measured is None or measured.stalled:
                # its rate and latency unknown, not 0 (the rate read 0 req/s); nor a configuration's latency
                note = "latency stream stalled: maximum configuration applied"
                new, settled = service.space.maximum, False
                if measured is None:  # nor its usage: charged at full load, an upper bound on its energy
                    measured = Measured(float("nan"), float("nan"), float("nan"), 1.0)
            elif measured.partial:  # as a stall: the policy would follow a load that only looks low (or high)
                note = "maximum configuration applied"
                new, settled = service.space.maximum, False  # nor is it a configuration's latency to learn from
            else:
                power_w = measured.power_w if measured.power_w is not None else power.watts(config, measured.utilisation)
                measured.power_w = power_w
                # no request, no latency (the record's NaN); for control, none was late
                obs = Observation(t, measured.rps, _none_late(measured.p95), _none_late(measured.p99), config,
                                  measured.utilisation, power_w, settled, measured.host_probe_us,
                                  measured.throttled_ms if service.speed_is_quota else None)
                cost_us = obs.busy / obs.rps * 1e6 if obs.rps > 0 else None
                try:
                    new = policy.decide(obs)
                    note, policy.remark = policy.remark, ""
                    decided = True
                except Exception as exc:  # a model that fails must not leave the service under-provisioned
                    note = f"policy failed ({type(exc).__name__}: {exc}): maximum configuration applied"
                    new = service.space.maximum
            self._append(t, offered[i], measured, config, self.forecast, new != config,
                         [*events, measured.note, note], reactions, settled, cost_us, first + i)
            # the forecast for what runs next: the policy's, when it decided (not when the maximum was forced)
            self.forecast = policy.predicted if decided else None
            if new != config or self.unsure:
                try:
                    service.apply(new)
                    self.config, self.unsure = new, False
                except Exception as exc:  # applied again at the next decision, whatever it is
                    self.unsure, self.forecast = True, None
                    self.records[-1].changed = False  # a change that did not happen is not counted as one
                    self.records[-1].note = (self.records[-1].note + "; " if self.records[-1].note else "") + \
                        f"actuation failed: {exc}"
            if self.log is not None:
                self.log(self.records[-1])
            i += 1

    def _append(self, t: float, offered_rps: float | None, measured: Measured, config: Configuration,
                predicted: float | None, changed: bool, notes: list[str], reactions: int = 0, settled: bool = False,
                cost_us: float | None = None, service_interval: int | None = None) -> None:
        if measured.power_w is None:
            measured.power_w = self.power.watts(config, measured.utilisation)
        self.records.append(IntervalRecord(
            t, offered_rps, measured.rps, measured.p95, measured.p99, self.policy.target,
            config.cores, config.level, predicted, measured.utilisation, measured.power_w,
            measured.power_w * self.interval, changed, "; ".join(filter(None, notes)), reactions, settled, cost_us,
            measured.host_probe_us, measured.host_probe_min_us, measured.throttled_ms, service_interval))

    def _passed_over(self, measured: Measured, offered: list[float | None], first: int, i: int,
                     events: list[str]) -> int:
        """Record the intervals from the run's ``i``-th up to the one ``measured`` holds, which
        the loop never decided on (it fell behind), with the configuration in force: their
        measurement where the service has it (``measured.behind``), else none (no latency:
        a miss where it was offered load). The run's position after them."""
        by_index = {m.index: m for m in measured.behind}
        while first + i < measured.index and i < len(offered):
            got = by_index.get(first + i)
            note = "the loop fell behind: measured, not decided on" if got else \
                "the loop fell behind: neither measured nor decided on"
            if got is None:  # its rate unknown, not 0
                got = Measured(float("nan"), float("nan"), float("nan"), measured.utilisation)
            self._append((len(self.records) + 1) * self.interval, offered[i], got, self.config, self.forecast, False,
                         [*events, got.note, note], service_interval=first + i)
            events = []
            if self.log is not None:
                self.log(self.records[-1])
            i += 1
        return i

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(r) for r in self.records])


def control_loop(policy: Policy, service: Service, intervals: int, interval_s: float, power: PowerModel,
                 offered: list[float] | None = None, realtime: bool = False,
                 log: Callable[[IntervalRecord], None] | None = None) -> pd.DataFrame:
    """Run ``policy`` on ``service`` for ``intervals``; one record per interval. The
    configuration, power and energy of an interval are those in force at its end: an
    interval in which the policy reacted is charged its later (larger) configuration
    throughout, which never flatters the policy. ``log``: told each record as it is made."""
    controller = Controller(policy, service.space, interval_s, power, log)
    try:
        controller.run(service, list(offered[:intervals]) if offered else [None] * intervals, realtime)
    finally:
        _leave(service)
    return controller.frame()


LEAVE_TRIES = 3  # a write to the maximum that failed (a parent cgroup's limit for a moment) is tried again
LEAVE_WAIT_S = 0.2


class LeaveFailed(PerflearnError):
    """The service could not be put back at its maximum configuration after a pass."""


def _leave(service: Service) -> None:
    """Leave the service at maximum, and close it. A failed write is tried again, then
    ``LeaveFailed``: raised after the pass it ends is kept (it lost a finished pass from the
    store, session 58's audit)."""
    try:
        for attempt in range(LEAVE_TRIES):
            try:
                service.apply(service.space.maximum)
                return
            except PerflearnError as exc:
                if attempt == LEAVE_TRIES - 1:
                    raise LeaveFailed(f"could not put the service back at its maximum configuration "
                                      f"({LEAVE_TRIES} tries): {exc.message}") from None
                time.sleep(LEAVE_WAIT_S)
    finally:
        service.close()


def _leave_after(service: Service) -> LeaveFailed | None:
    """``_leave``; its failure returned: raised once the intervals are kept where the run
    ended, said with the exception that stopped it where one did."""
    try:
        _leave(service)
    except LeaveFailed as exc:
        return exc
    return None


def interleaved_loads(offered: list[float], slot: int, turns: int, handover: int = 0) -> list[float]:
    """The load a service is offered when ``turns`` policies take turns on one trace:
    each slot of ``slot`` intervals of ``offered``, ``turns`` times over, every turn but the
    first after ``handover`` intervals at the load of the trace's interval before its first
    (``take_turns``)."""
    loads: list[float] = []
    for start in range(0, len(offered), slot):
        for turn in range(turns):
            if loads:
                loads += [offered[max(start - 1, 0)]] * handover
            loads += offered[start:start + slot]
    return loads


def interleaved(policies: dict[str, Policy], service: Service, offered: list[float], slot: int, interval_s: float,
                power: PowerModel, realtime: bool = False, handover: int = 0) -> dict[str, pd.DataFrame]:
    """Every policy on one trace and one service, taking turns (``take_turns``); each
    policy's intervals."""
    controllers = {n: Controller(p, service.space, interval_s, power) for n, p in policies.items()}
    take_turns(controllers, service, offered, slot, realtime, handover)
    return {n: c.frame() for n, c in controllers.items()}


class _Hold(Policy):
    """A configuration held whatever is measured: a turn's hand-over (``take_turns``)."""

    name = "hand-over"

    def __init__(self, config: Configuration, space: ConfigSpace, target_s: float, max_rps: float):
        super().__init__(space, target_s, max_rps)
        self.config = config

    def decide(self, obs: Observation) -> Configuration:
        return self.config


def take_turns(controllers: dict[str, Controller], service: Service, offered: list[float], slot: int,
               realtime: bool = False, handover: int = 0) -> None:
    """The controllers on one trace and one service, taking turns: the trace is cut in
    slots of ``slot`` intervals (a step of the seed's profile), and each slot is run by
    every controller in turn, the order rotated by one from one slot to the next (so none
    always follows the same one); ``service`` must be offered ``interleaved_loads`` (with
    the same ``handover``). Each policy keeps its own state and clock across its turns.
    Why: passes one after another met different hosts. Live, a slow phase of the host
    lasts minutes, as long as a pass: in session 33 static missed 45 times in a pass 81 %
    slow and never in one 45 % slow, and the ranking followed which passes met one
    (bench/manage.md, session 34). Taking turns within every step spreads a phase over
    every policy; the comparison is paired in time.

    ``handover``: every turn but the first begins after this many intervals, recorded in
    no pass, at the incoming policy's own configuration and at the load of the trace's
    interval before the turn's first, which is where that policy would be running alone.
    So a turn starts as a pass alone would, and meets its step at its first interval.
    Why: live, the hand-over from another policy's configuration was a cost no pass alone
    pays. A cpuset cut from two CPUs to one makes memcached's CPU time per request jump
    for a second or two, and a lean configuration then saturates. heimdall-cheapest
    missed 10 of 44 second intervals after a hand-over that cut cores, against 9 of 1 319
    one-core intervals held (bench/manage.md, session 64). Without it (0, the simulator,
    where a hand-over costs nothing) a step a policy does not open has already reached
    the service, under another policy, when its turn begins.
    The records taken so far stay in the controllers when it is interrupted."""
    names = list(controllers)
    done = 0
    try:
        for k, start in enumerate(range(0, len(offered), slot)):
            chunk = offered[start:start + slot]
            turn = k % len(names)
            for name in names[turn:] + names[:turn]:
                service.hand_over(name)
                if handover and done:
                    _hand_over(controllers[name], service, [offered[max(start - 1, 0)]] * handover, realtime, done)
                    done += handover
                controllers[name].run(service, chunk, realtime, first=done)
                done += len(chunk)
    finally:
        left = _leave_after(service)
    if left is not None:  # every turn ran: the caller keeps them (``comparison``), then says why it ended
        raise left


def _hand_over(incoming: Controller, service: Service, loads: list[float], realtime: bool, first: int) -> None:
    """``incoming``'s configuration held on ``service`` for ``len(loads)`` intervals, by a
    controller of its own whose records are dropped."""
    policy = incoming.policy
    holding = Controller(_Hold(incoming.config, service.space, policy.target, policy.max_rps), service.space,
                         incoming.interval, incoming.power)
    holding.config = incoming.config
    holding.run(service, loads, realtime, first=first)


def passes(policy: Policy, name: str, new_service: Callable[[str], Service], intervals: int, interval_s: float,
           power: PowerModel, offered: list[float] | None = None, realtime: bool = False,
           learning_only: bool = False, log: Callable[[str, IntervalRecord], None] | None = None
           ) -> Iterator[tuple[str, pd.DataFrame, bool]]:
    """(label, intervals, complete) of each pass over the trace, as it ends: first the
    ``policy.learning_iterations`` it learns from (Hipster's learning phase, labelled
    ``learning_label(name)``), then the evaluated one (``name``; not with
    ``learning_only``), each on a fresh service from ``new_service(label)``. Learning is
    reported as its own row, not hidden. A pass interrupted (Ctrl-C, the service or the
    load generator ended) comes out with the intervals it ran, marked incomplete, before
    the exception goes on: they were lost from the store."""
    loads = list(offered[:intervals]) if offered else [None] * intervals
    for label in [learning_label(name)] * policy.learning_iterations + ([] if learning_only else [name]):
        controller = Controller(policy, policy.space, interval_s, power, None if log is None else partial(log, label))
        service = new_service(label)
        complete = False
        try:
            controller.run(service, loads, realtime)
            complete = True
        finally:
            left = _leave_after(service)
            if not complete and controller.records:
                frame = _stopped(controller.frame(), sys.exc_info()[1])
                if left is not None:
                    frame.attrs["stopped"] += f"; and {left.message}"
                yield label, frame, False  # then the exception goes on
        yield label, controller.frame(), True
        if left is not None:  # the pass ran to its end and is kept; the run ends here, saying why
            raise left


def _stopped(frame: pd.DataFrame, exc: BaseException | None, ran_last: bool = True) -> pd.DataFrame:
    """``frame``, a pass cut short by ``exc``, with why in ``frame.attrs["stopped"]`` (its
    failed run's error in the store: it said "cut short" whatever stopped it). ``ran_last``:
    its last interval is the service's last (of passes taking turns, one is)."""
    after = f"after {len(frame)} intervals"
    if isinstance(exc, Terminated):
        why = f"{exc.why} {after}"  # "hung up" after a SIGHUP
    elif isinstance(exc, KeyboardInterrupt):
        why = f"interrupted {after}"
    elif isinstance(exc, PerflearnError):
        why = f"{exc.message} ({after})"
        if isinstance(exc, RunnerError) and len(frame) and ran_last:  # the service or the load ended: found at the next
            # interval, so the last one recorded may hold its start (426 req/s of 6 400 read as met, unsaid)
            last = frame.index[-1]
            said = "the pass ended after this interval (the service or the load generator ended): it may be partial"
            frame.loc[last, "note"] = "; ".join(filter(None, [frame.loc[last, "note"], said]))
    else:
        why = f"cut short {after}" if exc is None else f"{type(exc).__name__}: {exc} ({after})"
    frame.attrs["stopped"] = why
    return frame


def comparison(policies: dict[str, Policy], new_service: Callable[..., Service], offered: list[float],
               interval_s: float, power: PowerModel, slot: int | None = None,
               log: Callable[[str, IntervalRecord], None] | None = None, handover: int = 0
               ) -> Iterator[tuple[str, pd.DataFrame, float, bool]]:
    """(label, intervals, wall seconds, complete) of every pass of a comparison, as each
    ends, in the order of ``policies``. Without ``slot``: each policy's passes
    (``passes``), one after another; one interrupted comes out with its intervals so far,
    marked incomplete.
    With it: only the learning passes so, then the evaluated passes taking turns on one
    service, ``new_service("interleaved", loads)`` offered ``interleaved_loads``
    (``take_turns``, each turn after ``handover`` intervals). Those end together and
    share one wall time; interrupted, each policy's intervals so far come out marked
    incomplete before the exception goes on, since the run in flight is then every
    policy's. ``log(label, record)``: told every
    interval of every pass as it ends, so a comparison killed outright (nothing after it
    runs) still has them somewhere (``IntervalCsv``)."""
    for name, policy in policies.items():
        started = time.monotonic()
        for label, frame, complete in passes(policy, name, new_service, len(offered), interval_s, power, offered,
                                             learning_only=slot is not None, log=log):
            yield label, frame, time.monotonic() - started, complete
            started = time.monotonic()
    if slot is None:
        return
    started = time.monotonic()
    shared = new_service("interleaved", interleaved_loads(offered, slot, len(policies), handover))
    controllers = {n: Controller(p, shared.space, interval_s, power, None if log is None else partial(log, n))
                   for n, p in policies.items()}
    complete, left = False, None
    try:
        take_turns(controllers, shared, offered, slot, handover=handover)
        complete = True
    except LeaveFailed as exc:  # every turn ran: the passes are complete; the run ends after they are kept
        complete, left = True, exc
    finally:  # interrupted too: the turns taken are not lost
        wall = time.monotonic() - started
        stopped = sys.exc_info()[1]
        newest = max((c.records[-1].service_interval or 0 for c in controllers.values() if c.records), default=0)
        for name, controller in controllers.items():
            if controller.records:
                frame = controller.frame()
                last = controller.records[-1].service_interval == newest  # whose turn it was
                yield name, frame if complete else _stopped(frame, stopped, last), wall, complete
    if left is not None:
        raise left


def _none_late(latency: float) -> float:
    return 0.0 if math.isnan(latency) else latency


def summarize(frame: pd.DataFrame, static_energy_j: float | None = None) -> dict[str, float]:
    """QoS guarantee (% of intervals at or under target), tardiness (mean p95/target over
    violating intervals with a p95; 1 when none missed, NaN when no miss had one), energy
    and its reduction against static, configuration changes. QoS is over the intervals that
    had requests or were offered some: one with neither (a live trace's 0 % step) has no latency to meet a target with (recorded as 0
    before session 46, as met); one offered load that answered none (the service stopped,
    the latency stream stalled) missed it, whatever its p95 (they were left out, unsaid); so
    did one of unknown rate (a stall) unless it is known to have been offered none."""
    nothing = pd.Series(float("nan"), index=frame.index)
    rps, offered = (pd.to_numeric(frame.get(c, nothing), errors="coerce") for c in ("rps", "offered_rps"))  # None: NaN
    asked = (rps > 0) | (offered > 0) | (rps.isna() & offered.isna())
    valid = frame[asked]
    met = valid["p95"] <= valid["target"]  # NaN is no p95: not met
    violating = valid[~met & valid["p95"].notna()]
    energy = float(frame["energy_j"].sum())
    return {
        "qos_guarantee": float(met.mean() * 100) if len(valid) else float("nan"),
        # misses none of which had a latency (stalls): unknown, not the 1.0 of none missed
        "qos_tardiness": float((violating["p95"] / violating["target"]).mean()) if len(violating) else
        1.0 if met.all() else float("nan"),
        "energy_j": energy,
        # nothing to compare with (a profile run alone): not known, not 0
        "energy_reduction": float((1 - energy / static_energy_j) * 100) if static_energy_j else float("nan"),
        "changes": int(frame["changed"].sum() + (frame["reactions"].sum() if "reactions" in frame else 0)),
        "intervals": int(len(frame)),
    }


def energy_under(frame: pd.DataFrame, power: PowerModel) -> pd.DataFrame:
    """The intervals of one policy with power and energy recomputed under another power
    model, from the configuration that ran and its measured utilisation: a live
    comparison priced by any model without running it again (QoS is unchanged)."""
    frame = frame.sort_values("t")
    dt = frame["t"].diff().fillna(frame["t"].iloc[0]).clip(lower=0)
    watts = [power.watts(Configuration(int(r.cores), float(r.level)), float(r.utilisation))
             for r in frame.itertuples(index=False)]
    return frame.assign(power_w=watts, energy_j=[w * d for w, d in zip(watts, dt)])
