"""How far `auto` can take the GP: fit time, peak memory and held-out error of the GP
on 2000-8000 runs, beside the best of the other families measured in the same run.

    python bench/learn_gp_large.py [--sizes 2000,4000,8000]

Data: a smooth function of 6 knobs with 5 % noise (seeded; the "smooth" set of
``learn_gp_rows.py``, drawn larger), log target as `auto` tries it, MRE on 2000 held-out
runs. Each GP fit runs in its own process, so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np

HELD_OUT = 2000


def data(n: int):
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, (n + HELD_OUT, 6))
    y = np.exp(1 + np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] ** 2) * (1 + rng.normal(0, 0.05, len(X)))
    return X[:n], y[:n], X[n:], y[n:]


def one(family: str, params: dict, n: int) -> dict:
    import perflearn.learn.models as models

    warnings.simplefilter("ignore")
    X, y, Xt, yt = data(n)
    started = time.perf_counter()
    model = models.build(family, params, log_target=True, random_state=0).fit(X, y)
    fit = time.perf_counter() - started
    started = time.perf_counter()
    p = model.predict(Xt)
    return {"fit_s": fit, "predict_s": time.perf_counter() - started,
            "mre": float(np.mean(np.abs(p - yt) / yt) * 100),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000,4000,8000")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        family, params, n = json.loads(args.child)
        print(json.dumps(one(family, params, n)))
        return
    import perflearn.learn.models as models

    print("| runs | GP fit s | GP predict 2000 s | GP peak RSS MB | GP MRE % | best other family | its fit s | its MRE % |")
    print("|---|---|---|---|---|---|---|---|")
    for n in map(int, args.sizes.split(",")):
        def run(family, params):
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps([family, params, n])],
                                 capture_output=True, text=True, check=True).stdout
            return json.loads(out.splitlines()[-1])

        gp = run("gp", {})
        others = [(f"{f} {p}", run(f, p)) for f in ("rf", "gbm", "mlp", "svr") for p in models.grid(f, n, 6)]
        name, best = min(others, key=lambda o: o[1]["mre"])
        print(f"| {n} | {gp['fit_s']:.1f} | {gp['predict_s']:.2f} | {gp['rss_mb']:.0f} | {gp['mre']:.3f} | "
              f"{name} | {best['fit_s']:.1f} | {best['mre']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
