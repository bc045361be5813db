"""Why the cheapest rules did not run one configuration at one load: heimdall-cheapest's
decisions replayed on a recorded pass of interleaved live rounds (`perflearn manage
--interleave --csv`), and, in each interval at that load, which test turned the
configuration away: its forecast, or its demand over the headroom (measured, or the
profile's floor on it: k x the profiled CPU time per request x the load).

    python bench/manage_why_not.py P95.model COST.model ROUND.csv.gz ... \
        [--policy heimdall-cheapest:wide] [--config 1c@0.375] [--rps 30400] [--headroom 0.95]

The replay sees the recorded observations, not its own: where it would have chosen
otherwise, the intervals after are those of what ran.
"""
import argparse

import pandas as pd

from perflearn.learn import load
from perflearn.manage.compare import model_predictor
from perflearn.manage.config import ConfigSpace
from perflearn.manage.policies import make_policy
from perflearn.manage.policy import Configuration, Observation
from perflearn.manage.power import power_model


def replay(path: str, args, p95, cost) -> pd.DataFrame:
    """One row per interval of ``args.policy``'s pass at ``args.rps`` (± 5 %)."""
    policy = make_policy("heimdall-cheapest", ConfigSpace.make(args.cores, args.levels), args.target_s,
                         args.max_rps, 1.0, power=power_model("tx1"), intervals=220, model=p95, cost_model=cost,
                         headroom=args.headroom)
    cores, level = args.config.split("c@")
    i = policy.configs.index(Configuration(int(cores), float(level)))
    frame = pd.read_csv(path)
    rows = []
    for _, x in frame[frame.policy == args.policy].sort_values("t").iterrows():
        seen = Observation(x.t, x.rps, x.p95, x.p99, Configuration(int(x.cores), float(x.level)), x.utilisation,
                           x.power_w, bool(x.settled), x.host_probe_us, x.throttled_ms)
        policy.decide(seen)
        if abs(x.offered_rps - args.rps) <= 0.05 * args.rps:
            mean, spread = policy._forecast(x.rps)
            rows.append(dict(measured=seen.busy, floor=policy._demands(0.0, x.rps)[i],
                             room=policy.room[i] * policy.capacity[i], forecast_ok=bool(policy._qualifies(mean, spread)[i]),
                             k=policy.slowdown, host=policy._host()))
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("p95_model")
    parser.add_argument("cost_model")
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--policy", default="heimdall-cheapest:wide", help="whose recorded pass to replay")
    parser.add_argument("--config", default="1c@0.375")
    parser.add_argument("--rps", type=float, default=30_400.0, help="the load (offered req/s)")
    parser.add_argument("--headroom", type=float, default=0.95)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--levels", type=int, default=8)
    parser.add_argument("--max-rps", type=float, default=38_000.0)
    parser.add_argument("--target-s", type=float, default=0.000196735)
    args = parser.parse_args()
    p95 = model_predictor(load(args.p95_model), 1.0)
    cost = model_predictor(load(args.cost_model), 1e-6)
    print(f"{args.config} at {args.rps:.0f} req/s, replayed as {args.policy}'s rules at a headroom of {args.headroom}")
    print("file | intervals | measured demand fits | the floor turned it away | the forecast turned it away | k | host µs")
    for path in args.csv:
        r = replay(path, args, p95, cost)
        fits = r.measured <= r.room
        print(f"{path} | {len(r)} | {int(fits.sum())} | {int((fits & (r.floor > r.room)).sum())} | "
              f"{int((fits & ~r.forecast_ok).sum())} | {r.k.median():.2f} | {r.host.median():.0f}")


if __name__ == "__main__":
    main()
