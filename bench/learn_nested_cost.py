"""What the nested band of tiny data costs: CPU seconds of one `fit --family auto` with
``nested_below`` 0 (the band's errors re-chosen on the other folds) and with the default
(``AUTO_NESTED_BELOW``; the whole procedure refitted without each fold), on DeepPerf's
published training sets, in the same run, single-threaded BLAS. x264 N = 16 is above the
bound and does not nest by default: it is timed with the bound raised, to show why.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python bench/learn_nested_cost.py --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from learn_bands import DEEPPERF, deepperf_sets


def main() -> None:
    from perflearn.learn.features import training_data
    from perflearn.learn.model import fit_data
    from perflearn.learn.models import AUTO_NESTED_BELOW
    from perflearn.store import Dataset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print("| data | training sets | CPU s, not nested (median) | nested (median) | ratio |")
    print("|---|---|---|---|---|")
    for system, n, bound in (("Apache", 9, AUTO_NESTED_BELOW), ("x264", 16, 17)):
        times: dict[int, list[float]] = {0: [], bound: []}
        for label, train, _, target in deepperf_sets(system, DEEPPERF, args.reps):
            if label != f"{system} N={n}":
                continue
            data = training_data(Dataset.from_frame(train.reset_index(drop=True), metrics=[target], name="b"), target)
            for nested_below in times:
                started = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit_data(data, "auto", random_state=0, experiment="b", nested_below=nested_below)
                times[nested_below].append(time.process_time() - started)
        plain, nested = statistics.median(times[0]), statistics.median(times[bound])
        print(f"| {system} N={n} | {len(times[0])} | {plain:.1f} | {nested:.1f} | {nested / plain:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
