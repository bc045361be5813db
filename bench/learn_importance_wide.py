"""How long permutation importance takes on many knobs, batched against one call per copy.

Synthetic runs: 30 runs of K two-valued knobs, y = exp(X[:, :5] @ w) * 10 (the audit of
session 51, where `perflearn fit` on 30 runs x 200 knobs took 77 s, 93 % of it here).
A linear model (which has no importances of its own) is fitted once per K; its
permutation importance (5 shuffles of each knob) is timed, median and min of
``--repeat`` runs, batched as `Model.importance` does it now, and as before, one model
call per shuffled copy (the reference, in this script, on the same model and data).
Both draw the same shuffles, so their importances agree to rounding (the largest
difference is shown).

    python bench/learn_importance_wide.py [--knobs 50,200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from perflearn.learn import fit
from perflearn.learn.features import training_data
from perflearn.store import Dataset


def runs(knobs: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (30, knobs))
    frame = pd.DataFrame(X, columns=[f"o{i}" for i in range(knobs)])
    frame["perf"] = np.exp(X[:, :5] @ rng.normal(0, 0.5, 5)) * 10
    return frame


def per_copy(model, X: pd.DataFrame, y: np.ndarray, repeats: int = 5) -> dict[str, float]:
    """Session 50's permutation importance: a model call for every shuffled copy."""
    rng = np.random.default_rng(0)
    base = float(np.mean(np.abs(model.predict(X) - y)))
    out = {}
    for f in model.features:
        losses = []
        for _ in range(repeats):
            Xp = X.copy()
            Xp[f] = rng.permutation(Xp[f].to_numpy())
            losses.append(float(np.mean(np.abs(model.predict(Xp) - y))) - base)
        out[f] = max(0.0, float(np.mean(losses)))
    total = sum(out.values())
    return {k: (v / total if total > 0 else 0.0) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def timed(call, repeat: int):
    seconds, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), min(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--knobs", default="50,200")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| knobs | copies | batched s (median / min) | one call per copy s (median / min) | speed-up | largest difference |")
    print("|---|---|---|---|---|---|")
    for knobs in (int(k) for k in args.knobs.split(",")):
        ds = Dataset.from_frame(runs(knobs), metrics=["perf"], name=f"wide{knobs}")
        model = fit(ds, "perf", family="linear")
        data = training_data(ds, "perf")
        new_med, new_min, new = timed(lambda: model.importance(data.X, data.y), args.repeat)
        old_med, old_min, old = timed(lambda: per_copy(model, data.X, np.asarray(data.y, dtype=float)), args.repeat)
        print(f"| {knobs} | {5 * knobs} | {new_med:.2f} / {new_min:.2f} | {old_med:.2f} / {old_min:.2f} | "
              f"{old_med / new_med:.0f}x | {max(abs(new[f] - old[f]) for f in new):.1e} |")


if __name__ == "__main__":
    main()
