"""Two simulated comparisons of the same seeds, paired per seed (second minus first): each
policy's QoS met and energy saved against static, in points, with the 95 % margin (t quantile,
seeds as the unit). For a change to a policy, run once with each code:

    python bench/manage_sim_paired.py slow35_old.csv slow35_new.csv
"""
import sys

import pandas as pd

from manage_paired import margin
from manage_sim_slow import per_pass


def main(old_path: str, new_path: str) -> None:
    old, new = (per_pass(pd.read_csv(p)).drop(index="static", level="policy") for p in (old_path, new_path))
    diff = (new - old).dropna()
    for policy, d in diff.groupby(level="policy"):
        q = d["qos"]
        (q_mean, q_margin), (e_mean, e_margin) = margin(q), margin(d["saved"])
        print(f"{policy}: new - old QoS {q_mean:+.2f} ± {q_margin:.2f} pts (better in {(q > 0).sum()}, worse in "
              f"{(q < 0).sum()} of {len(q)}); energy saved {e_mean:+.2f} ± {e_margin:.2f} pts")


if __name__ == "__main__":
    main(*sys.argv[1:3])
