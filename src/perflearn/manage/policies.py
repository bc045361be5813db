"""Policies choose a configuration every interval from what was observed in the last;
this module names them and builds one by name (the interface: ``policy``).

Each is reimplemented from its paper's description (as summarised in the Heimdall
thesis, ../shared/seeds/heimdall-tail-latency-task-manager.txt):

- ``static``: everything at maximum, always.
- ``ondemand``: Linux's governor: all cores; the speed jumps to maximum above an
  up-threshold of utilisation, else is the lowest level that keeps utilisation under it.
- ``hipster``: configurations ordered by power; a heuristic state machine moves up when
  tail latency is close to the target and down when far below, while a Q-table over
  load buckets (4 %) learns (learning rate 0.6, discount 0.9); after the learning phase
  it picks the best Q among the configurations it tried in the load's bucket, and falls
  back to the heuristic on a violation or in a bucket where it tried none. Its
  learning phase is one iteration of the benchmark (the seed's section 4.1.8), run
  before the evaluated one, as Heimdall's profiling is (``learning_iterations``).
- ``heracles``: a core controller every 2 s (add a core when latency is above 80 % of the
  target, else remove one), a power controller every 2 s (lower the speed when power is
  above 90 % of the maximum seen), and a main controller every 15 s that gives all
  resources for a period after a violation or when load is above 85 % of the maximum.
- ``heimdall``: predicts tail latency for every configuration at the current load with a
  model, and applies equation 3.2: the highest predicted latency below target - slack
  (slack 10 %), the cheapest of equals; when none is predicted to meet it, the
  lowest-latency configuration, which is the maximum one (a model is asked nothing where
  it is least to be trusted). Forecasts are made monotone first: fewer cores or less
  speed is never forecast faster.
  ``heimdall-uncertain`` replaces the fixed slack by the model's own spread: a
  configuration qualifies when prediction + z * spread is below the target.
  ``heimdall-cheapest`` takes the least power among the configurations that qualify;
  ``heimdall-online`` is that rule with forecasts corrected per load by what it measures.
"""

from __future__ import annotations

from .baselines import Heracles, Heracles2Min, Hipster, Ondemand, Static
from .config import ConfigSpace
from .experience import Experience
from .heimdall import HOST_QUANTILE, Heimdall
from .policy import Policy
from .power import PowerModel
from .sweep import Sweep

POLICIES = {cls.name: cls for cls in (Static, Ondemand, Hipster, Heracles, Heracles2Min, Heimdall)}
POLICY_NAMES = (*POLICIES, "heimdall-uncertain", "heimdall-online", "heimdall-cheapest")
PROFILERS = ("sweep",)  # measure for a model; not QoS policies (not in "all")
EXPERIENCED = ("heimdall-experience",)  # need earlier runs' intervals (--experience); not in "all"


def variant(name: str) -> tuple[str, str | None]:
    """A policy name and its label: ``heimdall-cheapest:blind`` is heimdall-cheapest with
    the models labelled ``blind``, so two models can be compared in one run."""
    base, _, label = name.partition(":")
    return base, label or None


def learning_label(name: str) -> str:
    """How a policy's learning iterations are named in tables, files and the store."""
    return f"{name} (learning)"


def with_learning(names: list[str]) -> list[str]:
    """``names`` with, ahead of each policy that learns first, its learning pass's label:
    every row a comparison reports."""
    return [label for n in names for label in
            ([learning_label(n)] if getattr(POLICIES.get(n), "learning_iterations", 0) else []) + [n]]


def make_policy(name: str, space: ConfigSpace, target_s: float, max_rps: float, interval_s: float, *,
                power: PowerModel, intervals: int, model=None, react: bool = True, cost_model=None,
                headroom: float | None = None, experience: Experience | None = None,
                miss_budget: float = 0.01, host_quantile: float = HOST_QUANTILE) -> Policy:
    """A policy by name, with the settings this project evaluates it with: Hipster's
    heuristic runs its learning iteration(s) of ``intervals`` each and its Q-table decides
    after them; the Heimdall variants share one latency model (and, when given, the
    profiled CPU time per request it follows) and react to ticks (``react``) where the
    service reports them; ``headroom``: the cheapest rules' CPU headroom (default ``HEADROOM``, 0.95);
    heimdall-experience is heimdall-cheapest that, where ``experience`` knows the load,
    prices misses to spend ``miss_budget`` (module ``experience``); ``host_quantile``: the
    quantile of the recent host-speed probe the Heimdall variants plan for."""
    name = variant(name)[0]  # the label chose the models; the rules are the name's
    if name == "heimdall-experience" and experience is None:
        raise ValueError("heimdall-experience needs the intervals of earlier runs (experience)")
    if name.startswith("heimdall"):
        return Heimdall(space, target_s, max_rps, interval_s, model=model, power=power, cost_model=cost_model,
                        uncertainty_z=1.0 if name == "heimdall-uncertain" else None,
                        online=0.3 if name == "heimdall-online" else None, react=react, headroom=headroom,
                        cheapest=name in ("heimdall-cheapest", "heimdall-online", "heimdall-experience"),
                        experience=experience if name == "heimdall-experience" else None, miss_budget=miss_budget,
                        host_quantile=host_quantile)
    if name == "hipster":
        return Hipster(space, target_s, max_rps, interval_s, power=power,
                       learn_intervals=intervals * Hipster.learning_iterations)
    if name == "sweep":
        return Sweep(space, target_s, max_rps, interval_s)
    return POLICIES[name](space, target_s, max_rps, interval_s)
