"""How long `recommend`'s search takes on many knobs (sampling + local search).

Synthetic runs: K two-valued knobs, 60 runs, y = 10 + 5 k0 + 3 k1 - 2 k2 k3 + noise
(the audit of session 50, where `perflearn recommend` ran over 13 minutes on 500 knobs
and was killed). A random forest (100 trees) is fitted once per K; the search
(`perflearn.learn.recommend.recommend` over every combination of the measured values,
and its warnings about pairs of settings no run had together, `unseen_pairs`) is timed,
median and min of ``--repeat`` runs, with what it found (predicted y, points scored).

    python bench/learn_recommend_wide.py [--knobs 30,100,500] [--repeat 3]

Run it with PYTHONPATH pointing at another checkout to time that code on the same data.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from perflearn.learn import fit
from perflearn.learn.recommend import recommend, unseen_pairs
from perflearn.learn.space import search_space
from perflearn.store import Dataset


def runs(knobs: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.integers(0, 2, (60, knobs)), columns=[f"k{i}" for i in range(knobs)])
    frame["y"] = 10 + 5 * frame.k0 + 3 * frame.k1 - 2 * frame.k2 * frame.k3 + rng.normal(0, 0.1, 60)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--knobs", default="30,100,500")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| knobs | search s (median) | min | unseen_pairs s (median) | predicted y | points scored |")
    print("|---|---|---|---|---|---|")
    for knobs in (int(k) for k in args.knobs.split(",")):
        frame = runs(knobs)
        names = list(frame.columns[:knobs])
        ds = Dataset.from_frame(frame, metrics=["y"], name=f"wide{knobs}")
        model = fit(ds, "y", family="rf")
        space = search_space(ds, names)
        searches, pairs = [], []
        for _ in range(args.repeat):
            began = time.perf_counter()
            found = recommend({"y": model}, "y", "max", space)
            searches.append(time.perf_counter() - began)
            began = time.perf_counter()
            unseen_pairs(found.point, ds.ok(), names)
            pairs.append(time.perf_counter() - began)
        print(f"| {knobs} | {statistics.median(searches):.2f} | {min(searches):.2f} | {statistics.median(pairs):.3f} | "
              f"{found.predicted['y']:.3f} | {found.evaluated} |", flush=True)


if __name__ == "__main__":
    main()
