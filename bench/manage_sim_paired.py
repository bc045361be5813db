"""Two simulated comparisons of the same seeds, paired per seed (second minus first): each
policy's QoS met and energy saved against static, in points, with the 95 % margin (t quantile,
seeds as the unit). For a change to a policy, run once with each code:

    python bench/manage_sim_paired.py slow35_old.csv slow35_new.csv
"""
import sys

import numpy as np
import pandas as pd
from scipy import stats

from manage_sim_slow import per_pass


def margin(x: pd.Series) -> float:
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))


def main(old_path: str, new_path: str) -> None:
    old, new = (per_pass(pd.read_csv(p)).drop(index="static", level="policy") for p in (old_path, new_path))
    diff = (new - old).dropna()
    for policy, d in diff.groupby(level="policy"):
        q, e = d["qos"], d["saved"]
        print(f"{policy}: new - old QoS {q.mean():+.2f} ± {margin(q):.2f} pts (better in {(q > 0).sum()}, worse in "
              f"{(q < 0).sum()} of {len(q)}); energy saved {e.mean():+.2f} ± {margin(e):.2f} pts")


if __name__ == "__main__":
    main(*sys.argv[1:3])
