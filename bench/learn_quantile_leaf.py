"""How large a quantile forest's leaves should be on repeated runs (session 55).

`--quantile` forests (`perflearn fit --family rf --quantile Q`) keep leaves of at least
min(10, n // 8) rows (`learn.models.quantile_leaf`). With bootstrap, a tree sees about 63 %
of the distinct rows, so on 66 runs of 22 configurations a leaf of 8 spans about three
configurations and a knob that matters in a few of them reads no importance. Smaller
leaves keep the effect; do they read worse quantiles? Scored on data the forest never
saw: coverage (share of new values at or under the predicted quantile; the goal is Q) and
the pinball loss of Q, per leaf rule, the current one first.

    python bench/learn_quantile_leaf.py --reps 10
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import pandas as pd

from perflearn.learn.models import QUANTILE_LEAF, build

HERE = Path(__file__).resolve().parent
SWEEPS = sorted((HERE / "manage_live_s36").glob("sweep*.csv.gz"))
Q = 0.9

RULES = {  # rows -> leaf size
    "min(10, n/8) (current)": lambda n: max(1, min(QUANTILE_LEAF, n // 8)),
    "min(10, 0.63 n/8) (distinct rows in a bootstrap)": lambda n: max(1, min(QUANTILE_LEAF, int(0.632 * n) // 8)),
    "5": lambda n: 5,
    "3": lambda n: 3,
    "1": lambda n: 1,
}


def pinball(y, q, tau=Q):
    d = y - q
    return float(np.mean(np.maximum(tau * d, (tau - 1) * d)))


def sweep_sets(reps: int, share: float):
    for path in SWEEPS:
        frame = pd.read_csv(path)
        frame = frame[(frame.policy == "sweep") & (frame.rps > 0) & frame.p95.notna()].reset_index(drop=True)
        X, y = frame[["cores", "level", "offered_rps"]].to_numpy(float), frame["p95"].to_numpy(float)
        for r in range(reps):
            idx = np.random.default_rng(r).permutation(len(y))
            k = max(8, int(share * len(y)))
            yield f"memcached sweep, {int(share * 100)} % trains", X[idx[:k]], y[idx[:k]], X[idx[k:]], y[idx[k:]]


def repeated_sets(reps: int):
    """22 configurations x 3 repeats; b doubles the time where a >= 8 (6 of 22); new draws to score."""
    def draw(rng):
        rows = [(a, b, (100 + 10 * a) * (2.0 if b and a >= 8 else 1.0) * np.exp(rng.normal(0, 0.05)))
                for a in range(11) for b in (0, 1) for _ in range(3)]
        arr = np.array(rows, dtype=float)
        return arr[:, :2], arr[:, 2]
    for r in range(reps):
        rng = np.random.default_rng(100 + r)
        Xtr, ytr = draw(rng)
        Xte, yte = draw(rng)
        yield "22 configurations x 3 runs, new runs of them", Xtr, ytr, Xte, yte
    for r in range(reps):  # 4 configurations never measured: the group CV `fit` reports asks this
        rng = np.random.default_rng(200 + r)
        Xtr, ytr = draw(rng)
        out = rng.choice(22, 4, replace=False)
        config = (Xtr[:, 0] * 2 + Xtr[:, 1]).astype(int)
        held = np.isin(config, out)
        yield "22 configurations x 3 runs, 4 left out", Xtr[~held], ytr[~held], Xtr[held], ytr[held]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    results: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    sets = [*repeated_sets(args.reps), *sweep_sets(args.reps, 0.05), *sweep_sets(args.reps, 0.2)]
    for name, Xtr, ytr, Xte, yte in sets:
        for rule, leaf in RULES.items():
            k = leaf(len(ytr))
            model = build("rf", {"quantile": Q, "min_samples_leaf": k}).fit(Xtr, ytr)
            pred = model.predict(Xte)
            results.setdefault((name, rule), []).append((float(np.mean(yte <= pred)), pinball(yte, pred), k))
    print(f"| data | leaf rule | leaf (rows) | coverage of q{Q:g} (mean) | pinball loss (median, x1e6 for the sweeps) |")
    print("|---|---|---|---|---|")
    for (name, rule), rows in results.items():
        scale = 1e6 if "sweep" in name else 1.0
        leaves = sorted({k for _, _, k in rows})
        print(f"| {name} | {rule} | {'-'.join(map(str, (leaves[0], leaves[-1]))) if len(leaves) > 1 else leaves[0]} "
              f"| {statistics.mean(c for c, _, _ in rows):.3f} | {statistics.median(p for _, p, _ in rows) * scale:.3g} |")


if __name__ == "__main__":
    main()
