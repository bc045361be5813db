"""The QoS-aware manager: policies compared on a calibrated simulator (and, next, live)."""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from perflearn.errors import Terminated, UsageError

from . import terminal
from .app import app, check_output, check_png, interrupt_on_sigterm, one_file_each, unwritable

# written out, not joined from POLICY_NAMES: importing the policies (numpy, pandas) would
# slow every CLI start-up; keep the two in step
POLICY_HELP = ("static, ondemand, hipster, heracles, heracles-2min, heimdall, heimdall-uncertain, heimdall-online, "
               "heimdall-cheapest, or all (repeatable); heimdall-experience (with --experience); or sweep: profiling "
               "for heimdall's model, every configuration at every load (with --trace ladder)")
TRACES = ("steps", "diurnal", "ladder")  # perflearn.manage.simulator.TRACES, written out for the same reason


@app.command()
def manage(
    policy: Annotated[list[str], typer.Option("--policy", "-p", help=POLICY_HELP)] = ["all"],
    simulate: Annotated[bool, typer.Option("--simulate", help="Run on the queueing simulator instead of a live service.")] = False,
    service: Annotated[Optional[str], typer.Option(help="Live: the service's command, with {port} (e.g. \"memcached -u root -l 127.0.0.1 -p {port} -t 2\").")] = None,
    protocol: Annotated[str, typer.Option(help="Live: the service's protocol for the wire analyzer and the load.")] = "memcache-binary",
    load_args: Annotated[str, typer.Option("--load-args", help="Live: more perflearn-load options, e.g. "
                                           "\"--value-size fixed:4096 --threads 2\".")] = "",
    max_rps: Annotated[Optional[float], typer.Option("--max-rps", help="Live: the trace's peak load (95 % of the knee's load).")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Live: a perflearn model of tail latency (perflearn "
                     "fit) for heimdall. LABEL=PATH (repeatable) gives a model to the policies named NAME:LABEL only, "
                     "e.g. -p heimdall-cheapest:blind with --model blind=PATH, to compare two models in one run.")] = None,
    model_unit: Annotated[Optional[str], typer.Option(help="Unit of the model's target: us, ms or s (default us; "
                                                      "given, a forecast far from the target is said, not refused).",
                                                      show_default=False)] = None,
    cost_model: Annotated[Optional[list[str]], typer.Option("--cost-model", help="Live: a perflearn model of the service's "
                          "CPU µs per request when profiled (cpu_us_per_request of examples/memcached-profile), "
                          "from cores, level or quota, and the load: heimdall then forecasts the service as it is now, "
                          "k times slower or faster. LABEL=PATH: for NAME:LABEL policies only (they take the "
                          "unlabelled one when their label has none).")] = None,
    follow_cost: Annotated[bool, typer.Option("--follow-cost/--no-follow-cost", help="Simulator: heimdall also gets "
                           "its profile's CPU time per request and follows the service's.")] = True,
    headroom: Annotated[Optional[list[str]], typer.Option("--headroom", help="The cheapest Heimdall rules run a "
                        "configuration only where the load's CPU demand is at most this fraction of its capacity "
                        "(cores x speed), else the maximum (default 0.95). A miss cuts it live, down to "
                        "0.5, for the configuration that missed and those no faster; intervals that meet the target "
                        "give it back, up to this. LABEL=H: for NAME:LABEL policies only (live), e.g. -p "
                        "heimdall-cheapest:wide --model wide=PATH --headroom wide=0.9 beside -p heimdall-cheapest, "
                        "to compare two headrooms in one run.")] = None,
    host_quantile: Annotated[Optional[list[str]], typer.Option("--host-quantile", help="With a model that knows "
                             "the host (host_probe_us; the simulator's, with --slow-host), heimdall plans for this quantile of the host-speed probe over "
                             "its last 60 intervals (default 0.95: a host as slow as it was one interval in twenty). "
                             "LABEL=Q: for NAME:LABEL policies only (live).")] = None,
    experience: Annotated[Optional[list[Path]], typer.Option("--experience", help="heimdall-experience: the "
                          "intervals of earlier runs (their --csv files; repeatable). Where they saw a configuration "
                          "at a load for 15 intervals or more, it runs the least power + price x miss share.")] = None,
    miss_budget: Annotated[float, typer.Option("--miss-budget", help="heimdall-experience: the share of intervals "
                           "it may expect to miss, over the loads as experienced; sets the price of a miss.")] = 0.01,
    cores: Annotated[int, typer.Option(help="Cores the service may use.")] = 3,
    service_cpus: Annotated[Optional[str], typer.Option("--service-cpus", help="Live: the CPUs the service's cores are "
                            "taken from, lowest first (e.g. 0 or 2-5; default: every CPU this process may use). The load "
                            "generator, the sniffer and the manager then run on the other CPUs, as a client machine "
                            "would, not on the service's.")] = None,
    levels: Annotated[int, typer.Option(help="Speed levels (frequencies, or CFS quota steps).")] = 17,
    mu: Annotated[float, typer.Option(help="Requests/s one core serves at full speed (simulator).")] = 12000.0,
    base_us: Annotated[float, typer.Option("--base-us", help="Network and stack delay, µs (simulator).")] = 100.0,
    trace: Annotated[str, typer.Option(help="Load: steps (0->100->0 % in 20 % steps, each held "
                                "--step-seconds; the simulator's 0 % is a light 5 %) or diurnal (10 -> 100 -> 10 % of the maximum load, a day compressed into "
                                "12 steps' time; live, perflearn-load replays it as a trace) or ladder (10 -> 110 % in 10 % steps, "
                                "for -p sweep).")] = "steps",
    step_seconds: Annotated[float, typer.Option(help="How long each load step is held.")] = 50.0,
    interleave: Annotated[bool, typer.Option("--interleave", help="The policies take turns on one service: each "
                          "step of the trace is run by every policy in turn (the order rotated from step to step), "
                          "so a slow spell of the host meets them all, not one pass. Learning passes run first.")] = False,
    handover: Annotated[Optional[float], typer.Option("--handover", help="Live, with --interleave: each turn begins "
                        "after this many seconds at its own configuration, at the load before its first interval, "
                        "recorded in no pass: handing the service over from another policy's cores costs a second "
                        "or two that a pass alone never pays (default 2; 0: none; at most 60).")] = None,
    interval: Annotated[float, typer.Option(help="Control interval, seconds.")] = 1.0,
    react_ms: Annotated[float, typer.Option("--react-ms", help="Heimdall reacts to a load rise inside the interval, "
                                            "from the arrival rate of ticks this long (0: only at interval ends, "
                                            "as the seed).")] = 20.0,
    target_ms: Annotated[Optional[float], typer.Option("--target-ms", help="QoS target for p95 (default: latency at the knee).")] = None,
    seed: Annotated[int, typer.Option(help="Simulator noise seed.")] = 0,
    profiled_speed: Annotated[float, typer.Option("--profiled-speed", help="Simulator: Heimdall's model was profiled on a "
                              "server this many times as fast as the managed one (1: the same; 1.3: a model 30 % too "
                              "optimistic, most near saturation).")] = 1.0,
    slow_host: Annotated[float, typer.Option("--slow-host", help="Simulator: the host runs slow this share of the "
                         "intervals (0 to 1), in spells and by as much as this project's VM did: 1.1x the CPU time per "
                         "request, p95 1.2x and more spread (docs/manage.md, \"A slow host, simulated\").")] = 0.0,
    seeds: Annotated[int, typer.Option(help="Simulator: repeat the whole protocol (knee, profile, model, trace) over "
                                       "this many noise seeds from --seed; report mean ± sd and minimum per policy.")] = 1,
    power: Annotated[str, typer.Option(help="Power model where there is no RAPL: server (20 W static, per core 1.5 W "
                                       "idle + 6 W dynamic), tx1 (the seed's Jetson TX1: 30 % of peak at 10 % load), "
                                       "or static,idle,dynamic watts (default: server). With --from-csv: "
                                       "reprice the file's energy under this model (without it, the file's "
                                       "energy is kept).")] = None,
    figure: Annotated[Optional[Path], typer.Option(help="Write one PNG, a column per policy (load, p95 vs target, speed, cores).")] = None,
    csv: Annotated[Optional[Path], typer.Option(help="Write every interval of every policy here (live: as each "
                                                     "ends, so a killed run keeps them; simulated: as each pass "
                                                     "ends).")] = None,
    store: Annotated[Optional[Path], typer.Option("--store", "-s", help="Record the comparison in this results store: "
                                                  "one run per policy, every interval as its samples.")] = None,
    name: Annotated[Optional[str], typer.Option(help="Experiment name in --store (default: manage-live or manage-sim "
                                                "with the date and time).")] = None,
    from_csv: Annotated[Optional[Path], typer.Option("--from-csv", help="Run nothing: record a live run's --csv "
                        "in --store, one run per pass, as the run would have (a comparison killed outright kept its "
                        "intervals only there). A pass is complete when it has every interval of the trace that "
                        "--trace, --step-seconds and --interval describe, as the run was given them; else it is "
                        "recorded as failed.")] = None,
) -> None:
    """Run QoS policies on a service's load trace; report QoS guarantee, tardiness, energy, changes."""
    from perflearn.manage.config import ConfigSpace
    from perflearn.manage.policies import EXPERIENCED, POLICY_NAMES, PROFILERS, variant, with_learning

    # SIGTERM as Ctrl-C from the start: a live run stops its service and load generator and leaves the maximum; a
    # simulation says what it kept (it exited 143 unsaid, and a live run in its first 2 s too: session 54's audit)
    interrupt_on_sigterm()

    # all and others: every baseline, then the others (they were dropped without a word, an unknown one too)
    policy = [p.strip() for given in policy for p in given.split(",")]  # -p heimdall,static as -p ... -p ... (it was
    # "unknown policy 'heimdall,static'", though the help reads a list)
    names = list(dict.fromkeys([*(POLICY_NAMES if "all" in policy else ()), *(p for p in policy if p != "all")]))
    known = (*POLICY_NAMES, *EXPERIENCED, *PROFILERS)
    bases = [variant(n)[0] for n in names]
    unknown = [n for n in bases if n not in known]
    if unknown:
        raise UsageError(f"--policy: unknown policy {unknown[0]!r} (one of: {', '.join(known)}, all)")
    models, cost_models = _labelled(model, "--model"), _labelled(cost_model, "--cost-model")
    quantiles, headrooms = _quantiles(host_quantile), _headrooms(headroom)
    _check_labels(names, models, cost_models, simulate, quantiles, headrooms)
    if any(n in EXPERIENCED for n in bases) and not experience:
        raise UsageError("heimdall-experience needs --experience: the --csv files of earlier runs")
    if experience and not any(n in EXPERIENCED for n in bases):
        terminal.warn("--experience is read by heimdall-experience only, which is not among the policies: unused")
    elif experience:
        from perflearn.manage.experience import check_readable

        check_readable(experience)
    if not (0 < miss_budget < 1):  # NaN too
        raise UsageError(f"--miss-budget: a share of the intervals in (0, 1), got {miss_budget:g}")
    if miss_budget != 0.01 and not any(n in EXPERIENCED for n in bases):
        terminal.warn("--miss-budget is heimdall-experience's, which is not among the policies: unused")
    heimdall = any(b.startswith("heimdall") for b in bases)
    if not heimdall:  # taken and ignored without a word (session 52's audit)
        unused = [o for o, v in (("--model", None in models), ("--cost-model", None in cost_models),
                                 ("--headroom", None in headrooms), ("--host-quantile", None in quantiles),
                                 # the simulator's own: a live run refuses them below
                                 ("--profiled-speed", simulate and profiled_speed != 1.0),
                                 ("--no-follow-cost", simulate and not follow_cost),
                                 ("--react-ms", react_ms != 20.0)) if v]
        if unused:
            terminal.warn(f"{', '.join(unused)}: read by the heimdall policies only, none of which is among the "
                          "policies: unused")
    elif None in headrooms and all(b == "heimdall" for b in bases if b.startswith("heimdall")):
        terminal.warn("--headroom is read by the cheapest rules (heimdall-cheapest, -uncertain, -online, "
                      "-experience); the seed's heimdall keeps its slack as latency only: unused")
    if "sweep" in bases and trace != "ladder":  # a profile at the trace's few loads, not the buckets' ten
        terminal.warn(f"-p sweep on the {trace} trace profiles at its loads only; --trace ladder offers 10 to 110 % "
                      "of --max-rps, the loads heimdall's buckets are centred on")
    # NaN passes every comparison as False: finite and positive, said positively
    # bounded far beyond any service, so that none overflows (--target-ms 1e300 printed a 200-digit target)
    for option, value, most, what in (("--target-ms", target_ms, 3.6e6, "one hour"),
                                      ("--max-rps", max_rps, 1e9, "1e9 requests/s"), ("--mu", mu, 1e9, "1e9 requests/s")):
        if value is not None and not (0 < value <= most):
            raise UsageError(f"{option}: a number > 0 and at most {most:,.0f} ({what}), got {value:g}")
    if not (0 <= base_us <= 1e6):  # NaN too
        raise UsageError(f"--base-us: a delay of 0 to 1e6 us (one second), got {base_us:g}")
    if seed < 0:
        raise UsageError(f"--seed: a seed >= 0, got {seed}")
    unit_given = model_unit is not None  # --model-unit us typed was told from the default only by this
    model_unit = model_unit or "us"
    if model_unit not in ("us", "ms", "s"):
        raise UsageError(f"--model-unit: expected us, ms or s, got {model_unit!r}")
    check_png(figure, "--figure")
    check_output(csv, "--csv")  # it failed at the end, the whole run lost with it
    # a file there was replaced unsaid (a killed run's only copy, maybe); it is kept until the first interval (a
    # service that never started left it a header only, session 58's audit)
    if csv is not None and from_csv is None and csv.is_file() and csv.stat().st_size:
        terminal.warn(f"--csv {csv}: a file is there; this run's intervals replace it from its first")
    one_file_each([("--csv", csv), ("--store", store), ("--figure", figure), ("--from-csv", from_csv),
                    *(("--experience", path) for path in experience or [])])
    if trace not in TRACES:
        raise UsageError(f"--trace: expected {', '.join(TRACES)}, got {trace!r}")
    if not (1 <= seeds <= MAX_SEEDS):  # each is the whole protocol again: 1e9 ran until killed
        raise UsageError(f"--seeds: 1 to {MAX_SEEDS}, got {seeds}")
    if not (0 <= slow_host <= 1):  # NaN too
        raise UsageError(f"--slow-host: a share of the intervals in [0, 1], got {slow_host:g}")
    if slow_host and not simulate:
        raise UsageError("--slow-host: the simulator's host; a live host is as slow as it is (the manager measures it)")
    if not simulate:  # the simulator's own: a live run took them silently, and they changed nothing
        given = [o for o, v in (("--mu", mu != 12000.0), ("--base-us", base_us != 100.0), ("--seed", seed != 0),
                                ("--seeds", seeds != 1), ("--profiled-speed", profiled_speed != 1.0),
                                ("--no-follow-cost", not follow_cost)) if v]  # live, a --cost-model is followed
        if given:
            raise UsageError(f"{given[0]}: the simulator's option (--simulate); a live run measures its service")
    if not (1e-3 <= profiled_speed <= 1e3):  # 1e300 failed inside the simulator, naming no option
        raise UsageError(f"--profiled-speed: a speed ratio from 0.001 to 1000, got {profiled_speed:g}")
    if not (0.01 <= interval < math.inf):  # NaN too
        raise UsageError(f"--interval: at least 0.01 s and finite, got {interval:g}")
    if not (interval <= step_seconds < math.inf):  # it said both rules and neither value
        raise UsageError(f"--step-seconds: at least one interval ({interval:g} s) and finite, got {step_seconds:g}")
    if not (0 <= react_ms / 1e3 < interval):  # NaN too
        raise UsageError(f"--react-ms: 0 (off) or a tick shorter than the interval, got {react_ms:g}")
    tick = react_ms / 1e3 or None
    if tick and interval / tick > MAX_TICKS:  # --interval 1e7 with 20-ms ticks: 2 GB, then MemoryError
        raise UsageError(f"--react-ms: {interval / tick:.3g} ticks of {react_ms:g} ms in a {interval:g}-s interval, more "
                         f"than {MAX_TICKS:,}: a longer tick, or 0 (no reaction)")
    # the diurnal trace changes its rate every interval (--step-seconds sets its period, 12 steps): nothing straddles
    if trace != "diurnal" and not math.isclose(step_seconds / interval, round(step_seconds / interval), rel_tol=1e-6):
        said = f"--step-seconds {step_seconds:g} is {step_seconds / interval:.3g} intervals of {interval:g} s: "
        if simulate:  # the simulator's trace is made of whole intervals (trace_segments rounds each step)
            terminal.warn(said + f"each step is held {round(step_seconds / interval)} whole intervals")
        else:  # perflearn-load holds each step its seconds: it said "held 2 whole intervals" here too
            terminal.warn(said + "perflearn-load holds each step that long, so some intervals straddle two steps "
                          "(their load a mix); a whole number of intervals per step keeps them apart")
    try:
        space = ConfigSpace.make(cores, levels)
    except ValueError as exc:
        raise UsageError(f"--cores/--levels: {exc}") from None
    from perflearn.manage.power import Rapl, power_model, rapl_or_none

    try:
        power_ = power_model(power if power is not None else "server")
    except ValueError as exc:
        raise UsageError(f"--power: {exc}") from None
    if name is not None and (store is None or not name.strip()):  # ignored unsaid; "" took the default name
        raise UsageError("--name: an experiment's name in --store" + (", which is not given: nothing is recorded"
                                                                       if store is None else ", not empty"))
    if simulate:  # a live run's options would be taken silently and change nothing
        given = [option for option, value in (("--service", service), ("--max-rps", max_rps), ("--model", model),
                                              ("--cost-model", cost_model), ("--load-args", load_args),
                                              ("--protocol", protocol != "memcache-binary"),
                                              ("--model-unit", unit_given), ("--handover", handover is not None))
                 if value]
        if given:
            raise UsageError(f"{given[0]}: a live service's option; the simulator has its own service "
                             "(--mu, --base-us) and fits its own models")
    if service:
        _check_service_command(service)
        from perflearn.wire.load import PROTOCOLS as LOADABLE

        if protocol not in LOADABLE:  # it failed only once the first pass had started
            raise UsageError(f"--protocol: one perflearn-load drives ({', '.join(LOADABLE)}), got {protocol!r}")
    if from_csv is not None:
        if simulate or service:
            raise UsageError("--from-csv records a run that is over: give it without --simulate and --service")
        given = [o for o, v in (("--policy", policy != ["all"]), ("--figure", figure), ("--csv", csv),
                                ("--target-ms", target_ms), ("--max-rps", max_rps), ("--model", model),
                                ("--cost-model", cost_model), ("--experience", experience), ("--interleave", interleave),
                                ("--service-cpus", service_cpus), ("--headroom", headroom),
                                # the file's own configurations and load: these were taken unsaid (session 57's audit)
                                ("--cores", cores != 3), ("--levels", levels != 17), ("--react-ms", react_ms != 20.0),
                                ("--protocol", protocol != "memcache-binary"), ("--load-args", load_args),
                                ("--host-quantile", host_quantile), ("--miss-budget", miss_budget != 0.01),
                                ("--model-unit", unit_given), ("--handover", handover is not None)) if v]
        if given:  # the run's own command line may be given again; they were ignored unsaid (--figure wrote nothing)
            terminal.warn(f"ignored with --from-csv, which records every pass its file holds, at the file's own "
                          f"configurations and target: {', '.join(given)}")
        _from_csv(from_csv, store, name, trace, step_seconds, interval, power_ if power is not None else None)
        return
    if "sweep" in names and step_seconds / interval < 3 * len(space):  # Sweep.hold intervals each
        terminal.warn(f"sweep: {step_seconds:g}-s steps hold {step_seconds / interval:.0f} intervals, fewer than 3 for each "
                      f"of the {len(space)} configurations: each load measures only the fastest "
                      f"{max(1, int(step_seconds / interval) // 3)} of them it can run")
    # the passes in order, static first to compare with; a profile alone needs none: nothing is compared
    profiling = not simulate and all(n in PROFILERS for n in names)
    if interleave and any(n in PROFILERS for n in names):
        raise UsageError("--interleave compares policies; -p sweep profiles: run it on its own")
    slot = max(1, round(step_seconds / interval)) if interleave else None
    if handover is not None and not interleave:
        raise UsageError(f"--handover {handover:g}: the seconds between policies' turns; give it with --interleave")
    if handover is not None and not 0 <= handover <= 60:  # a transient's length: 1e9 built a trace until memory ran out
        raise UsageError(f"--handover {handover:g}: seconds from 0 to 60")
    order = ([] if profiling else ["static"]) + [n for n in names if n != "static"]
    rows = with_learning(order)
    rapl = None if simulate else rapl_or_none()  # looked up once: the label said and the energy read agree
    recording = _recording(store, name or f"manage-{'sim' if simulate else 'live'}-{time.strftime('%Y%m%d-%H%M%S')}",
                           rows if seeds == 1 or not simulate else [f"{r}@{s}" for s in range(seed, seed + seeds) for r in rows],
                           f"{'simulated' if simulate else service} on the {trace} trace, {cores} cores x {levels} levels",
                           power_.label if rapl is None else Rapl.label)
    cpus = _service_cpus(service_cpus, cores, simulate, live=bool(service) and not simulate)
    if simulate:
        _check_simulation_size(space, trace, step_seconds, interval, mu, heimdall)
        if target_ms is not None and target_ms * 1e3 <= base_us:  # static met 0 %, unsaid (session 55's audit)
            terminal.warn(f"--target-ms {target_ms:g}: at or below the simulated service's fixed delay (--base-us "
                          f"{base_us:g} us): no configuration can meet it")
        if None in quantiles and not slow_host and any(b.startswith("heimdall") for b in bases):
            # the simulated profile knows the host only when it varies (session 56's audit: byte-identical CSVs)
            terminal.warn("--host-quantile: the simulated Heimdall's model knows the host only with --slow-host: "
                          "unused")
        with recording as record:  # said at the first pass recorded: the simulation's own checks come first
            _simulate(names, space, mu, base_us * 1e-6, trace, step_seconds, interval, target_ms, seed, seeds, figure,
                      csv, record, power_, tick, profiled_speed, follow_cost, headrooms.get(None), experience,
                      miss_budget, slot, slow_host, quantiles.get(None), stored=store is not None)
        return
    if not service:
        raise UsageError("give --service COMMAND to manage a live service, or --simulate")
    if max_rps is None or max_rps <= 0 or target_ms is None:
        raise UsageError("a live service needs --max-rps and --target-ms (from the knee of a load sweep: perflearn knee)")
    if any(n.startswith("heimdall") and variant(n)[1] is None for n in names) and None not in models:
        raise UsageError("heimdall needs --model (a perflearn model of p95 from cores, level or quota, and rps)")
    with recording as record:
        _live(names, space, service, protocol, max_rps, target_ms / 1e3, models,
              {"us": 1e-6, "ms": 1e-3, "s": 1.0}[model_unit], trace, step_seconds, interval, figure, csv, record,
              shlex.split(load_args), power_, tick, cost_models, order, headrooms, cpus, experience, miss_budget, slot,
              quantiles, rapl, store=store, unit_given=unit_given, handover_s=handover)


LABEL = re.compile(r"[A-Za-z0-9_.-]+")


def _labelled(values: list[str] | None, option: str) -> dict[str | None, Path]:
    """--model / --cost-model as {label: path}; None labels the model of unlabelled policies.
    A value is LABEL=PATH unless it is a path that exists (a directory may hold '=')."""
    models: dict[str | None, Path] = {}
    for value in values or []:
        label, sep, path = value.partition("=")
        if not sep or not LABEL.fullmatch(label) or Path(value).exists():
            label, path = None, value
        if label in models:
            raise UsageError(f"{option}: two models for {'unlabelled policies' if label is None else repr(label)}: "
                             f"{models[label]} and {path}")
        models[label] = Path(path)
    return models


def _quantiles(values: list[str] | None) -> dict[str | None, float]:
    """--host-quantile as {label: q}; None for unlabelled policies."""
    return _per_label(values, "--host-quantile", "quantile", lambda q: 0 <= q <= 1,
                      "a quantile in [0, 1], e.g. 0.5 or blind=0.5")


def _headrooms(values: list[str] | None) -> dict[str | None, float]:
    """--headroom as {label: fraction}; None for unlabelled policies."""
    return _per_label(values, "--headroom", "headroom", lambda h: 0 < h <= 1,
                      "a fraction of the capacity in (0, 1], e.g. 0.9 or wide=0.95")


def _per_label(values: list[str] | None, option: str, noun: str, valid, what: str) -> dict[str | None, float]:
    """[LABEL=]NUMBER values of ``option`` as {label: number}, one each; None for unlabelled policies."""
    numbers: dict[str | None, float] = {}
    for value in values or []:
        label, sep, text = value.rpartition("=")
        key = label if sep else None
        if sep and not LABEL.fullmatch(label):
            raise UsageError(f"{option} {value!r}: LABEL=NUMBER, the label letters, digits, '_', '.', '-'")
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not valid(number):  # NaN too
            raise UsageError(f"{option} {value!r}: {what}")
        if key in numbers:
            raise UsageError(f"{option}: two {noun}s for {'unlabelled policies' if key is None else repr(key)}")
        numbers[key] = number
    return numbers


def _check_service_command(command: str) -> None:
    """--service names its port as {port}, and nothing else in braces (a literal brace is {{ or }})."""
    import string

    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(command) if f is not None}
    except ValueError as exc:
        raise UsageError(f"{exc} in {command!r} (a literal brace is {{{{ or }}}})", where="--service") from None
    if fields - {"port"}:
        raise UsageError(f"{{{sorted(fields - {'port'})[0]}}} in {command!r}: the only placeholder is {{port}}",
                         where="--service")
    if "port" not in fields:
        raise UsageError(f"no {{port}} in {command!r}: the manager picks a free port and the service must listen on it",
                         where="--service")
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        raise UsageError(f"not a command line: {command!r}", where="--service") from None
    if shutil.which(program) is None:  # found after the first pass began, exit 1 and the option unnamed
        raise UsageError(f"no program {program!r} ({'not executable' if os.path.exists(program) else 'not found'})",
                         where="--service")


def _check_labels(names: list[str], models: dict, cost_models: dict, simulate: bool, quantiles: dict,
                  headrooms: dict) -> None:
    """NAME:LABEL policies: heimdall's only (the label picks its models), live only, and
    each label given its --model; a labelled model no policy takes is said to be unused."""
    from perflearn.manage.policies import variant

    labels: dict[str, list[str]] = {}  # label -> the policies carrying it
    for name in names:
        base, label = variant(name)
        if label is None:
            continue
        if not base.startswith("heimdall") or not LABEL.fullmatch(label):
            raise UsageError(f"--policy {name!r}: only heimdall policies take a label (heimdall-cheapest:LABEL, "
                             "letters, digits, '_', '.', '-'), which picks their --model LABEL=PATH")
        if simulate:
            raise UsageError(f"--policy {name!r}: a label picks a --model, and the simulator fits its own: live only")
        if label not in models:
            raise UsageError(f"--policy {name!r}: no --model {label}=PATH")
        labels.setdefault(label, []).append(name)
    for option, given, what in (("--host-quantile", quantiles, "LABEL=Q: labels pick live models; the simulator "
                                 "takes one quantile"),
                                ("--headroom", headrooms, "LABEL=H: labels pick live models; the simulator takes "
                                 "one headroom")):
        if simulate and given.keys() - {None}:
            raise UsageError(f"{option} {what}")
    # the seed's rule keeps its slack as latency only: a headroom only it carries is read by none
    seeds_own = [label for label in headrooms.keys() & labels.keys()
                 if all(variant(name)[0] == "heimdall" for name in labels[label])]
    if seeds_own:
        terminal.warn(f"--headroom {seeds_own[0]}=...: {labels[seeds_own[0]][0]} is the seed's heimdall, which reads "
                      "no headroom (the cheapest rules do): unused")
    for option, given in (("--model", models), ("--cost-model", cost_models), ("--host-quantile", quantiles),
                          ("--headroom", headrooms)):
        for label in given.keys() - labels.keys() - {None}:
            terminal.warn(f"{option} {label}=...: no policy is labelled {label!r} (e.g. -p heimdall-cheapest:{label}): unused")


def _option(option: str, label: str | None) -> str:
    """How a model is named in messages: --model, or --model LABEL=... ."""
    return option if label is None else f"{option} {label}=..."


def _service_cpus(text: str | None, cores: int, simulate: bool, live: bool = False) -> list[int] | None:
    """--service-cpus checked before anything starts: CPUs this process may use, at least --cores of them."""

    if text is None:
        usable = len(os.sched_getaffinity(0))
        if live and cores > usable:  # it failed once the first pass had started
            raise UsageError(f"--cores {cores}: this process may use {usable} CPU(s); a live service gets at most those")
        return None
    if simulate:
        raise UsageError("--service-cpus places a live service; the simulator has no CPUs to place")

    from perflearn.manage.live import check_service_cpus, parse_service_cpus

    return check_service_cpus(parse_service_cpus(text), sorted(os.sched_getaffinity(0)), cores)


# The simulator's bounds: a trace of at most this many intervals, and a note above this many
# forecasts (configurations x intervals): 64 cores x 32 levels on the steps trace (1.1
# million) took 4 min a policy here, 32 x 10 (176 000) 15 s.
SIMULATION_INTERVALS = 100_000
SIMULATION_SLOW = 500_000
# and a note above this many profiling rows for Heimdall's model: 64 x 64 (245 760) took 54 s to simulate and
# 140 s to fit before the first pass, without a word; 32 x 10 (19 200) 13 s in all
PROFILE_SLOW = 60_000
MAX_SEEDS = 1_000  # --seeds: a thousand repetitions of the protocol is hours already
MAX_TICKS = 1_000  # per interval (the default 20-ms tick: 50 in a second)
# at the maximum load; fewer, and a load step is long within a tick's Poisson noise (simulated, 2-s steps:
# 100 % of intervals met at 20-ms ticks, 670 requests; 95 % at 10 ms, 91 % at 3 ms, 77 % at 1 ms)
TICK_REQUESTS = 500


def _kilojoules(joules: float) -> str:
    """Under 10 kJ a third decimal: 73 J and 72 J both read "0.07 kJ" (session 57's audit)."""
    return f"{joules / 1e3:.3f} kJ" if joules < 1e4 else f"{joules / 1e3:.2f} kJ"


def _signed_percent(value: float) -> str:
    return f"{round(value, 1) + 0.0:+.1f}%"  # -0.04 printed "-0.0%"


def _say_if_ticks_hold_too_few(tick: float | None, max_rps: float, interval: float) -> None:
    """Heimdall reacts when a tick's requests exceed the expected by 4 standard deviations:
    in short ticks a load step stays within the noise longer (--react-ms 1 met 77 % where 20 met 100 %)."""
    if tick and max_rps * tick < TICK_REQUESTS:
        enough = math.ceil(TICK_REQUESTS / max_rps * 1e3)  # printed as a float, 1e+02 read for 100
        # --mu 10 advised --react-ms 18518, which the check of a tick shorter than the interval refuses
        advice = (f"--react-ms {enough:d} or more" if enough < interval * 1e3 else
                  f"no tick shorter than the {interval:g}-s interval holds that many: --react-ms 0 turns it off")
        terminal.warn(f"--react-ms {tick * 1e3:g}: a tick holds {max_rps * tick:.3g} requests at the maximum load, "
                      f"fewer than {TICK_REQUESTS}: a load step is told from noise late or never, and Heimdall misses "
                      f"more ({advice})")


def _say_blind_quantiles(quantiles: dict, predictors: dict) -> None:
    """A --host-quantile whose models were not fitted on the host-speed probe plans for no
    host: it was taken and changed nothing (session 56's audit)."""
    for key in quantiles:
        takers = [label for label in predictors if key is None or label == key]
        if takers and all("host_probe_us" not in predictors[label].features for label in takers):
            terminal.warn(f"{_option('--host-quantile', key)}: {_option('--model', takers[0])} was not fitted on "
                          "host_probe_us, so it plans for no host: unused")


def _say_if_intervals_hold_too_few(trace: str, max_rps: float, step_seconds: float, interval: float,
                                   least: int = 20) -> None:
    """At 3 req/s a 1-s interval often had no request at all: live, none on the wire is also how a
    service that stopped answering looks, so it counts as missed, and static read 77.8 % met."""
    lowest = min(r for _, r in _live_segments(trace, max_rps, step_seconds, interval) if r > 0) * interval
    if lowest < least:
        terminal.warn(f"--max-rps {max_rps:g}: an interval at the trace's lowest load holds about {lowest:.2g} "
                      f"requests: its p95 is a few requests', and one with none counts as missed (at least {least}: "
                      "a longer --interval or a higher --max-rps)")


def _check_simulation_size(space, trace: str, step_seconds: float, interval: float, mu: float,
                           profiles: bool) -> None:
    if not 1 <= mu <= 1e9:  # the simulated service's latencies stay representable
        raise UsageError(f"--mu: requests/s one core serves, 1 to 1e9 in the simulator, got {mu:g}")
    intervals = (12 if trace == "diurnal" else 11) * step_seconds / interval
    if intervals > SIMULATION_INTERVALS:
        raise UsageError(f"--step-seconds/--interval: the {trace} trace would be {intervals:.3g} intervals, more than "
                         f"the simulator's {SIMULATION_INTERVALS:,}: shorter steps or a longer --interval")
    if len(space) * intervals > SIMULATION_SLOW:
        terminal.info(f"{len(space)} configurations x {intervals:.0f} intervals: this simulation takes minutes "
                      "per policy")
    from perflearn.manage.compare import PROFILE_INTERVALS, PROFILE_LOADS

    rows = len(space) * PROFILE_LOADS * PROFILE_INTERVALS
    if profiles and rows > PROFILE_SLOW:
        terminal.info(f"{len(space)} configurations: profiling them for Heimdall's model ({rows:,} simulated "
                      "intervals) and fitting it takes minutes before the first pass, each seed")


@contextmanager
def _recording(store: Path | None, name: str, policies: list[str], description: str, power_label: str):
    """Where each policy's run goes as its loop ends: the store, or nowhere. A store that
    exists is opened on entry (another schema, or the name taken, is refused before anything
    runs); a new one is made with the first pass recorded, so a bad flag found later (a
    model refused) leaves no file behind. Between records the file is let go, as a sweep
    lets go of it: held for a whole run, `ls` and `show` were refused for its length."""
    if store is None:
        yield _Record()
        return
    from perflearn.manage.record import PolicyRecorder
    from perflearn.store import open_store

    if not store.exists():
        folder = store.parent
        if not folder.is_dir():
            raise UsageError(f"--store {store}: no folder {folder} to write in")
        refused = unwritable(folder)  # found at the first pass's end, static's pass was lost
        if refused:
            raise UsageError(f"--store {store}: cannot write in {folder} ({refused})")
    with ExitStack() as stack:
        recorder = None

        def opened() -> PolicyRecorder:
            nonlocal recorder
            if recorder is None:
                recorder = PolicyRecorder(stack.enter_context(open_store(store)), name, policies, description,
                                          power_label)
            return recorder

        def record(*args, **kwargs) -> None:
            opened().record(*args, **kwargs)
            recorder.store.release()

        if store.exists():
            opened().store.release()
        yield _Record(record, f"recording in {store} as experiment {name!r}")


class _Record:
    """Records a pass; says where, once, when the run starts (``start``) or at its first record:
    said on entry, "recording in p.duckdb" came before a model was refused, and nothing was."""

    def __init__(self, record=None, where: str = ""):
        self.record, self.where = record, where

    def start(self) -> None:
        if self.where:
            terminal.info(self.where)
            self.where = ""

    def __call__(self, *args, **kwargs) -> None:
        self.start()
        if self.record is not None:
            self.record(*args, **kwargs)


# what the manager's own records hold besides latency: a model of one of them given as --model
# (the two models swapped) passed the unit check, and Heimdall took CPU µs for seconds of latency
NOT_LATENCY = ("cpu_us_per_request", "power_w", "energy_j", "utilisation", "rps", "offered_rps", "host_probe_us",
               "throttled_ms")
TAIL = re.compile(r"(^|[._])p9\d")  # p95, p99, wire.p95, p95_us: what tail latency is called here


def _of(model, kind: str, what: str):
    """``model``, if its target is of ``kind`` (latency for --model, cost for --cost-model), as
    far as its name tells: a model of another of the manager's columns is refused in one line."""
    if kind == "latency" and model.target in NOT_LATENCY:
        raise UsageError(f"{what} is a model of {model.target}, not of tail latency"
                         + (": give it as --cost-model" if model.target == "cpu_us_per_request" else ""))
    if kind == "cost" and TAIL.search(model.target):
        raise UsageError(f"{what} is a model of {model.target}, not of the CPU time per request: give it as --model")
    if kind == "cost" and model.target in NOT_LATENCY and model.target != "cpu_us_per_request":
        # a model of utilisation was taken: its 0.5 read as 0.5 µs a request, and Heimdall ran the maximum throughout
        raise UsageError(f"{what} is a model of {model.target}, not of the CPU time per request (cpu_us_per_request)")
    return model


def _live(names, space, command, protocol, max_rps, target, model_dirs, scale, trace, step_seconds, interval,
          figure, csv, record, load_args, power, tick, cost_dirs, order, headrooms, service_cpus=None, experience_csvs=None,
          miss_budget=0.01, slot=None, quantiles: dict | None = None, rapl=None, store=None,
          unit_given: bool = False, handover_s: float | None = None) -> None:
    from perflearn.manage.compare import check_unit, figure as draw, model_predictor
    from perflearn.manage.hostspeed import slow_intervals
    from perflearn.manage.journal import IntervalCsv
    from perflearn.manage.live import LiveService, handover_intervals, work_directory, write_trace
    from perflearn.manage.loop import comparison, summarize
    from perflearn.manage.policies import HOST_QUANTILE, make_policy, variant
    from perflearn.manage.simulator import per_interval
    from perflearn.runner.process import free_port

    from perflearn.learn import load

    from perflearn.manage.experience import Experience

    experience = (Experience.from_csvs(experience_csvs, space, target, max_rps)
                  if experience_csvs and any(variant(n)[0] == "heimdall-experience" for n in names) else None)
    if experience is not None:
        _say_experience(experience)
    # each label's model of p95, and of the CPU µs per request the service took when profiled
    predictors = {label: model_predictor(_of(load(path), "latency", _option("--model", label)), scale,
                                         what=_option("--model", label))
                  for label, path in model_dirs.items()}
    for label, predict in predictors.items():
        check_unit(predict, space, target, max_rps, _option("--model", label),
                   {1e-6: "us", 1e-3: "ms", 1.0: "s"}.get(scale, f"units of {scale:g} s"),
                   warn=terminal.warn if unit_given else None)
        for note in predict.beyond(space, max_rps):  # forecast there all the same, as predict says it
            terminal.warn(f"{_option('--model', label)} at 20 % and 100 % of --max-rps over the {len(space)} "
                          f"configurations: {note}")
    costs = {label: model_predictor(_of(load(path), "cost", _option("--cost-model", label)), 1e-6,
                                    what=_option("--cost-model", label))
             for label, path in cost_dirs.items()}
    if any(n.startswith("heimdall") for n in names):
        _say_if_ticks_hold_too_few(tick, max_rps, interval)
    _say_if_intervals_hold_too_few(trace, max_rps, step_seconds, interval)
    record.start()  # the models taken: the run starts
    if rapl is None:
        terminal.info("energy: no RAPL on this machine; power is modelled from the configuration and utilisation")
    else:  # measured, every interval; --power still prices the same intervals afterwards (--from-csv)
        terminal.info(f"energy: measured by RAPL ({len(rapl.files)} package counter(s)), the harness's share included")
    workdir = work_directory()  # and those of managers killed outright removed
    segments = _live_segments(trace, max_rps, step_seconds, interval)
    if trace == "steps":  # perflearn-load's own steps
        shape = ["--profile", "steps", "--step-seconds", f"{step_seconds:g}"]
    else:  # the simulator's trace, as a perflearn-load trace file
        shape = ["--profile", "trace", "--trace", str(write_trace(segments, Path(workdir.name) / f"{trace}.trace"))]
    offered = per_interval(segments, interval)  # the rate each interval was offered, in the records
    intervals = len(offered)
    handover = handover_intervals(interval, handover_s) if slot else 0
    frames = {}

    def service(label: str, loads: list[float] | None = None) -> LiveService:
        given, count = shape, intervals
        if loads is not None:  # the interleaved turns: each step of the trace once per policy
            given = ["--profile", "trace", "--trace",
                     str(write_trace([(interval, rps) for rps in loads], Path(workdir.name) / f"{label}.trace"))]
            count = len(loads)
            terminal.info(f"{label}: {len(made)} policies take turns every {slot} intervals"
                          + (f", each turn after {handover} at its own configuration, recorded in no pass (the "
                             "hand-over)" if handover else ""))
        port = free_port()
        load = ["--server", f"127.0.0.1:{port}", "--protocol", protocol, "--rate", f"{max_rps:g}", *given,
                "--preload", "--connections", "8", "--drain", "1", *load_args]
        terminal.info(f"{label}: {count} intervals of {interval:g} s on {command.format(port=port)}")
        live = LiveService(command.format(port=port), port, space, interval, protocol, load, tick_s=tick,
                           service_cpus=service_cpus, rapl=rapl, warn=terminal.warn)
        if not frames:  # the first pass: say the service's speed knob and placement once
            terminal.info(live.speed)
            if live.harness:
                terminal.info(f"service on CPU {','.join(map(str, live.cpus))}; load generator, sniffer and manager "
                              f"on CPU {','.join(map(str, live.harness))}")
        return live

    quantiles = quantiles or {}
    _say_blind_quantiles(quantiles, predictors)
    made = {}
    for name in order:
        base, label = variant(name)
        policy = made[name] = make_policy(name, space, target, max_rps, interval, power=power, intervals=intervals,
                                          model=predictors.get(label), cost_model=costs.get(label, costs.get(None)),
                                          headroom=headrooms.get(label, headrooms.get(None)),
                                          host_quantile=quantiles.get(label, quantiles.get(None, HOST_QUANTILE)),
                                          experience=experience, miss_budget=miss_budget)
        if base == "heimdall-experience":
            _say_price(name, policy, miss_budget)
    # every interval on disk as it ends: a manager killed outright loses only the one in flight
    journal = IntervalCsv(csv) if csv else None
    alarms = _Alarms(journal)
    with workdir, journal or nullcontext():  # each pass recorded in the store as it ends (static's first: the energy's reference)
        try:
            priced = StaticFirst(record, "static" in made)
            for label, frame, wall, complete in comparison(made, service, offered, interval, power, slot,
                                                           log=alarms, handover=handover):
                frames[label] = frame
                priced.add(label, frame, wall, complete)
        except BaseException as exc:  # interrupted, or the service failed: nothing measured is lost
            why = (exc.why if isinstance(exc, Terminated) else "interrupted" if isinstance(exc, KeyboardInterrupt)
                   else "stopped")
            try:
                priced.flush()  # what waited for static, unpriced
            finally:  # said however the flush ended (another signal)
                if store is not None and priced.recorded:
                    terminal.warn(f"{why}: recorded in {store}: {', '.join(priced.recorded)}")
                if journal and journal.rows:
                    terminal.warn(f"{why}: the {journal.rows} intervals run so far are in {csv}")
                    # a second Ctrl-C is delivered at once, its pass's recording cut short: said, not lost unsaid
                    unsaved = [label for label in journal.labels if label not in priced.recorded]
                    if store is not None and unsaved:
                        terminal.warn(f"{why}: {', '.join(unsaved)} not in {store} (stopped before it was recorded): "
                                      f"their intervals are in {csv} only (perflearn manage --from-csv records a file)")
            raise
    reference = frames["static"]["energy_j"].sum() if "static" in frames else None  # every pass ended: whole passes
    shown = frames  # static too when not asked for: the energy's reference, as the simulator shows it
    slow = slow_intervals(frames)
    table = Table("policy", "QoS guarantee", "tardiness", f"energy ({power.label if rapl is None else rapl.label})",
                  "vs static", "changes",
                  *(["host slow"] if slow else []), box=None)
    for name, frame in shown.items():
        row = summarize(frame, reference)
        table.add_row(name, f"{row['qos_guarantee']:.1f}%", _tardiness(row['qos_tardiness']), _kilojoules(row["energy_j"]),
                      _signed_percent(row["energy_reduction"]) if reference else "-", str(row["changes"]),
                      *([f"{slow[name]:.0f}%"] if slow else []))
    terminal.out.print(table)
    _say_policy_failures(frames)
    if slow:  # the evaluated passes and static, the energy's reference even when not shown; not a learning pass
        _warn_if_hosts_differ(_static_first(slow, names))
    if figure:
        draw(_static_first(frames, names), figure, f"live {command.split()[0]}, target {target * 1e3:.2f} ms")
        terminal.info(f"figure: {figure}")
    if csv:
        terminal.info(f"intervals: {csv}")


def _static_first(by_policy: dict, names: list[str]) -> dict:
    """``names``' entries of ``by_policy``, static's first whenever it is there: the energy's
    reference, shown as the table shows its row (a figure of -p X -p Y left it out)."""
    return {n: by_policy[n] for n in dict.fromkeys(["static", *names]) if n in by_policy}


class StaticFirst:
    """Each pass to ``record`` as it ends, priced against static's energy: passes that end
    before static's (a learning pass ahead of interleaved turns) wait for it (they were
    stored without an energy reduction); ``flush`` records what still waits, unpriced. A
    pass cut short is stored with why (``frame.attrs["stopped"]``)."""

    def __init__(self, record, static_comes: bool):
        self.record, self.static_comes = record, static_comes
        self.static = None  # static's pass
        self.waiting: list[tuple] = []
        self.recorded: list[str] = []  # the labels recorded, in order (a pass a signal cut short is not)

    def add(self, label: str, frame, wall: float, complete: bool) -> None:
        if label == "static":
            self.static = frame
        self.waiting.append((label, frame, wall, complete))
        if self.static is not None or not self.static_comes:
            self.flush()

    def flush(self) -> None:
        from perflearn.lifetime import signals_held

        while self.waiting:
            label, frame, wall, complete = self.waiting.pop(0)
            # a store call Ctrl-C cuts gives up ("Query interrupted"): held, and the pass counted with it. A second
            # signal is delivered at once: that pass is given up, not tried again (it could wait as long again)
            with signals_held():
                self.record(label, frame, static_energy(self.static, frame), wall, complete,
                            frame.attrs.get("stopped"))
                self.recorded.append(label)


def static_energy(static, frame) -> float | None:
    """Static's energy as the reference of ``frame``'s: over its first as many intervals as
    ``frame`` ran (a whole pass: all of them; against static's whole pass, one cut 5
    intervals short of 110 read 9.6 % saved where the whole pass saved 6.1 %)."""
    if static is None or len(static) < len(frame):  # static cut short: a longer pass has no reference
        return None  # (a whole pass priced against static's first half read -56 % saved for +22 %)
    return float(static["energy_j"].iloc[:len(frame)].sum())


class _Alarms:
    """Told each live interval as it ends: it goes on to ``journal`` (--csv), and a stalled
    latency stream, a failed actuation or a failed policy is said on the terminal, the
    first of each kind in a pass (they were in the notes only, and the run looked fine)."""

    KINDS = ("latency stream stalled", "actuation failed", "policy failed")

    def __init__(self, journal):
        self.journal, self.said = journal, set()

    def __call__(self, label: str, record) -> None:
        if self.journal is not None:
            self.journal(label, record)
        for kind in self.KINDS:
            if kind in record.note and (label, kind) not in self.said:
                self.said.add((label, kind))
                said = next(part for part in record.note.split("; ") if kind in part)
                terminal.warn(f"{label}, interval at {record.t:g} s: {said} (each interval's note: --csv, --store)")


def _live_segments(trace: str, max_rps: float, step_seconds: float, interval: float) -> list[tuple[float, float]]:
    """The live trace as (seconds, req/s) segments: perflearn-load's own steps, whose 0 %
    is no load (the simulator's is 5 %), or the simulator's trace replayed."""
    from perflearn.manage.simulator import steps_profile, trace_segments

    if trace == "steps":
        return steps_profile(max_rps, step_seconds, floor=0.0)
    return trace_segments(trace, max_rps, step_seconds, interval)


def _from_csv(path: Path, store: Path | None, name: str | None, trace: str, step_seconds: float, interval: float,
              power) -> None:
    """``--from-csv``: an earlier live run's passes recorded in ``store``, as ``_live``
    records them (static's energy the reference), with the file's energy, or repriced by
    ``power`` when given (the file does not say whether RAPL measured it or which model
    priced it: kept, it is labelled as the file's; repricing a measured run had replaced
    its RAPL joules with modelled ones, unsaid); a pass with fewer intervals than the
    trace has is recorded as failed, as an interrupted one is."""
    from perflearn.manage.journal import read_passes
    from perflearn.manage.loop import energy_under
    from perflearn.manage.simulator import per_interval

    if store is None:
        raise UsageError("--from-csv records in a results store: give --store")
    passes = read_passes(path, terminal.warn)
    unpriced = [p for p, f in passes.items() if {"power_w", "energy_j"} - set(f) or f["energy_j"].isna().any()]
    if power is None and unpriced:
        from perflearn.manage.power import power_model

        power = power_model("server")
        terminal.warn(f"{path}: {', '.join(unpriced)} without energy in every interval: every pass priced by the "
                      f"{power.label} model (--power chooses another)")
    if power is None:
        passes = {label: frame.sort_values("t").reset_index(drop=True) for label, frame in passes.items()}
        power_label = f"as in {path.name} (RAPL or a model: the file does not say)"
    else:
        blank = {p: int(f["utilisation"].isna().sum()) for p, f in passes.items() if f["utilisation"].isna().any()}
        if blank:  # priced from utilisation: an empty cell was 0 J, and the pass 100 % saved
            policy, n = next(iter(blank.items()))
            way = ("the file lacks energy too, so it cannot be recorded priced" if unpriced
                   else "leave out --power to keep the file's energy")  # --power was not given when energy lacks
            raise UsageError(f"{path}: {policy} has {n} interval(s) without utilisation: a power model cannot "
                             f"price them ({way})")
        passes = {label: energy_under(frame, power).reset_index(drop=True) for label, frame in passes.items()}
        power_label = power.label
        terminal.info(f"energy repriced under the {power.label} model: the file's power_w and energy_j are replaced")
    shape = per_interval(_live_segments(trace, 1.0, step_seconds, interval), interval)  # of --max-rps
    intervals = len(shape)
    _say_if_not_the_trace(path, passes, shape, trace, step_seconds, interval)
    labels = sorted(passes, key=lambda p: p != "static")  # static first, as run: the energy's reference
    over = {p: len(f) for p, f in passes.items() if len(f) > intervals}
    if over:  # a pass longer than the trace: another trace, or rows twice (it was "cut short", 111 of 110)
        policy, n = next(iter(over.items()))
        raise UsageError(f"{path}: {policy} has {n} intervals, more than the {intervals} of the {trace} trace at "
                         f"--step-seconds {step_seconds:g} and --interval {interval:g}: give the run's own, or a "
                         "row is there twice")
    late = {p: float(f["t"].max()) for p, f in passes.items() if f["t"].max() > (intervals + 0.5) * interval}
    if late:  # t = 1e12 was taken: static's energy read 2.8e13 J, and every other pass 100 % saved (session 57's audit)
        policy, t = next(iter(late.items()))
        raise UsageError(f"{path}: {policy} has an interval at t = {t:g} s, past the {intervals * interval:g} s of the "
                         f"{trace} trace at --step-seconds {step_seconds:g} and --interval {interval:g}: give the "
                         "run's own, or the time is wrong")
    _refuse_a_hole(path, passes, interval)
    cut = {p: len(f) for p, f in passes.items() if len(f) != intervals}
    if len(passes) > 1 and len(cut) == len(passes) and len(set(cut.values())) == 1:  # other options, or interleaved
        terminal.warn(f"{path}: every pass has {next(iter(cut.values()))} intervals, the {trace} trace at "
                      f"--step-seconds {step_seconds:g} and --interval {interval:g} has {intervals}: unless the run "
                      "was stopped, give its own (each pass is recorded as failed)")
    if "static" not in passes:
        terminal.warn(f"{path}: no static pass, the energy's reference: the passes are recorded without an energy "
                      "reduction")
    elif "static" in cut:
        longer = [p for p in labels if len(passes[p]) > cut["static"]]
        terminal.warn(f"{path}: static's pass was cut short ({cut['static']} of {intervals} intervals): "
                      + (f"the passes longer than it ({', '.join(longer)}) are recorded without an energy reduction"
                         if longer else "no pass is longer, so each is priced against static's as far as it ran"))
    with _recording(store, name or f"manage-{path.name.split('.')[0]}", labels, f"recorded from {path} ({trace} trace)",
                    power_label) as record:
        for policy in labels:
            frame = passes[policy]
            record(policy, frame, static_energy(passes.get("static"), frame), float(frame["t"].max()), policy not in cut,
                   f"cut short: {len(frame)} of the trace's {intervals} intervals" if policy in cut else None)
    terminal.info(f"{len(labels)} passes recorded" + (
        "; cut short (failed runs): " + ", ".join(f"{p} ({n} of {intervals} intervals)" for p, n in cut.items())
        if cut else f", each of the {intervals} intervals of the trace"))


def _refuse_a_hole(path: Path, passes: dict, interval: float) -> None:
    """A row missing inside a pass: it read as a pass cut short at its end (109 of 110), the
    interval after the hole was charged the hole's energy too, and the energy compared with
    static's first 109 (session 61's audit). The manager writes every interval, a stalled
    one too. Passes that took turns on one service (``--interleave``) share no interval:
    each has holes by design, and is not checked."""
    from itertools import combinations

    import numpy as np

    steps = {p: f["t"].to_numpy(dtype=float) / interval for p, f in passes.items()}
    if any(np.abs(k - np.round(k)).max() > 0.01 for k in steps.values()):
        return  # not on this --interval's grid: another interval, said by the trace's check
    index = {p: set(np.round(k).astype(int)) for p, k in steps.items()}
    if len(index) > 1 and not any(a & b for a, b in combinations(index.values(), 2)):
        return
    for policy, taken in index.items():
        holes = sorted(set(range(1, max(taken) + 1)) - taken)
        if holes:
            raise UsageError(f"{path}: {policy} has no interval at t = {holes[0] * interval:g} s, before its last at "
                             f"{max(taken) * interval:g} s: a row is missing inside the pass (the manager writes "
                             "every interval, a stalled one too); give --interval if the run's was another")


def _say_if_not_the_trace(path: Path, passes: dict, shape: list[float], trace: str, step_seconds: float,
                          interval: float) -> None:
    """The file's offered loads against the trace named (at whatever --max-rps): a ladder
    sweep was recorded as a "steps trace", both being 11 steps long (session 59's audit)."""
    import numpy as np

    for policy, frame in passes.items():
        offered = frame["offered_rps"].to_numpy(dtype=float)[:len(shape)] if "offered_rps" in frame else []
        expected = np.asarray(shape[:len(offered)])
        known = np.isfinite(offered)
        if not known.any() or not (expected[known] > 0).any():
            continue
        scale = float(offered[known] @ expected[known] / (expected[known] @ expected[known]))  # the run's --max-rps
        off = np.abs(offered[known] - scale * expected[known]) > 0.01 * max(float(offered[known].max()), 1e-9)
        if off.any():
            row = int(np.flatnonzero(known)[off.argmax()])
            terminal.warn(f"{path}: {policy}'s offered loads are not the {trace} trace's at --step-seconds "
                          f"{step_seconds:g} and --interval {interval:g} (its interval at t = {frame['t'].iloc[row]:g} s "
                          f"was offered {offered[row]:g} req/s): give the run's own --trace, --step-seconds and "
                          "--interval, which the store's description records")
            return


def _warn_if_hosts_differ(slow: dict[str, float]) -> None:
    from perflearn.manage.hostspeed import SLOW_RATIO, hosts_differ

    differ = hosts_differ(slow)
    if differ:
        slowest, fastest = differ
        terminal.warn(f"the host ran fixed work {SLOW_RATIO:g}x or more slower than its fastest in {slow[slowest]:.0f}% of "
                      f"{slowest}'s intervals but {slow[fastest]:.0f}% of {fastest}'s: their QoS is not comparable; "
                      "run them again (docs/manage.md, \"A slow host\")")


def _say_price(name: str, policy, miss_budget: float) -> None:
    """heimdall-experience's price of a miss, and whether its plan keeps to --miss-budget
    (at the highest price it may not: the experience says misses there, whatever it costs)."""
    from perflearn.manage.experience import LEAST

    if not math.isfinite(policy.expected_share):  # printed "nan %": no load had a configuration known
        terminal.warn(f"{name}: its experience knows no configuration at any load (at least {LEAST} intervals of one "
                      "at one load): no price is set from it, so misses are avoided at any cost where this run's own "
                      "intervals teach it, and it decides as heimdall-cheapest elsewhere")
        return
    said = f"{name}: a miss priced {policy.price:.3g} W; {policy.expected_share * 100:.4g} % of intervals expected to miss"
    if policy.expected_share > miss_budget + 1e-12:
        terminal.warn(f"{said}: more than --miss-budget {miss_budget * 100:g} % at any price (its experience missed "
                      "there in every configuration it priced)")
    else:
        terminal.info(said)


def _say_experience(experience) -> None:
    from perflearn.manage.experience import LEAST

    known = int((experience.intervals >= LEAST).any(axis=1)[1:].sum())
    terminal.info(f"experience: {len(experience)} intervals from {experience.files} file(s); configurations known at "
                  f"{known} of {experience.buckets} loads")
    if experience.foreign:  # 532 of 545 intervals dropped, unsaid (session 54's audit)
        terminal.warn(f"experience: {experience.foreign} interval(s) under load ran a configuration outside "
                      f"{len(experience.space.cores)} cores x {len(experience.space.levels)} levels (another "
                      "--cores or --levels): left out")
    if experience.beyond:  # a ladder sweep's 110 % step read as the maximum load's misses (session 59's audit)
        terminal.warn(f"experience: {experience.beyond} interval(s) at a load past --max-rps "
                      f"{experience.max_rps:.0f} req/s (a ladder sweep's 110 % step): left out")


def _simulate(names, space, mu, base_s, trace, step_seconds, interval, target_ms, seed, seeds, figure, csv, record,
              power, tick, profiled_speed, follow_cost, headroom=None, experience=None, miss_budget=0.01,
              slot=None, slow_host=0.0, host_quantile=None, stored=False) -> None:
    from perflearn.manage.compare import simulate
    from perflearn.manage.heimdall import HOST_QUANTILE
    from perflearn.manage.simulator import ServerModel, SlowHost

    from perflearn.lifetime import signals_held
    from perflearn.manage.journal import append_pass

    runs, ended, written = [], [], []
    cut: list[str] = []  # the pass a signal cut short: its intervals so far, recorded as stopped
    host = SlowHost(slow_host) if slow_host else None

    def ended_pass(s: int, priced):
        def on_pass(name, frame, complete):
            if csv:
                with signals_held():  # a pass is written whole or not at all, and counted: Ctrl-C waits for both
                    append_pass(csv, frame, name, s, first=not written)
                    written.append(name)
            # its wall time is the simulated seconds, as --from-csv records a live pass's (it was 0)
            priced.add(name, frame, float(frame["t"].max()) if len(frame) else 0.0, complete)
        return on_pass

    def keeper(s: int):
        def keep(name, frame, static_j, wall, complete, stopped):
            label = name if seeds == 1 else f"{name}@{s}"
            record(label, frame, static_j, wall, complete, stopped)
            # recorded as ok, until session 57's audit: 36 of 55 intervals read 100 % met
            (ended if complete else cut).append(label if complete else f"{label} ({len(frame)} intervals)")
        return keep

    try:
        for s in range(seed, seed + seeds):
            # each pass recorded as it ends, priced against static's (a learning pass ahead of it waits)
            priced = StaticFirst(keeper(s), True)
            run = simulate(ServerModel(mu_max=mu, base_s=base_s, seed=s, host=host), space, names, trace, step_seconds,
                           interval, power, target_ms / 1e3 if target_ms else None, tick, profiled_speed, follow_cost,
                           headroom, experience if "heimdall-experience" in names else None, miss_budget, slot,
                           HOST_QUANTILE if host_quantile is None else host_quantile, on_pass=ended_pass(s, priced))
            if s == seed and any(n.startswith("heimdall") for n in names):
                _say_if_ticks_hold_too_few(tick, run.max_rps, interval)
            _say_seed(run, s == seed, s, space, mu, profiled_speed, host, miss_budget)
            runs.append(run)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: every finished pass was recorded as it ended: say so
        why = exc.why if isinstance(exc, Terminated) else "interrupted"
        if (ended or cut) and stored:
            terminal.warn(f"{why}: the {len(ended)} pass(es) that had ended are recorded ({', '.join(ended) or 'none'})"
                          + (f"; the one it cut short, as stopped: {', '.join(cut)}" if cut else "; the one running is not"))
        if written:
            terminal.warn(f"{why}: the intervals of the {len(written)} pass(es) run are in {csv}; the last was cut "
                          "short" if cut else f"{why}: the intervals of the {len(written)} pass(es) that had ended are "
                          f"in {csv}")
        raise
    _say_simulation(runs, names, trace, seed, seeds, power, figure, csv)


def _say_seed(run, first: bool, s, space, mu, profiled_speed, host, miss_budget) -> None:
    from perflearn.manage.hostspeed import slow_intervals

    if first and run.experience is not None:  # as a live run says them
        _say_experience(run.experience)
        for name, policy in run.policies.items():
            if getattr(policy, "price", None) is not None:
                _say_price(name, policy, miss_budget)
    terminal.info(f"seed {s}: simulated service {len(space.cores)} cores x {len(space.levels)} levels, {mu:g} req/s "
                  f"per core; knee p95 {run.knee_target_s * 1e3:.3f} ms; QoS target {run.target_s * 1e3:.3f} ms; "
                  f"max load {run.max_rps:.0f} req/s"
                  + (f"; heimdall model: random forest on {run.profiled} profiling intervals" if run.profiled else "")
                  + (f", profiled at {profiled_speed:g}x its speed" if run.profiled and profiled_speed != 1 else "")
                  # every pass met the same host, interval by interval: static's share is every pass's
                  + (f"; host slow in {slow_intervals({'static': run.frames['static']})['static']:.0f}% of the "
                     "intervals" if host else ""))


def _tardiness(value: float) -> str:
    """A pass whose misses had no latency (stalls) has no tardiness: "-", not 1.00 (none missed)."""
    return "-" if math.isnan(value) else f"{value:.2f}"


FORCED = (("policy failed", "its policy failed"),
          ("latency stream stalled", "the latency stream stalled (no rate or latency known: a miss where load was "
                                     "offered)"))


def _say_policy_failures(frames: dict) -> None:
    """A pass whose policy failed, or whose latency stream stalled, in an interval ran the
    maximum there: its row is partly the maximum's (a model that failed every interval showed
    100 % met and -0.2 % energy, unsaid but for one warning at its first failure; a pass
    stalled in most intervals ended with no word of it)."""
    for name, frame in frames.items():
        if "note" not in frame:
            continue
        notes = frame["note"].fillna("")
        for kind, said in FORCED:
            count = int(notes.str.contains(kind).sum())
            if count:
                terminal.warn(f"{name}: {said} in {count} of {len(frame)} intervals, which ran the maximum "
                              "configuration: its row is that much the maximum's, not the policy's")


def _say_simulation(runs, names, trace, seed, seeds, power, figure, csv) -> None:
    from perflearn.manage.compare import across_seeds, figure as draw

    if seeds == 1:
        table = Table("policy", "QoS guarantee", "tardiness", f"energy ({power.label})", "vs static", "changes",
                      box=None)
        for row in runs[0].summary.itertuples(index=False):
            table.add_row(row.policy, f"{row.qos_guarantee:.1f}%", _tardiness(row.qos_tardiness),
                          _kilojoules(row.energy_j), _signed_percent(row.energy_reduction), str(row.changes))
    else:
        table = Table("policy", "QoS guarantee (mean ± sd, min)", f"energy saved ({power.label})",
                      "goal met (≥97.7 %, ≥22 %)", box=None)
        for row in across_seeds([r.summary for r in runs]).itertuples(index=False):
            table.add_row(row.policy, f"{row.qos_mean:.1f} ± {row.qos_std:.1f}%, {row.qos_min:.1f}%",
                          f"{row.saved_mean:+.1f} ± {row.saved_std:.1f}%, {row.saved_min:+.1f}%",
                          f"{row.goal_seeds} of {row.seeds} seeds")
    terminal.out.print(table)
    for run in runs:
        _say_policy_failures(run.frames)
    if figure:
        draw(_static_first(runs[0].frames, names), figure, f"{trace} load, target {runs[0].target_s * 1e3:.2f} ms")
        terminal.info(f"figure: {figure} (seed {seed})")
    if csv:  # written pass by pass as each ended
        terminal.info(f"intervals: {csv}")


@app.command()
def knee(
    experiment: Annotated[str, typer.Argument(help="A load sweep (e.g. memcached-wire at maximum configuration).")],
    x: Annotated[str, typer.Option("--x", help="The load: a knob or metric (e.g. rate).")],
    y: Annotated[str, typer.Option("--y", help="The latency metric (e.g. wire_p95).")],
    store: Annotated[Path, typer.Option("--store", "-s", envvar="PERFLEARN_STORE", help="Results store.")] = Path("perflearn.duckdb"),
    before_jump: Annotated[bool, typer.Option("--before-jump", help="When latency jumps 3x or more between two loads "
                                              "at or below the knee, take the last load before the jump.")] = False,
) -> None:
    """The knee of a load-latency curve (kneedle on its monotone fit from the lowest latency on):
    QoS target = latency there, maximum load = 95 % of its load."""
    import pandas as pd

    from perflearn.learn.knee import knee_before_jump, knee_doubts, load_knee, noisy_loads
    from perflearn.store import open_store

    if x == y:  # it read "rate does not turn up" (session 57's audit)
        raise UsageError(f"--x and --y are the same column ({x!r}): a knee is of latency (--y) against load (--x)")
    with open_store(store, read_only=True) as results:
        dataset = results.dataset(experiment)
    frame = dataset.ok()
    for column in (x, y):
        if column not in frame:
            raise UsageError(f"no column {column!r} in {experiment!r} (knobs: {', '.join(dataset.features)}; "
                             f"metrics: {', '.join(dataset.metrics)})")
        if not pd.api.types.is_numeric_dtype(frame[column]):  # the example is a cell that is no number
            words = frame[column][pd.to_numeric(frame[column], errors="coerce").isna() & frame[column].notna()]
            example = f" (e.g. {words.iloc[0]!r})" if len(words) else ""
            raise UsageError(f"column {column!r} of {experiment!r} is not numeric{example}",
                             where="--x" if column == x else "--y")
    varied = [f for f in dataset.features if f not in (x, y) and frame[f].nunique(dropna=False) > 1]
    if varied:  # the median at each load would be over configurations: a latency none of them had
        terminal.warn(f"{experiment!r} varies {', '.join(varied)} too: each load's {y} is the median over every "
                      f"configuration; a knee is of one (the maximum, as the seed's): sweep the load alone")
    loadless = int((frame[x].isna() & frame[y].notna()).sum())
    if loadless:
        terminal.warn(f"{loadless} ok run(s) without a {x}, left out of the curve")
    medians = frame.groupby(x)[y].median()
    unmeasured = medians[medians.isna()].index.tolist()
    if unmeasured:  # dropped, and the knee moves (80000 to 75000, unsaid)
        terminal.warn(f"{len(unmeasured)} {x} value(s) without a {y} in any ok run, left out of the curve: "
                      f"{', '.join(f'{v:g}' for v in sorted(unmeasured)[:5])}" + (", ..." if len(unmeasured) > 5 else ""))
    curve = medians.dropna().sort_index()
    if len(curve) and (curve.index.min() < 0 or curve.min() < 0):
        raise UsageError(f"a negative {x if curve.index.min() < 0 else y} in {experiment!r}: a load and a latency "
                         "are at least 0")
    if len(curve) < 3:
        raise UsageError(f"need at least three values of {x} with {y} measured, got {len(curve)}")
    found = load_knee(curve.index.to_numpy(dtype=float), curve.to_numpy(dtype=float))
    if found is None:
        raise UsageError(f"{y} does not turn up within the loads measured (highest {x} = {curve.index.max():g}): "
                         f"measure higher loads, or give perflearn manage --target-ms and --max-rps yourself")
    loads, latencies = curve.index.to_numpy(dtype=float), curve.to_numpy(dtype=float)
    for note in noisy_loads(loads, latencies):
        terminal.warn(note)
    if before_jump and (moved := knee_before_jump(loads, latencies, found)) != found:
        terminal.warn(f"kneedle's knee at {x} = {found.x:g} ({y} = {found.y:g}) is past a latency jump; "
                      f"taking the load before it")
        found = moved
    else:
        for doubt in knee_doubts(loads, latencies, found):
            terminal.warn(doubt)
    # the number stays right after "QoS target" (scripts read it); its unit, and --target-ms, after
    unit = dataset.units.get(y) or ""
    per_ms = {"ns": 1e6, "us": 1e3, "µs": 1e3, "ms": 1.0, "s": 1e-3}.get(unit)
    in_ms = f"; {y} is in {unit}: perflearn manage --target-ms {found.y / per_ms:g}" if per_ms else (
        f"; {y} has no unit stored: give perflearn manage --target-ms in ms" if not unit else f"; {y} is in {unit}")
    terminal.out.print(f"knee at {x} = {found.x:g}, {y} = {found.y:g}: QoS target {found.y:g}, "
                       f"maximum load {0.95 * found.x:g} (95 % of the knee){in_ms}")
