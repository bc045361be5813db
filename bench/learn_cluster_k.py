"""How often `perflearn cluster` finds the number of groups it was given, by the elbow
(kneedle on k-means inertia, NESCAT's rule, the default) and by the silhouette.

Profiles: G groups in 3-D, centres uniform in [0, 10]^3 and at least 3 apart, 5-24 profiles
each (one group: 30), Gaussian spread ``--spread`` per coordinate; k tried 1..10. A set is
drawn for seeds 0..``--seeds``-1 and kept when its centres are 3 apart.

    python bench/learn_cluster_k.py --seeds 40 --spread 0.3 1.0
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

from perflearn.learn.cluster import cluster
from perflearn.store import Dataset


def groups(seed: int, count: int, spread: float) -> pd.DataFrame | None:
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, (count, 3))
    apart = np.linalg.norm(centres[:, None] - centres[None], axis=2) + np.eye(count) * 99
    if apart.min() < 3:
        return None
    sizes = rng.integers(5, 25, count) if count > 1 else [30]
    profiles = np.vstack([c + rng.normal(0, spread, (s, 3)) for c, s in zip(centres, sizes)])
    return pd.DataFrame({"knob": range(len(profiles)), "a": profiles[:, 0], "b": profiles[:, 1], "c": profiles[:, 2]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--spread", type=float, nargs="+", default=[0.3, 1.0])
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 8])
    args = parser.parse_args()
    print("| spread | groups | sets | elbow finds them | silhouette finds them | elbow wrong: said | elbow right: said |")
    print("|---|---|---|---|---|---|---|")
    warnings.simplefilter("ignore")
    for spread in args.spread:
        for count in args.groups:
            sets = elbow = silhouette = said = false_alarms = 0
            for seed in range(args.seeds):
                frame = groups(seed, count, spread)
                if frame is None:
                    continue
                ds = Dataset.from_frame(frame, ["a", "b", "c"])
                by_elbow = cluster(ds, ["a", "b", "c"])
                by_silhouette = cluster(ds, ["a", "b", "c"], k_by="silhouette")
                sets += 1
                elbow += by_elbow.k == count
                silhouette += by_silhouette.k == count
                noted = by_elbow.silhouette_note() is not None
                said += by_elbow.k != count and noted
                false_alarms += by_elbow.k == count and noted
            print(f"| {spread:g} | {count} | {sets} | {elbow} | {silhouette} | {said} of {sets - elbow} "
                  f"| {false_alarms} of {elbow} |")


if __name__ == "__main__":
    main()
