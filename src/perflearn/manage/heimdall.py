"""Heimdall: forecast tail latency for every configuration with a model, apply the cheapest
one that meets the target (seed chapter 3.2), and the variants built on it."""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from .config import Configuration
from .experience import Experience, Freshness, load_bucket
from .policy import Policy
from .power import PowerModel


HOST_QUANTILE = 0.95  # Heimdall plans for a host as slow as the recent one was one interval in twenty
# The cheapest rules' CPU headroom: the demand at most this share of a configuration's capacity. It was
# 1 - slack (0.9) until session 67: paired live over eight rounds, 0.95 spent 1.2 ± 0.6 points less
# of static's energy for 1.4 ± 1.9 fewer misses a round (bench/manage.md, session 67).
HEADROOM = 0.95
# a quota that held the service back less than this in an interval did not make its p95: the misses it made
# were held back 12-204 ms, and 98.9 % of the intervals that met the target under 10 (``_speed_missed``)
HELD_MS = 10.0
# below this share of the maximum load the service is idle: a request's CPU time is mostly wake-ups, and a
# configuration's modelled power hardly depends on its speed (``_choose``)
IDLE_SHARE = 0.05
IDLE_POWER = 0.01  # idle, a configuration within this share of the least power is as cheap (``_ready_for_arrival``)


class Heimdall(Policy):
    """Model-based: ``model`` maps a frame (cores, level, rps) to predicted p95 in seconds
    and its spread (mean, spread arrays).

    Refinements over the seed, each documented where it is reported. The seed's rule
    stands for "scale resources down as far as the target allows" (its section 3.3), so
    forecasts are made monotone in resources (``_monotone``) and, of configurations
    forecast equally, the one with the least modelled power is taken. After a
    measured violation the model's forecast was wrong for the present state (a backlog
    it never saw in profiling), so the lowest-latency configuration is applied until the
    latency is back under target (``recover``). The lowest-latency configuration is the
    maximum (most cores, top speed), not the model's argmin: it is needed exactly where
    the model is least to be trusted (loads beyond those profiled, a backlog), and there
    a forest of a saturated service can rank a weak configuration first; and the uncertainty-aware variant
    (``uncertainty_z``) qualifies configurations by prediction + z * spread and, among
    them, takes the one with the least modelled power (``power``) — the cheapest
    configuration predicted to meet the target. ``cheapest`` takes that rule with the
    seed's slack: equation 3.2's highest forecast stands for the fewest resources only
    where resources are ordered; two cores at a quarter and one at half are not, and
    live at 15-30k req/s the rule ran the costlier (bench/manage.md, session 11). Taking
    the cheapest also takes the one nearest saturation, where a forest trained on a few
    loads per configuration cannot see the cliff: live, one core at half speed carried
    30k req/s at 0.95 utilisation, forecast 0.07 ms, measured 0.1 ms in most intervals
    and 1-2 ms in some (session 12). So the cheapest rules also keep CPU headroom: the
    demand (busy full-speed cores) at most ``headroom`` (``HEADROOM``) of a configuration's
    capacity at first, then as much as the misses measured live leave it, per
    configuration (``_learn_room``); where no configuration forecast to meet the target
    has it, the maximum, which has the most (in the simulator at the seed's scale the top
    load needs 93 % of the maximum's capacity, and the forecast alone took three cores at
    0.76 speed there, 80 times over the target; session 24). The demand is the load
    times its CPU cost per request, the median over the last intervals at that
    load (``_demand``: one interval over the others is ignored, two are followed), not one
    interval's: at a steady 7.5k req/s live one core at a quarter measured 0.17-0.25 busy
    CPUs from one second to the next, and the rule flipped between a quarter and half a
    core on that noise (session 15). With a cost model, a configuration's demand is never
    under the one its profile gives it (``_demands``). And the cheapest rules believe a
    measured violation over the model (``_distrust``): a configuration that missed the target at a load it
    was chosen for is not chosen at that load again, nor any with no more capacity
    (cores x speed: two cores at a quarter after one at half missed), for
    ``distrust_intervals`` (doubled with each further miss there). Live, the
    cheapest configuration at a load missed, drained at the maximum, came back and missed
    again a few intervals later (two cores at half at 30k req/s: 3 times in a round of 5,
    twice in another, session 16), and in the simulator a model profiled on a faster
    server sent the rule back to the same missing configurations (83.7 % of intervals met).
    No more capacity, not only no faster (no more speed too, until session 29): near a
    configuration's capacity its speed does not save it. Live at the top load, after two
    cores at 0.375 missed (0.75 CPU), one core at 0.625 or 0.75 ran next and missed too,
    and a miss often drew another at the maximum after it (the backlog, or the host's
    spell): 20 of the 40 misses of session 28's four rounds were at 38k req/s (12 by
    cheaper configurations, 8 at the maximum after them), where static missed 1 of 80
    intervals (bench/manage.md, session 29).

    Online updates (``online``: a weight in (0, 1]): each interval, the error of the
    forecast for the configuration that ran, log(measured / predicted p95), is folded
    into the correction of that load's bucket (a tenth of the maximum load, centred on
    its multiples, where the seed's steps sit) by an exponentially weighted mean whose
    first observations weigh 1/n (its start-up bias removed, as Adam's is), and later
    forecasts of every configuration at loads of that bucket are scaled by it. A model
    profiled under other conditions (another input mix, a neighbour) thus converges to
    the service as it is. The correction is one per load, shared by the configurations,
    because that is how the forest was wrong live: measured / forecast p95 at the top
    load was 2.4 on two cores at half speed and 3.4 at full speed, 0.4-1.2 at 20-80 %
    load on every configuration (bench/manage.md, session 14). A correction per
    configuration (until session 14) corrected only the one that ran, and the next
    decision moved to another whose forecast was still wrong: 17 misses at the top
    step where the uncorrected rule had 7. It is local to its load because a model's
    error is: live, a forest that overpredicted a quarter-speed core 30x at 12k req/s,
    corrected by one factor for every load, sent it 25k-44k req/s and 50-150 ms p95.
    Intervals in recovery from a violation, or in which a reaction changed the
    configuration, are not learned from: a backlog is not the steady state the model
    describes, and an interval of two configurations is the forecast of neither.

    Experience (``experience``, heimdall-experience): at a load where earlier runs (and this
    one, as it goes) saw configurations for at least ``experience.LEAST`` intervals, the
    forecast gives way to what was measured: the configuration of least modelled power +
    ``price`` x its miss share there, the price set at start as the least that keeps the
    share of intervals expected to miss within ``miss_budget`` (module ``experience``).
    Distrust and the learned headroom do not apply there: they treat a miss as news about
    one configuration, where at this machine's top load every configuration cheaper than
    the maximum misses 7-11 % of intervals whatever it is, and trying one after another
    after each miss cost misses and power (bench/manage.md, session 32). Elsewhere the
    rule is heimdall-cheapest's, and so it is everywhere once this run has found the
    experience stale: more misses than its shares make likely (``experience.Freshness``).
    Live, experience of other days expected 6.6 % of misses at the top load and the rule
    went back to the configuration after each miss while it missed 5 of 13.

    Following the service's cost (``cost_model``: the CPU time per request the service
    took when it was profiled, by configuration and load): a service whose requests now
    take k times the CPU they took then is, as a queue, the profiled one at k times the
    load with time running k times slower (scale every service time by k and the
    arrivals' rate by 1/k, and the process is the same one on a clock k times slower).
    So its latency at load r is forecast as k x model(k r), where k is the median of
    measured / profiled CPU time per request over the last ``cost_window`` steady,
    unsaturated intervals above a twentieth of the maximum load (below it, idle wake-ups
    dominate a request's CPU time). Live, memcached's CPU time per request rose from 16.5 to 21 µs
    over an evening, the forest still forecast its profile, and the cheapest rule fell
    from 99 % to 80 % of intervals met (bench/manage.md, session 21); the online
    correction only learns where a forecast has already failed. k is never below 1: a
    service measured cheaper than its profile keeps the profile's forecasts, because the
    two measures differ by method as well (a profiling run's CPU time over its requests,
    against an interval's), and an error there is a saving missed, not a target missed.

    Following a ramp (``ramp``): when each of the last two intervals' loads rose beyond
    its noise, the next interval is sized for the last load plus its rise, not the last
    load. Sized for the interval before, every rule was an interval behind a fast ramp:
    on the simulator's diurnal trace at 4-s steps (the load up 11-20 % a second) the
    cheapest rule met 88.5 % of intervals over 10 seeds, below ondemand's 96.0 %; it meets
    97.5 % now, for less energy (bench/manage.md, session 56). A step rises once, and the
    50-s traces rise by 1-2 % a second, under the noise: their tables did not move.

    Planning for the host (a model trained with ``host_probe_us``, the host-speed probe
    a sweep records each interval): forecasts are made for the host the next interval
    is likely to meet at worst, the ``host_quantile`` of the probe over the last
    ``host_window`` intervals (``_host``), and the cost model, given the host as well, is
    asked what the service took on a host like the one each interval measured, so k
    follows the service and not the host. Live, the host's speed moves p95 at an
    elasticity of about 1 and CPU time per request at only about 0.35: following the
    cost alone saw a third of a slow host's effect, and heimdall-cheapest missed 10.5 %
    of its intervals on a slow host against 2.7 % on a fast one (bench/manage.md,
    session 35).
    """

    name = "heimdall"

    def __init__(self, *args, model, slack: float = 0.10, uncertainty_z: float | None = None,
                 power: PowerModel | None = None, recover: bool = True, online: float | None = None,
                 react: bool = True, cheapest: bool = False, distrust_intervals: int = 30, cost_model=None,
                 cost_window: int = 20, headroom: float | None = None, room_floor: float = 0.5,
                 room_regain: float = 0.001, experience: Experience | None = None, miss_budget: float = 0.01,
                 host_window: int = 60, host_quantile: float = HOST_QUANTILE, **kwargs):
        super().__init__(*args, **kwargs)
        if online is not None and not 0 < online <= 1:
            raise ValueError(f"online: a weight in (0, 1], got {online}")
        if host_window < 1 or not 0 <= host_quantile <= 1:
            raise ValueError(f"host: a window of at least 1 interval and a quantile in [0, 1], got {host_window}, "
                             f"{host_quantile}")
        self.headroom = HEADROOM if headroom is None else headroom
        if not 0 < self.headroom <= 1:
            raise ValueError(f"headroom: a fraction of the capacity in (0, 1], got {self.headroom}")
        self.model, self.slack, self.z, self.recover, self.online = model, slack, uncertainty_z, recover, online
        self.cost_model = cost_model
        self.slowdowns: deque[float] = deque(maxlen=cost_window)  # measured / profiled CPU time per request
        self.slowdown = 1.0  # k: the service's CPU time per request against its profile's
        # the host's speed lately (the probe's CPU µs per interval), and the quantile of it a decision plans for
        self.hosts: deque[float] = deque(maxlen=host_window)
        self.host_quantile = host_quantile
        self.cheapest = cheapest or uncertainty_z is not None
        self.reacts = react
        self.power = power or PowerModel()
        self.configs = list(self.space)
        self.grid = pd.DataFrame({"cores": [c.cores for c in self.configs], "level": [c.level for c in self.configs]})
        self.capacity = (self.grid["cores"] * self.grid["level"]).to_numpy()  # full-speed cores each can keep busy
        self.fastest = self.configs.index(self.space.maximum)  # fewer cores or less speed is never faster
        self.dominates = np.array([[d.cores >= c.cores and d.level >= c.level for d in self.configs] for c in self.configs])
        self.no_faster = np.array([[c.no_faster_than(d) for d in self.configs] for c in self.configs])
        self.no_more_capacity = self.capacity[:, None] <= self.capacity[None, :] + 1e-9  # [c, d]: c has at most d's
        self.grid_shape = (len(self.space.cores), len(self.space.levels))  # self.configs, cores by levels
        self.buckets = 10  # online corrections: per tenth of the maximum load
        self.correction = np.zeros(self.buckets + 1)  # log(measured / predicted), shared by the configurations
        self.learned = np.zeros(self.buckets + 1, dtype=int)  # intervals folded into each bucket's correction
        self.costs = [deque(maxlen=3) for _ in range(self.buckets + 1)]  # CPU s per request, recent intervals per bucket
        self.distrust_s = distrust_intervals * self.interval if self.cheapest else 0.0
        self.distrusted = np.full((self.buckets + 1, len(self.configs)), -np.inf)  # until when, per load and configuration
        self.misses = np.zeros((self.buckets + 1, len(self.configs)), dtype=int)  # steady misses there so far
        self.switched = False  # a reaction changed the configuration inside this interval
        self.recovering = False
        # the headroom learned live, per configuration (``_learn_room``): cut by a miss, regained while the target is met
        self.room = np.full(len(self.configs), self.headroom)
        self.room_floor, self.room_regain = min(room_floor, self.headroom), room_regain
        self.unit_cost: float | None = None  # CPU s per request, the last interval's that was kept
        self.sized_for = 0.0  # the load the configuration in force was chosen (or confirmed) for
        self.counts: list[float] = []  # this interval's tick request counts
        self.above: float | None = None  # the last tick's rate, when it was over the noise
        self.risen: list[float] = []  # tick rates from the first rise in this interval on
        self.dispersion = 1.0  # variance / mean of tick counts (1 = Poisson), from the last interval
        self.loads: deque[float] = deque(maxlen=3)  # the last intervals' request rates, for a ramp's trend
        # ``experience``: each configuration's miss share per load from earlier runs, and the price of a miss
        self.experience = experience
        self.price = self.expected_share = self.fresh = None
        if experience is not None:
            if experience.max_rps != self.max_rps or experience.buckets != self.buckets:
                raise ValueError("experience: read for another maximum load or other load buckets")
            if not 0 < miss_budget < 1:
                raise ValueError(f"miss budget: a share of the intervals in (0, 1), got {miss_budget}")
            self.price, self.expected_share = experience.price_for(miss_budget, self._watts)
            self.fresh = Freshness(experience)

    def _forecast(self, rps: float):
        k = self.slowdown  # the profiled service at k times the load, on a clock k times slower
        mean, spread = self.model(self.grid.assign(rps=rps * k, host_probe_us=self._host()))
        return k * np.asarray(mean, dtype=float), k * np.asarray(spread, dtype=float)

    def _host(self) -> float:
        """The host speed a decision plans for, for a model that knows the host
        (``host_probe_us``): the ``host_quantile`` of the probe over the last
        ``host_window`` intervals; NaN (the model's slowest host) before any probe. Not the
        last interval's: live the host turns slow and fast from one second to the next
        (the probe's lag-1 autocorrelation 0.24-0.50, lag-5 0.12-0.30, over nine rounds),
        a slow host's p95 is 1.35-1.65 times a fast one's at the same load and
        configuration, and the target holds per interval: the next interval's host is
        a draw from the recent ones (bench/manage.md, session 36)."""
        return float(np.quantile(self.hosts, self.host_quantile)) if self.hosts else float("nan")

    def _follow_cost(self, obs) -> None:
        """Fold this interval's measured / profiled CPU time per request into the slowdown."""
        if (self.cost_model is None or self.recovering or self.switched or obs.rps < IDLE_SHARE * self.max_rps
                or obs.utilisation >= 0.98):  # a saturated interval's CPU time is capped
            return
        profiled = self._profiled_cost(obs.config, obs.rps, obs.host_probe_us)
        if obs.busy > 0 and profiled > 0 and np.isfinite(profiled):
            self.slowdowns.append(obs.busy / obs.rps / profiled)
            if len(self.slowdowns) >= 3:  # a cheaper service keeps its profile's forecasts: see the docstring
                self.slowdown = max(1.0, float(np.median(self.slowdowns)))

    def _profiled_cost(self, config: Configuration, rps: float, host: float | None = None) -> float:
        """The CPU seconds per request the cost model says ``config`` took at ``rps`` when
        profiled (on a host as fast as ``host``, for a model that knows the host)."""
        profiled, _ = self.cost_model(pd.DataFrame({"cores": [config.cores], "level": [config.level], "rps": [rps],
                                                    "host_probe_us": [np.nan if host is None else host]}))
        return float(np.asarray(profiled, dtype=float)[0])

    def _bucket(self, rps: float) -> int:
        return load_bucket(rps, self.max_rps, self.buckets)

    def _watts(self, demand: float) -> np.ndarray:
        """Every configuration's modelled power carrying ``demand`` busy full-speed cores."""
        return np.array([self.power.watts(c, min(1.0, demand / cap)) for c, cap in zip(self.configs, self.capacity)])

    def _corrected(self, mean, spread, rps: float):
        if self.online is not None:
            scale = np.exp(self.correction[self._bucket(rps)])
            mean, spread = mean * scale, spread * scale
        return self._monotone(mean, spread)

    def _monotone(self, mean, spread):
        """No configuration is forecast faster than one with at least its cores and speed.
        Equation 3.2 (plain ``heimdall``): each takes the forecast (and spread) of the
        slowest such configuration. Where latency hardly depends on the configuration
        (low load), a forest's noise would otherwise rank the maximum configuration
        slowest and equation 3.2 would pick it; made equal, the cheapest of equals is
        taken. The cheapest rules take the least power under the threshold, which needs
        forecasts that are right, not the slowest: the least-squares monotone fit of the
        log forecasts (isotonic regression, ``monotone_fit``), each keeping its own
        spread. Live at 30.5k req/s the forest forecast the maximum 205-215 µs and two
        cores at half 98-102 µs; the slowest rule gave every configuration 215 µs, over
        target - slack, and the maximum ran where 1 CPU met the target (bench/manage.md,
        session 15); the fit gives them 123 µs."""
        if self.cheapest:
            return np.exp(monotone_fit(np.log(np.maximum(mean, 1e-12)), self.grid_shape)), spread
        slowest = np.where(self.dominates, mean[None, :], -np.inf).argmax(axis=1)
        slowest = np.where(mean[slowest] > mean, slowest, np.arange(len(mean)))  # on a tie, its own
        return mean[slowest], spread[slowest]

    def _qualifies(self, mean, spread) -> np.ndarray:
        if self.z is None:
            return mean < self.target * (1 - self.slack)
        return mean + self.z * spread < self.target

    def _choose(self, mean, spread, demand: float, load: float, now: float) -> int:
        if self.experience is not None and not self.fresh.stale:
            # where the load was experienced, and the experience holds: the least power + price x miss share
            share = self.experience.share()[self._bucket(load)]
            if np.isfinite(share).any():
                return int(np.argmin(np.where(np.isfinite(share), self._watts(demand) + self.price * share, np.inf)))
        ok = self._qualifies(mean, spread)
        # no more capacity than a configuration that missed at this load lately: the model was wrong there
        missed = self.distrusted[self._bucket(load)] > now
        ok &= ~(self.no_more_capacity & missed[None, :]).any(axis=1)
        if not ok.any():  # nothing predicted to meet the target: the lowest latency
            return self.fastest
        if self.cheapest:  # headroom in CPU too (see the class docstring)
            ok &= self._demands(demand, load) <= self.room * self.capacity
            if not ok.any():  # none leaves it: the most there is
                return self.fastest
        watts = self._watts(demand)
        if not self.cheapest:  # equation 3.2: the highest predicted latency under target - slack; of equals, the cheapest
            ok &= np.isclose(mean, mean[ok].max(), rtol=1e-9, atol=0.0)
        elif load < IDLE_SHARE * self.max_rps:
            return self._ready_for_arrival(ok, watts)
        return int(np.argmin(np.where(ok, watts, np.inf)))

    def _ready_for_arrival(self, ok: np.ndarray, watts: np.ndarray) -> int:
        """Idle, the cheapest rules take the most capacity among the configurations within
        ``IDLE_POWER`` of the least power: idle, a configuration's modelled power is its
        cores', hardly its speed (one core at full speed costs 0.2 % more than at an eighth
        under tx1), and the next arrival is a step from idle. Live, one core at an eighth, the
        least power, met the first step of the trace (7 600 req/s) with the quota holding the
        service back 25-60 ms before the reaction (two 20-ms ticks) could act, and missed it
        in all seven rounds of sessions 64-65 with the old rule; one core at full speed, where
        Heracles idles, met it in both rounds with this one (bench/manage.md, session 65)."""
        near = ok & (watts <= watts[ok].min() * (1 + IDLE_POWER))
        return int(np.lexsort((watts, -np.where(near, self.capacity, -np.inf)))[0])

    def decide(self, obs):
        # a load rise seen inside the interval sizes the next one by the rate since the rise:
        # the interval's mean hides it, and one tick's rate is noisier than their mean
        load = max(obs.rps, float(np.mean(self.risen))) if self.risen else obs.rps
        self.dispersion = tick_dispersion(self.counts, self.dispersion)
        self.loads.append(obs.rps)
        load = max(load, ramp(self.loads, self.interval, self.dispersion))
        if (self.experience is not None and not self.switched and obs.rps > 0 and np.isfinite(obs.p95)
                and obs.config in self.configs):  # what this run teaches, as the files read at start taught
            b, i, missed = self._bucket(obs.rps), self.configs.index(obs.config), obs.p95 > self.target
            self.experience.add(b, i, missed)
            if self.fresh.add(b, i, missed):
                self._remark(f"experience set aside at {obs.rps:.0f} req/s: {self.fresh.why()}")
        if obs.host_probe_us is not None and np.isfinite(obs.host_probe_us):
            self.hosts.append(obs.host_probe_us)
        self._follow_cost(obs)
        mean, spread = self._forecast(load)
        if self.online is not None and not self.switched:  # an interval of two configurations teaches nothing
            self._learn(obs, mean if load == obs.rps else self._forecast(obs.rps)[0])
        mean, spread = self._corrected(mean, spread, load)
        demand = self._demand(obs, load)
        self._distrust(obs)
        self._learn_room(obs)
        self.recovering = self.recover and obs.p95 > self.target
        best = self.fastest if self.recovering else self._choose(mean, spread, demand, load, obs.t)
        self.predicted = float(mean[best])
        self.sized_for, self.counts, self.risen, self.switched, self.above = load, [], [], False, None
        return self.configs[best]

    def react(self, rps, tick_s, config):
        """Inside the interval, on a load rise beyond what the tick's noise explains (4
        standard deviations of its request count, and at least 5 %) in two ticks in a row:
        when the configuration in force is no longer predicted to meet the target at the
        new rate, requests have queued behind it, so the lowest-latency configuration
        drains them (as after a measured violation); the interval's decision then sizes
        for the rate since the rise. Only a rise is acted on; lowering waits for the
        interval's decision. The noise is Poisson's, widened by the dispersion of the last
        interval's ticks: real arrivals come in bursts (a client's late sends, batching).
        A burst of one tick is not a new load: live memcached at a steady 30k and 76k req/s
        had a 20 ms tick over the threshold in 3 and 8 of 18 intervals, two in a row in
        none (4 of 18 at 76k in a burstier run: the load generator catching up after a
        stall), and each false rise ran an interval at maximum."""
        count = rps * tick_s
        self.counts.append(count)
        if self.risen:
            self.risen.append(rps)
        first, self.above = self.above, None
        if not self.reacts or self.recovering or count <= rise_threshold(self.sized_for * tick_s, self.dispersion):
            return None
        if first is None:  # wait for the next tick
            self.above = rps
            return None
        if not self.risen:
            self.risen.extend((first, rps))
        rps = min(first, rps)  # the load both ticks carried at least
        self.sized_for = rps
        mean, spread = self._corrected(*self._forecast(rps), rps)
        i = self.configs.index(config) if config in self.configs else None
        if i is not None and self._qualifies(mean, spread)[i] and self._roomy(rps, i):
            return None
        best = self.fastest  # requests queued during the ticks: drain them at the lowest latency
        self.predicted = float(mean[best])
        self.switched = True
        return self.configs[best]

    def _demand(self, obs, load: float) -> float:
        """Busy full-speed cores ``load`` needs: its CPU cost per request, the median over
        the last three intervals at that load (one interval's is noisy), times the load.
        Intervals in recovery, with a reaction, or over target are not kept: a backlog's
        draining is not the load's cost, and a saturated interval's CPU time is capped."""
        if obs.rps <= 0:
            return obs.busy
        cost = obs.busy / obs.rps
        if not (self.recovering or self.switched or obs.p95 > self.target):
            self.costs[self._bucket(obs.rps)].append(cost)
            if obs.rps >= IDLE_SHARE * self.max_rps:  # below it, idle wake-ups dominate a request's CPU time
                self.unit_cost = cost
        recent = self.costs[self._bucket(load)]
        return float(np.median(recent) if recent else cost) * load

    def _roomy(self, rps: float, i: int) -> bool:
        """The cheapest rules' headroom at a load risen inside the interval: its demand, at
        the CPU time per request measured at that load lately (else the last interval's
        kept, else the profiled), at most the headroom learned so far (``room``) of
        configuration ``i``'s capacity.
        The forecast alone let a step's first interval run where its CPUs could not carry
        it: live, one core at half speed, sized for 15k req/s, met the step to 22.8k at
        91 % utilisation and 290 µs, and its step to 30.4k at 98 % and 1.6 ms, with no
        reaction, because the forest forecast it 107-109 µs there (session 23, round 3)."""
        if not self.cheapest:
            return True
        recent = self.costs[self._bucket(rps)]
        cost = float(np.median(recent)) if recent else self.unit_cost
        if cost is None and self.cost_model is not None:
            cost = self.slowdown * self._profiled_cost(self.space.maximum, rps, self._host())
        if cost is None or not np.isfinite(cost):
            return True
        return self._demands(cost * rps, rps)[i] <= self.room[i] * self.capacity[i]

    def _demands(self, demand: float, load: float) -> np.ndarray:
        """Each configuration's demand at ``load``, as the cheapest rules' headroom reads it:
        the measured ``demand``, but never less than the load times the CPU time per request
        the cost model says that configuration took when profiled, times the slowdown k. A
        service measured cheaper than its profile keeps the profile's forecasts (class
        docstring); so it keeps the profile's demand, which also knows what the
        measurement on one configuration cannot: another takes more per request. Live (session
        62's fast host), the profile gave one core at an eighth 18-22 µs per request at 7 600
        req/s and the maximum 14.5; measured at 9-12 µs on the one core in its first
        seconds, it ran at 54 % and then at 70-87 % of its capacity, and missed at 0.3-32 ms in
        three of six rounds (bench/manage.md, session 63)."""
        demands = np.full(len(self.configs), demand, dtype=float)
        if self.cost_model is None or load <= 0:
            return demands
        profiled, _ = self.cost_model(self.grid.assign(rps=load, host_probe_us=self._host()))
        floor = self.slowdown * np.asarray(profiled, dtype=float) * load
        return np.where(np.isfinite(floor), np.maximum(demands, floor), demands)

    def _speed_missed(self, obs) -> bool:
        """Whether a miss may be its configuration's speed. Where the speed level is a CFS
        quota (``obs.throttled_ms`` known), the quota slows the service only by holding it
        back: an interval it held back under ``HELD_MS``, at a utilisation under the
        configuration's headroom, ran as it would have at full speed on the same cores,
        and its miss says nothing against the configuration's speed. Live on a fast host
        (sessions 62-63, nine rounds) all but 3 of its 26 misses on configurations
        cheaper than the maximum were held back 12-204 ms, at 0.2-32 ms. On a host whose
        latency was near the target at any load (session 64), heimdall-cheapest's 20
        misses in two rounds were held back 0 ms at 40-83 % utilisation and 201-396 µs,
        and static missed 8 times meanwhile. Distrust and the headroom's cut sent it from
        one core to two at partial speed, which missed alike, for more power."""
        if obs.throttled_ms is None or not np.isfinite(obs.throttled_ms) or obs.config not in self.configs:
            return True
        return obs.throttled_ms >= HELD_MS or obs.utilisation >= self.room[self.configs.index(obs.config)]

    def _distrust(self, obs) -> None:
        """A miss by the configuration chosen for the load the interval carried (not one
        in recovery, after a reaction, or at a load it was not sized for: those are a
        backlog's or a step's), and one its speed may have made (``_speed_missed``),
        distrusts it at that load for ``distrust_s``, twice as long with each further miss
        there (at most 8 times)."""
        if not (self.distrust_s and self._steady(obs) and obs.p95 > self.target and obs.config in self.configs
                and self._speed_missed(obs)):
            return
        b, i = self._bucket(obs.rps), self.configs.index(obs.config)
        hold = self.distrust_s * 2 ** min(self.misses[b, i], 3)
        self.distrusted[b, i] = obs.t + hold
        self.misses[b, i] += 1
        self._remark(f"{obs.config} missed at {obs.rps:.0f} req/s: not trusted at this load for {hold:.0f} s")

    def _steady(self, obs) -> bool:
        """The interval ran the configuration chosen for the load it carried: not in
        recovery, not after a reaction, not at a load it was not sized for."""
        return not (self.recovering or self.switched) and self._bucket(self.sized_for) == self._bucket(obs.rps)

    def _learn_room(self, obs) -> None:
        """The cheapest rules' headroom, learned live per configuration as TCP learns its
        window (additive increase, multiplicative decrease): a steady miss by a
        configuration other than the maximum, at utilisation u, that its speed may have
        made (``_speed_missed``), cuts the headroom of that
        configuration and of every one no faster (no more speed, no more capacity) to at
        most 0.9 x min(its headroom, u), never under ``room_floor``; each interval that
        meets the target gives every configuration back ``room_regain`` (0.1 in 100
        intervals), up to ``headroom``. Why learned: how far this machine's memcached can
        run towards its capacity before one interval's p95 spikes over the target changes
        from one pass to the next, not with the profile. heimdall-cheapest's settled
        intervals at 70-80 % utilisation missed in 0 % of them in round 23-1 and in 26-29 %
        in rounds 23-4 and 24-1; static's own misses moved with them (3 and 25 of 220).
        Why per configuration: one headroom for all (session 24) was cut to its floor in
        every round by two cores at 0.5-0.875 speed missing at 32-65 % utilisation, which
        then kept one core out at the top load, where the sweeps measured one core at full
        speed meeting the target in 14 of 14 intervals and the maximum in 84 % (on this
        2-vCPU machine memcached's second core shares a CPU with the load generator)."""
        if not self.cheapest or self.recovering or not np.isfinite(obs.p95):
            return
        if obs.p95 <= self.target:
            self.room = np.minimum(self.headroom, self.room + self.room_regain)
        elif (self._steady(obs) and obs.config in self.configs and obs.config != self.space.maximum
              and self._speed_missed(obs)):
            i = self.configs.index(obs.config)
            cut = max(self.room_floor, 0.9 * min(self.room[i], obs.utilisation))
            slower = self.no_faster[:, i]  # includes i itself
            self.room[slower] = np.minimum(self.room[slower], cut)
            self._remark(f"headroom {cut:.2f} of the capacity of {obs.config} and of those no faster")

    def _learn(self, obs, mean) -> None:
        """``mean``: the uncorrected forecast for the load the interval carried."""
        if self.recovering or not np.isfinite(obs.p95) or obs.p95 <= 0:
            return
        i = self.configs.index(obs.config) if obs.config in self.configs else None
        if i is not None and mean[i] > 0:
            b = self._bucket(obs.rps)
            self.learned[b] += 1
            weight = max(self.online, 1.0 / self.learned[b])
            self.correction[b] += weight * (np.log(obs.p95 / mean[i]) - self.correction[b])


def monotone_fit(values: np.ndarray, shape: tuple[int, int], tolerance: float = 1e-10) -> np.ndarray:
    """The least-squares fit of ``values`` (a grid of ``shape``, raveled row by row) that
    does not increase along rows or columns: isotonic regression on the grid's partial
    order, by Dykstra's alternating projections onto the row- and column-monotone cones
    (each a pool-adjacent-violators fit per row or column). scipy's, not scikit-learn's:
    the same fit without the input validation that took half of a simulation's time
    (about 250 µs a call against 10)."""
    from scipy.optimize import isotonic_regression

    def decreasing(v: np.ndarray) -> np.ndarray:
        return isotonic_regression(v, increasing=False).x

    x = np.asarray(values, dtype=float).reshape(shape)
    row_step, col_step = np.zeros(shape), np.zeros(shape)
    for _ in range(1000):
        y = x + row_step
        rows = np.vstack([decreasing(r) for r in y])
        row_step = y - rows
        y = rows + col_step
        fitted = np.column_stack([decreasing(c) for c in y.T])
        col_step = y - fitted
        done = np.max(np.abs(fitted - x)) < tolerance
        x = fitted
        if done:
            break
    return x.ravel()


def ramp(loads, interval_s: float, dispersion: float) -> float:
    """The next interval's load on a ramp: when each of the last two intervals rose beyond
    its noise (``rise_threshold`` over an interval's count), by rises within a factor of two
    of each other, the last plus its rise; else 0. A rise from no load is a start, and two
    unlike rises are a step that began inside an interval or the backlog a saturated step
    left (the live rate counts answered requests): on the live rounds of sessions 40-45
    two rises fired in 55 of 14 520 intervals, like ones in 19, none since the intervals
    were aligned with the load (session 45). The simulator's ramps are alike: its tables
    did not move."""
    if len(loads) < 3:
        return 0.0
    a, b, c = (x * interval_s for x in list(loads)[-3:])  # request counts: the noise is theirs
    if (a > 0 and b > rise_threshold(a, dispersion) and c > rise_threshold(b, dispersion)
            and 0.5 <= (c - b) / (b - a) <= 2):
        return (2 * c - b) / interval_s
    return 0.0


def rise_threshold(expected: float, dispersion: float) -> float:
    """The request count of one tick beyond which it is over its noise: ``expected`` plus
    4 standard deviations (Poisson's, widened by ``dispersion``), and at least 5 %."""
    return expected + max(0.05 * expected, 4 * np.sqrt(dispersion * expected), 1.0)


def tick_dispersion(counts: list[float], previous: float) -> float:
    """Index of dispersion (variance / mean, at least 1) of an interval's tick counts,
    from the median absolute difference of consecutive ticks, which a load step inside
    the interval moves by one difference only; ``previous`` when there are too few ticks."""
    if len(counts) < 10 or np.mean(counts) <= 0:
        return previous
    sd = float(np.median(np.abs(np.diff(counts)))) / (0.6745 * np.sqrt(2))  # normal: median |x - y| = 0.954 sd
    return max(1.0, sd * sd / float(np.mean(counts)))
