"""Policies side by side on the same load trace: the seed's Table 4.1, reproducibly.

The QoS target and the maximum load come from the knee of the service's load-latency
curve at maximum configuration (kneedle): target = p95 at the knee, maximum load =
95 % of the knee's load (seed section 4.1.3). Heimdall's model is trained on a
profiling sweep over configurations x load, as the seed trains on its 51
configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from perflearn.errors import UsageError
from perflearn.learn.knee import knee_before_jump, load_knee

from .config import ConfigSpace
from .heimdall import HOST_QUANTILE
from .loop import SimulatedService, comparison, summarize
from .policies import make_policy
from .power import PowerModel
from .simulator import ServerModel


def load_sweep(server: ServerModel, space: ConfigSpace, points: int = 40, intervals: int = 5) -> pd.DataFrame:
    """p95 against load at the maximum configuration, up to 1.3x its capacity."""
    capacity = server.capacity(space.maximum)
    rows = []
    for rps in np.linspace(0.05, 1.3, points) * capacity:
        sim = replace(server, seed=server.seed + 1)
        p95 = [sim.step(space.maximum, rps, 1.0)["p95"] for _ in range(intervals)]
        rows.append({"rps": rps, "p95": float(np.median(p95))})
    return pd.DataFrame(rows)


def qos_from_knee(sweep: pd.DataFrame) -> tuple[float, float]:
    """(target p95 in seconds, maximum load in requests/s) from the knee of a load sweep,
    taken before a saturation jump as ``perflearn knee --before-jump`` takes it: a slow
    host's sweep (``SlowHost``) can put kneedle's knee in saturation (5 of 60 seeds at 50 %
    slow; seed 8: 8.5 ms, where the load before it had 0.84 ms), and its target is no QoS."""
    finite = sweep[np.isfinite(sweep["p95"])]
    load, p95 = finite["rps"].to_numpy(), finite["p95"].to_numpy()
    knee = load_knee(load, p95)
    if knee is None:  # a degenerate service (e.g. a rate so small its latencies underflow)
        raise UsageError("the simulated service (--mu, --base-us) has no knee in its load sweep: "
                         "no QoS target and maximum load to set from it")
    knee = knee_before_jump(load, p95, knee)
    return float(knee.y), 0.95 * float(knee.x)


PROFILE_LOADS, PROFILE_INTERVALS = 20, 3  # per configuration: Heimdall's profile is 60 rows of each


def profile(server: ServerModel, space: ConfigSpace, max_rps: float, fractions=None,
            intervals: int = PROFILE_INTERVALS, seed: int = 1) -> pd.DataFrame:
    """Profiling data for Heimdall: every configuration x load level, a few intervals each."""
    fractions = np.linspace(0.05, 1.0, PROFILE_LOADS) if fractions is None else fractions
    rows = []
    for config in space:
        for fraction in fractions:
            sim = replace(server, seed=seed + len(rows))
            for _ in range(intervals):
                out = sim.step(config, fraction * max_rps, 1.0)
                busy = out["utilisation"] * config.cores * config.level  # full-speed cores
                rows.append({"cores": config.cores, "level": config.level, "rps": fraction * max_rps,
                             "p95": min(out["p95"], 10.0),  # an overloaded interval: capped, not infinite
                             # CPU seconds per request; a saturated interval's CPU time is capped: not known
                             "cost": busy / (fraction * max_rps) if out["utilisation"] < 0.98 else np.nan,
                             "host_probe_us": out.get("host_probe_us", np.nan)})
    return pd.DataFrame(rows)


def profile_model(profile_frame: pd.DataFrame, family: str = "rf", metric: str = "p95"):
    """A perflearn model of log ``metric`` (p95; cost, the CPU time per request) from
    (cores, level, rps), and the host-speed probe where the profile has it (a
    ``SlowHost``), as live models know the host; returns f(frame) -> (mean, spread). A
    frame without a probe reading is forecast for the slowest host profiled, as live."""
    from perflearn.learn import fit
    from perflearn.store import Dataset

    probed = "host_probe_us" in profile_frame and bool(profile_frame["host_probe_us"].notna().any())
    context = ["rps", "host_probe_us"] if probed else ["rps"]
    ds = Dataset.from_frame(profile_frame[["cores", "level", *context, metric]], metrics=[metric],
                            knobs=["cores", "level"], context=context, name="heimdall-profile")
    model = fit(ds, metric, family=family, log_target=True)
    predict = model_predictor(model, 1.0)  # as a live model is given to Heimdall
    predict.model = model
    return predict


def cost_predictor(samples: pd.DataFrame):
    """Heimdall's model of the profile's CPU time per request (``cost``). The simulated
    service's is 1/mu in every configuration, so its model was one of a constant, refused
    or not by float rounding (--mu 4000 failed where 3000 ran): a constant is one."""
    known = samples.dropna(subset=["cost"])
    if not len(known):  # saturated in every profiling interval: nothing to follow
        raise UsageError("no profiling interval left the CPU time per request known (each was saturated)")
    value = float(known["cost"].median())
    if np.ptp(known["cost"].to_numpy()) <= 1e-6 * abs(value):
        return lambda frame: (np.full(len(frame), value), np.zeros(len(frame)))
    return profile_model(known, metric="cost")


def compare(server: ServerModel, space: ConfigSpace, loads: list[float], interval_s: float, power: PowerModel,
            target_s: float, max_rps: float, policies: list[str], model=None,
            tick_s: float | None = None, cost_model=None, headroom: float | None = None,
            experience=None, miss_budget: float = 0.01, slot: int | None = None,
            host_quantile: float = HOST_QUANTILE, on_pass=None) -> tuple[pd.DataFrame, dict, dict]:
    """Every policy on the same trace (``on_pass(label, frame, complete)`` told as each pass
    ends, so that an interrupted comparison keeps those, and the pass it cut short marked
    incomplete); ``tick_s``: the service reports ticks this long
    inside each interval, and the policies that react to them (Heimdall's) do. A policy
    that learns first (Hipster) has its (last) learning pass in the frames and the table
    as ``learning_label(name)``, ahead of its evaluated pass. ``slot``: the evaluated
    passes take turns on one service, a slot of this many intervals each
    (``loop.interleaved``); learning passes run before, each on its own."""
    def service(_label: str, offered: list[float] = loads) -> SimulatedService:  # every pass: the same noise
        return SimulatedService(replace(server, seed=server.seed + 7), space, offered, interval_s, tick_s)

    names = ["static", *[p for p in policies if p != "static"]]
    made = {name: make_policy(name, space, target_s, max_rps, interval_s, power=power, intervals=len(loads), model=model,
                              cost_model=cost_model, headroom=headroom, experience=experience, miss_budget=miss_budget,
                              host_quantile=host_quantile)
            for name in names}
    frames = {}
    for label, frame, _, complete in comparison(made, service, loads, interval_s, power, slot):
        frames[label] = frame
        if on_pass is not None:
            on_pass(label, frame, complete)
    static_energy = frames["static"]["energy_j"].sum()
    rows = [{"policy": n, **summarize(f, static_energy)} for n, f in frames.items()]
    return pd.DataFrame(rows), frames, made


@dataclass
class Simulation:
    """One simulated comparison: the knee's target and load, the model's training size,
    the summary table (one row per policy) and every interval of every policy."""

    knee_target_s: float
    target_s: float
    max_rps: float
    profiled: int
    summary: pd.DataFrame
    frames: dict[str, pd.DataFrame]
    policies: dict = field(default_factory=dict)  # as made, by name: heimdall-experience's price is said
    experience: object = None  # heimdall-experience's, read against this run's target and maximum load


def simulate(server: ServerModel, space: ConfigSpace, policies: list[str], trace: str, step_s: float,
             interval_s: float, power: PowerModel, target_s: float | None = None,
             tick_s: float | None = None, profiled_speed: float = 1.0, follow_cost: bool = True,
             headroom: float | None = None, experience_csvs: list | None = None,
             miss_budget: float = 0.01, slot: int | None = None, host_quantile: float = HOST_QUANTILE,
             on_pass=None) -> Simulation:
    """The whole simulated protocol for one noise seed (``server.seed``): knee -> target and
    maximum load, profiling -> Heimdall's model, the trace, every policy on it.
    ``profiled_speed``: the server Heimdall's model was profiled on served this many
    times as fast as the one managed (another input mix, a neighbour since): a model
    that is wrong, most of all near saturation, as forests were live. ``follow_cost``:
    Heimdall also gets the profile's CPU time per request, and follows the service's.
    ``experience_csvs``: earlier runs' intervals (``--csv``) for heimdall-experience, read
    against this run's target and maximum load."""
    from .experience import Experience
    from .simulator import expand, trace_segments

    knee_target, max_rps = qos_from_knee(load_sweep(server, space))
    target = target_s or knee_target
    model, cost, profiled = None, None, 0
    if any(n.startswith("heimdall") for n in policies):
        profiled_on = replace(server, mu_max=server.mu_max * profiled_speed)
        samples = profile(profiled_on, space, max_rps, seed=server.seed + 1)
        try:
            model, profiled = profile_model(samples), len(samples)
            if follow_cost:
                cost = cost_predictor(samples)
        except UsageError as exc:  # a server profiled far slower: saturated everywhere (blamed "heimdall-profile")
            if profiled_speed == 1:
                raise
            raise UsageError(f"--profiled-speed {profiled_speed:g}: the server profiled at that speed leaves Heimdall "
                             f"nothing to learn ({exc.message}); a speed nearer 1") from None
    segments = trace_segments(trace, max_rps, step_s, interval_s)
    loads = expand(segments, interval_s)
    experience = Experience.from_csvs(experience_csvs, space, target, max_rps) if experience_csvs else None
    # the policy learns into a copy: the experience said after the run is the files' (it counted the run's own)
    learning = None if experience is None else experience.copy()
    summary, frames, made = compare(server, space, loads, interval_s, power, target, max_rps, policies, model, tick_s,
                                    cost, headroom, learning, miss_budget, slot, host_quantile, on_pass)
    return Simulation(knee_target, target, max_rps, profiled, summary, frames, made, experience)


def across_seeds(summaries: list[pd.DataFrame]) -> pd.DataFrame:
    """Per policy over several seeds' summaries: mean, standard deviation and minimum of the
    QoS guarantee and of the energy reduction, and in how many seeds the seed's goal held
    (at least 97.7 % of intervals and 22 % of energy saved)."""
    frame = pd.concat(summaries, ignore_index=True)
    frame["goal"] = (frame["qos_guarantee"] >= 97.7) & (frame["energy_reduction"] >= 22.0)
    grouped = frame.groupby("policy", sort=False)
    return pd.DataFrame({
        "qos_mean": grouped["qos_guarantee"].mean(), "qos_std": grouped["qos_guarantee"].std(ddof=1),
        "qos_min": grouped["qos_guarantee"].min(),
        "saved_mean": grouped["energy_reduction"].mean(), "saved_std": grouped["energy_reduction"].std(ddof=1),
        "saved_min": grouped["energy_reduction"].min(),
        "goal_seeds": grouped["goal"].sum().astype(int), "seeds": grouped.size(),
    }).reset_index()


def figure(frames: dict[str, pd.DataFrame], path, title: str = "") -> None:
    """One column per policy, as the seed's Figure 4.7: load, p95 vs target, speed, cores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, len(frames), figsize=(3.2 * len(frames), 7), sharex=True, squeeze=False)
    for col, (name, frame) in enumerate(frames.items()):
        ax = axes[:, col]
        ax[0].plot(frame["t"], frame["rps"] / 1e3)
        ax[0].set_title(name)
        top = frame["target"].iloc[0] * 1e3 * 3
        ax[1].plot(frame["t"], frame["p95"] * 1e3)
        over = frame["p95"] * 1e3 > top  # off the panel: marked at its top edge, not just touching it
        ax[1].plot(frame["t"][over], [top * 0.97] * int(over.sum()), "^", color="r", markersize=4,
                   label="p95 above 3x target" if over.any() else None)
        ax[1].axhline(frame["target"].iloc[0] * 1e3, color="k", linestyle="--")
        ax[1].set_ylim(0, top)
        if over.any():
            ax[1].legend(loc="best", fontsize=6)
        # t is an interval's end: its configuration ran over the interval before it ("post" drew it one late)
        ax[2].step(frame["t"], frame["level"], where="pre")
        ax[3].step(frame["t"], frame["cores"], where="pre")
        if col == 0:
            for a, label in zip(ax, ("kRPS", "p95 (ms)", "speed level", "cores")):
                a.set_ylabel(label)
        ax[3].set_xlabel("time (s)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


FEEDABLE = ("cores", "level", "quota", "rps", "rate", "wire.rps", "offered_rps", "host_probe_us")
# a forecast at the maximum configuration and half the load this far off the target: a unit
# mistaken, not a model. Right, it is a fraction of the target (0.1-0.5 here, less for a
# lenient target); a unit 1000 times too small puts it 100-500 times over (an upper bound
# of 1000 let µs read as ms through: 210 times), one 1000 times too large under 1/1000
UNIT_BOUNDS = (1 / 1000, 30.0)


def check_unit(predict, space: ConfigSpace, target_s: float, max_rps: float, what: str, unit: str,
               warn=None) -> None:
    """A model read in the wrong unit forecasts nonsense every interval, silently: a manage
    --csv's p95 (seconds) read as the default microseconds forecast 1e-10 s, and Heimdall ran
    the cheapest configuration throughout (session 46's review). Its forecast at the maximum
    configuration and half the maximum load, against the target, says which unit it is in.
    ``warn``: the unit was given (--model-unit), so a forecast far from the target is said,
    not refused: a right model against a generous target (100 ms, 0.09 ms forecast) was
    refused with no way past."""
    top = space.maximum
    forecast = float(predict(pd.DataFrame({"cores": [top.cores], "level": [top.level], "rps": [max_rps / 2]}))[0][0])
    ratio = forecast / target_s
    if not UNIT_BOUNDS[0] < ratio < UNIT_BOUNDS[1]:
        said = (f"{what} read in {unit} forecasts {forecast:.3g} s at the maximum configuration and half the load, "
                f"{ratio:.3g} times the {target_s * 1e3:.4g}-ms target")
        if warn is None:
            raise UsageError(f"{said}: is --model-unit right? (a manage --csv file's p95 is in seconds: "
                             "--model-unit s)")
        warn(f"{said}: taken, as --model-unit {unit} says")


def model_predictor(model, scale: float, what: str = "the model"):
    """Adapt a perflearn model of tail latency to the Heimdall policy: its features must
    be among cores, level, quota (= cores x level CPUs), rps/rate/wire.rps/offered_rps
    (the load; ``wire.rps`` is the per-interval rate of a model fitted ``--per-sample``,
    ``offered_rps`` the rate a profile by ``-p sweep`` offered each interval) and
    host_probe_us (the host-speed probe a sweep records: the policy gives the host it
    plans for; where it knows none, in the simulator or before the first probe, the
    slowest host the model was trained on, so an unknown host is never taken for a fast
    one); ``scale`` turns its unit into seconds (1e-6 for the wire analyzer's microseconds)."""
    unknown = [f for f in model.features if f not in FEEDABLE]
    if unknown:
        raise UsageError(f"{what} was trained on {', '.join(model.features)}; the manager can give it only "
                         f"{', '.join(FEEDABLE)} (quota = cores x level CPUs; rps = rate = wire.rps = offered_rps = the load; "
                         "host_probe_us = the host-speed probe)")
    if not {"cores", "level", "quota"} & set(model.features):  # it would forecast every configuration alike
        raise UsageError(f"{what} was trained on {', '.join(model.features)}: none of cores, level or quota, so it "
                         "cannot tell one configuration from another")
    if not {"rps", "rate", "wire.rps", "offered_rps"} & set(model.features):  # met the target in 40 % of intervals
        raise UsageError(f"{what} was trained on {', '.join(model.features)}: no load (rps, rate, wire.rps or "
                         "offered_rps), so it forecasts every load alike")
    named = [f for f in model.features if f not in ("cores", "level", "quota") and model.schema.kinds[f] != "numeric"]
    if named:  # it failed in every interval, at the first load it was not trained on (session 58's audit)
        f = named[0]
        given = "host speed" if f == "host_probe_us" else "load"
        raise UsageError(f"{what}: its feature {f} is categorical (known: {', '.join(model.schema.categories[f])}), "
                         f"and the manager gives it every {given} in between: fix the data and fit again")
    slowest_host = model.schema.ranges.get("host_probe_us", (np.nan, np.nan))[1]

    def fed(frame: pd.DataFrame) -> pd.DataFrame:
        host = frame["host_probe_us"] if "host_probe_us" in frame else pd.Series(np.nan, index=frame.index)
        full = frame.assign(quota=frame["cores"] * frame["level"], rate=frame["rps"], offered_rps=frame["rps"],
                            host_probe_us=host.fillna(slowest_host), **{"wire.rps": frame["rps"]})
        return full[model.features]

    def predict(frame: pd.DataFrame):
        dist = model.predict_dist(fed(frame), where=what)  # a category it never saw names the model
        return dist["pred"].to_numpy() * scale, dist["std"].to_numpy() * scale

    def beyond(space: ConfigSpace, max_rps: float) -> list[str]:
        """Where the configurations at the lowest and the maximum load leave what the model was
        trained on (a model of levels 0.5 and 1 forecast level 0.25 as 0.5, unsaid)."""
        configs = list(space)
        frame = pd.DataFrame({"cores": [c.cores for c in configs] * 2, "level": [c.level for c in configs] * 2,
                              "rps": [0.2 * max_rps] * len(configs) + [max_rps] * len(configs)})
        return model.schema.outside(fed(frame), where=what)  # a category it never saw names the model

    predict.beyond = beyond
    predict.features = list(model.features)
    return predict
