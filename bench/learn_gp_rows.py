"""How long a GP takes to fit on many runs, with its kernel tuned on a subset of them
(``GP_HYPER_ROWS``) against tuning on all of them, measured in the same run.

    python bench/learn_gp_rows.py [--reps 3]

For each data set: 5-fold CV of the GP family (log target, as `auto` tries it), the
wall time of the five fits and predictions (median of --reps runs) and the CV MRE.
x264 is DeepPerf's (1152 configurations, ../shared/data/deepperf); "smooth" is 2000 runs
of a smooth function of 6 knobs with 5 % noise (seeded).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold

import perflearn.learn.models as models

DEEPPERF = Path(__file__).resolve().parents[2] / "shared" / "data" / "deepperf"


def data(name: str):
    if name == "x264":
        d = pd.read_csv(DEEPPERF / "x264_AllNumeric.csv")
        return d.drop(columns="PERF").to_numpy(float), d["PERF"].to_numpy()
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (2000, 6))
    y = np.exp(1 + np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] ** 2) * (1 + rng.normal(0, 0.05, 2000))
    return X, y


def cv_gp(X, y) -> tuple[float, float]:
    errors, started = [], time.perf_counter()
    for train, test in KFold(5, shuffle=True, random_state=0).split(X):
        model = models.build("gp", {}, log_target=True, random_state=0).fit(X[train], y[train])
        errors.append(float(np.mean(np.abs(model.predict(X[test]) - y[test]) / y[test]) * 100))
    return time.perf_counter() - started, float(np.mean(errors))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    subset = models.GP_HYPER_ROWS
    print("| data | runs | kernel tuned on | 5-fold CV s (median) | CV MRE % |")
    print("|---|---|---|---|---|")
    for name in ("x264", "smooth"):
        X, y = data(name)
        for rows, label in ((subset, f"{subset} runs"), (10**9, "every run (reference)")):
            models.GP_HYPER_ROWS = rows
            runs = [cv_gp(X, y) for _ in range(args.reps)]
            print(f"| {name} | {len(y)} | {label} | {statistics.median(t for t, _ in runs):.1f} | {runs[0][1]:.4f} |",
                  flush=True)
    models.GP_HYPER_ROWS = subset


if __name__ == "__main__":
    main()
