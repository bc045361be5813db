"""Session 32: the confirmation run's table (`dev32.py`). The question is one row: the default
small-data average clipped to the training targets' range. The other rows are there to read the
primary one by, not to be chosen among.

    python analyze32.py c_1.pkl c_15.pkl
"""
import sys
import numpy as np
import pandas as pd
import analyze9
from analyze9 import load, table
from analyze21 import clipped, combine

analyze9.REAL = ("BDBJ", "Dune", "hsmgp", "SQL", "Lrzip", "VP8")  # (analyze21 appends the last two again on import)


def geo_clipped(ms, y):
    return np.clip(combine("geo")(ms, y), y.min(), y.max())


def widened(k):
    """the default kept within the training range widened by k times its own width on each side
    (log scale); k = 1 is `auto`'s guard since session 32 (``plausible_range``)"""
    def f(ms, y):
        lo, hi = np.log(y.min()), np.log(y.max())
        return np.clip(combine("arith")(ms, y), np.exp(lo - k * (hi - lo)), np.exp(hi + k * (hi - lo)))
    return f


PROCS = {
    "default: arithmetic, 1/LOO-MRE^2 over 6": combine("arith"),
    "PRIMARY: default clipped to the training targets' range": clipped(True),
    "default clipped above at the largest training target": clipped(False),
    "weighted geometric mean": combine("geo"),
    "weighted geometric mean, clipped to the range": geo_clipped,
    "(after the run) guard: the range widened by half its width": widened(0.5),
    "(after the run) guard: the range widened by its width (auto since)": widened(1.0),
}

if __name__ == "__main__":
    pd.set_option("display.width", 300); pd.set_option("display.max_columns", 30); pd.set_option("display.max_colwidth", 60)
    for path in sys.argv[1:]:
        t, df = table(load(path.split(",")), PROCS)
        print(path); print(t.round(2).to_string()); print()
        clip = df[df.proc == list(PROCS)[1]].set_index(["set", "rep"]).mre
        base = df[df.proc == list(PROCS)[0]].set_index(["set", "rep"]).mre
        for k in (1, -2, -1):
            other = df[df.proc == list(PROCS)[k]].set_index(["set", "rep"]).mre
            d = other - base
            print(f"{list(PROCS)[k]}: changed {(d.abs() > 1e-9).sum()} of {len(base)} training sets, "
                  f"better in {(d < -1e-9).sum()}, worse in {(d > 1e-9).sum()}")
        print()
