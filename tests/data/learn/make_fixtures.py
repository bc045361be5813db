"""Regenerate the learning fixtures (deterministic): python tests/data/learn/make_fixtures.py"""

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent


def step():
    """T steps from 10 to 20 at a = 5; b = y adds 1; c adds 0.5 per unit. Runs 3-4 failed."""
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"a": np.round(rng.uniform(0, 10, n), 3), "b": rng.choice(["x", "y", "z"], n),
                       "c": rng.integers(1, 5, n)})
    df["T"] = np.round(10 + 10 * (df["a"] > 5) + 0.5 * df["c"] + 1.0 * (df["b"] == "y") + rng.normal(0, 0.2, n), 4)
    df["lat"] = np.round(1 + 0.1 * df["a"] + rng.normal(0, 0.01, n), 4)
    df["status"] = "ok"
    df.loc[[3, 4], "status"] = "failed"
    df.loc[[3, 4], "T"] = np.nan
    df.to_csv(HERE / "step.csv", index=False)


def sieving():
    """Kunkel-like: context hole/size, knobs sieving/buffer, 2 repetitions.

    Sieving on wins for holes below 8 KiB, off above; a 4 MiB buffer helps sieving
    only for 256 KiB blocks. So no single default is best everywhere.
    """
    rng = np.random.default_rng(1)
    rows = []
    for hole in (1, 2, 4, 8, 16, 32, 64):
        for size in (16, 256):
            for sieving in ("off", "on"):
                for buffer in (1, 4):
                    base = 100.0 if sieving == "off" else (160.0 if hole < 8 else 60.0)
                    if sieving == "on" and size == 256 and buffer == 4:
                        base *= 1.2
                    for rep in range(2):
                        rows.append({"hole": hole, "size": size, "sieving": sieving, "buffer": buffer,
                                     "MBps": round(base * (1 + rng.normal(0, 0.02)), 3)})
    pd.DataFrame(rows).to_csv(HERE / "sieving.csv", index=False)


def groups():
    """Four well separated groups of 12 points over three metrics."""
    rng = np.random.default_rng(2)
    centers = np.array([[0, 0, 0], [10, 0, 5], [0, 10, -5], [10, 10, 10]], dtype=float)
    rows = []
    for g, c in enumerate(centers):
        for j in range(12):
            v = c + rng.normal(0, 0.5, 3)
            rows.append({"flow_core": g * 12 + j, "app_core": j, "gbps": round(v[0], 4), "l3hit": round(v[1], 4),
                         "ipc": round(v[2], 4), "group": g})
    pd.DataFrame(rows).to_csv(HERE / "groups.csv", index=False)


if __name__ == "__main__":
    step()
    sieving()
    groups()
