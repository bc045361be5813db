"""Predict latency of a 100-tree random forest for 10,000 candidate points (goal: < 50 ms).

The QoS manager scores every candidate point (cores x frequency x ...) each control
interval; Heimdall's forest missed its 1-second interval at 200 trees. We time, as
medians of repeated calls on this machine:

- reference: scikit-learn's own ``RandomForestRegressor.predict`` on the numeric matrix;
- ``Model.predict(frame)``: perflearn's full path from a DataFrame (schema check, one-hot);
- ``Model.predict_dist(frame)``: the same plus per-tree spread (std and 5-95% band);
- ``predict_spread(model.estimator, X)``: the spread on an already-encoded matrix
  (what a control loop that encodes its candidate grid once would call).

    python bench/learn_predict.py [--trees 100] [--points 10000] [--runs 2000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, min) wall-clock ms; the min approximates an unloaded machine."""
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000.0, min(samples) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=2000, help="training runs")
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()

    from perflearn.learn import fit
    from perflearn.learn.uncertainty import predict_spread
    from perflearn.store import Dataset

    rng = np.random.default_rng(0)
    n = a.runs
    train = pd.DataFrame({
        "load": rng.uniform(1000, 40000, n),
        "cores": rng.integers(1, 9, n),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], n),
        "governor": rng.choice(["performance", "powersave"], n),
    })
    util = train["load"] / (train["cores"] * train["freq"] * 6000)
    train["p95"] = 0.3 / np.clip(1 - util, 0.02, None) * (1 + rng.normal(0, 0.05, n)) + 0.05 * (train["governor"] == "powersave")
    ds = Dataset.from_frame(train, metrics=["p95"], name="bench")
    model = fit(ds, "p95", family="rf", params={"n_estimators": a.trees}, log_target=False, cv=2)
    forest = model.estimator
    random_cand = pd.DataFrame({
        "load": rng.uniform(1000, 40000, a.points),
        "cores": rng.integers(1, 9, a.points),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], a.points),
        "governor": rng.choice(["performance", "powersave"], a.points),
    })
    # a policy table: every knob setting at a grid of loads (what a QoS manager scores)
    loads = np.linspace(1000, 40000, int(np.ceil(a.points / 64)))
    grid = pd.DataFrame([(ld, c, f, g) for ld in loads for c in range(1, 9) for f in (0.8, 1.2, 1.6, 2.0)
                         for g in ("performance", "powersave")], columns=["load", "cores", "freq", "governor"]).head(a.points)
    import os

    load1 = os.getloadavg()[0]
    print(f"### Predict latency: {a.trees}-tree random forest, {a.points} candidate points\n")
    depth = int(np.median([t.get_depth() for t in forest.estimators_]))
    print(f"Forest trained on {n} runs (median tree depth {depth}); ms per call, median and min of {a.repeat} calls; "
          f"machine load average {load1:.1f} on {os.cpu_count()} cores at the start (shared machine: the min is "
          "the closest to an idle machine).\n")
    print("| candidates | path | median ms | min ms | goal < 50 ms (min) |")
    print("|---|---|---|---|---|")
    for label, cand in (("random (continuous load)", random_cand), ("grid: 64 settings x loads", grid)):
        X = model.transform(cand)
        rows = [
            ("scikit-learn forest.predict(X) (reference)", timed(lambda: forest.predict(X), a.repeat)),
            ("Model.predict(frame)", timed(lambda: model.predict(cand), a.repeat)),
            ("Model.predict_dist(frame) (+ per-tree spread)", timed(lambda: model.predict_dist(cand), a.repeat)),
            ("predict_spread(estimator, X) (pre-encoded)", timed(lambda: predict_spread(forest, X), a.repeat)),
        ]
        for name, (med, mn) in rows:
            print(f"| {label} ({len(cand)}) | {name} | {med:.1f} | {mn:.1f} | {'yes' if mn < 50 else 'no'} |")
    print(f"\nReproduce: `python bench/learn_predict.py --trees {a.trees} --points {a.points} --runs {n}`")


if __name__ == "__main__":
    main()
