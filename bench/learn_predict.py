"""Predict latency of a 100-tree random forest for 10,000 candidate points (goal: < 50 ms).

The QoS manager scores every candidate point (cores x frequency x ...) each control
interval; Heimdall's forest missed its 1-second interval at 200 trees. We time, as
medians (and mins) of repeated calls on this machine:

- reference: scikit-learn's own ``RandomForestRegressor.predict`` on the numeric matrix;
- ``Model.predict(frame)``: perflearn's full path from a DataFrame (schema check, one-hot),
  through the compiled kernel (``perflearn.learn.fastforest``, numba);
- ``Model.predict_dist(frame)``: the same plus per-tree spread (std and 5-95% band);
- ``predict_spread(model.estimator, X)``: the spread on an already-encoded matrix
  (what a control loop that encodes its candidate grid once would call);
- ``fastforest.predict(forest, X)``: the kernel alone;
- the same two ``Model`` calls through the previous path (no numba: per-tree
  scikit-learn traversal, deduplicated and sorted rows, two threads);
- with ``--libraries``: treelite's GTIL (``treelite.gtil.predict``/``predict_per_tree``)
  when installed, and with ``--tl2cgen`` a forest compiled to C by tl2cgen (compile
  time reported; it takes minutes).

    python bench/learn_predict.py [--trees 100] [--points 10000] [--runs 2000] [--repeat 21] [--libraries] [--tl2cgen]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, min) wall-clock ms; the min approximates an unloaded machine."""
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000.0, min(samples) * 1000.0


def gtil_rows(forest, X, repeat: int):
    """treelite's GTIL on the same forest (mean, and per-tree values for a spread), if installed."""
    try:
        import treelite
        import treelite.gtil
    except ImportError:
        return [("treelite GTIL: not installed", None)]
    tl = treelite.sklearn.import_model(forest)
    X64 = X.astype(np.float32).astype(np.float64)  # scikit-learn compares float32 inputs
    same = np.array_equal(treelite.gtil.predict(tl, X64).ravel(), forest.predict(X))
    tag = f"treelite {treelite.__version__} GTIL"
    return [
        (f"{tag} gtil.predict(X) (exact: {'yes' if same else 'no'})",
         timed(lambda: treelite.gtil.predict(tl, X64, nthread=2), repeat)),
        (f"{tag} gtil.predict_per_tree(X)", timed(lambda: treelite.gtil.predict_per_tree(tl, X64, nthread=2), repeat)),
    ]


def tl2cgen_rows(forest, X, repeat: int):
    """The forest compiled to C by tl2cgen (gcc), if installed; compile time in the label."""
    try:
        import tempfile

        import tl2cgen
        import treelite
    except ImportError:
        return [("tl2cgen: not installed", None)]
    tl = treelite.sklearn.import_model(forest)
    lib = tempfile.mkdtemp(prefix="perflearn-tl2cgen-") + "/forest.so"
    t0 = time.perf_counter()
    tl2cgen.export_lib(tl, toolchain="gcc", libpath=lib, params={"parallel_comp": 2}, nthread=2)
    compile_s = time.perf_counter() - t0
    pred = tl2cgen.Predictor(lib, nthread=2)
    dm = tl2cgen.DMatrix(X.astype(np.float32).astype(np.float64), dtype="float64")
    same = np.array_equal(pred.predict(dm).ravel(), forest.predict(X))
    exact = "yes" if same else "no"
    label = f"tl2cgen {tl2cgen.__version__} compiled C (gcc -O3, {compile_s:.0f} s to compile; exact: {exact})"
    return [(label, timed(lambda: pred.predict(dm), repeat))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=2000, help="training runs")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--libraries", action="store_true", help="also time treelite's GTIL (if installed)")
    ap.add_argument("--tl2cgen", action="store_true", help="also compile the forest with tl2cgen (minutes)")
    a = ap.parse_args()

    import os

    t0 = time.perf_counter()
    from perflearn.learn import fastforest, fit, uncertainty
    from perflearn.learn.uncertainty import predict_spread
    from perflearn.store import Dataset

    import_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    n = a.runs
    train = pd.DataFrame({
        "load": rng.uniform(1000, 40000, n),
        "cores": rng.integers(1, 9, n),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], n),
        "governor": rng.choice(["performance", "powersave"], n),
    })
    util = train["load"] / (train["cores"] * train["freq"] * 6000)
    train["p95"] = 0.3 / np.clip(1 - util, 0.02, None) * (1 + rng.normal(0, 0.05, n)) + 0.05 * (train["governor"] == "powersave")
    ds = Dataset.from_frame(train, metrics=["p95"], name="bench")
    model = fit(ds, "p95", family="rf", params={"n_estimators": a.trees}, log_target=False, cv=2)
    scaled = model.estimator  # the forest inside the target's scale (BinaryScaler, a power of two)
    forest = scaled.regressor_
    random_cand = pd.DataFrame({
        "load": rng.uniform(1000, 40000, a.points),
        "cores": rng.integers(1, 9, a.points),
        "freq": rng.choice([0.8, 1.2, 1.6, 2.0], a.points),
        "governor": rng.choice(["performance", "powersave"], a.points),
    })
    # a policy table: every knob setting at a grid of loads (what a QoS manager scores)
    loads = np.linspace(1000, 40000, int(np.ceil(a.points / 64)))
    grid = pd.DataFrame([(ld, c, f, g) for ld in loads for c in range(1, 9) for f in (0.8, 1.2, 1.6, 2.0)
                         for g in ("performance", "powersave")], columns=["load", "cores", "freq", "governor"]).head(a.points)

    t0 = time.perf_counter()
    fastforest.flatten(forest)
    flatten_ms = (time.perf_counter() - t0) * 1000.0
    diff = float(np.max(np.abs(model.predict(random_cand) - model.pipeline.predict(random_cand))))

    def previous(fn):
        """fn through the path before the compiled kernel (what runs without numba)."""
        def run():
            saved = uncertainty.COMPILED_FROM
            uncertainty.COMPILED_FROM = float("inf")
            try:
                return fn()
            finally:
                uncertainty.COMPILED_FROM = saved
        return run

    load_start = os.getloadavg()
    why = fastforest.unavailable()
    print(f"### Predict latency: {a.trees}-tree random forest, {a.points} candidate points\n")
    depth = int(np.median([t.get_depth() for t in forest.estimators_]))
    print(f"Forest trained on {n} runs (median tree depth {depth}); ms per call, median and min of {a.repeat} calls "
          f"after one warm-up; {os.cpu_count()} cores. Compiled path: "
          f"{'numba ' + __import__('numba').__version__ if why is None else 'NOT AVAILABLE (' + why + ')'}; "
          f"importing perflearn.learn and fastforest (numba) took {import_s:.2f} s, flattening this forest "
          f"(once per model) {flatten_ms:.0f} ms. Max |Model.predict - scikit-learn pipeline.predict| = {diff:.3g}.\n")
    print("| candidates | path | median ms | min ms | goal < 50 ms (median / min) |")
    print("|---|---|---|---|---|")
    for label, cand in (("random (continuous load)", random_cand), ("grid: 64 settings x loads", grid)):
        X = model.transform(cand)
        rows = [
            ("scikit-learn forest.predict(X) (reference)", timed(lambda: forest.predict(X), a.repeat)),
            ("Model.predict(frame)", timed(lambda: model.predict(cand), a.repeat)),
            ("Model.predict_dist(frame) (+ per-tree spread)", timed(lambda: model.predict_dist(cand), a.repeat)),
            ("predict_spread(estimator, X) (pre-encoded)", timed(lambda: predict_spread(scaled, X), a.repeat)),
            ("fastforest.predict(forest, X) (kernel alone)", timed(lambda: fastforest.predict(forest, X), a.repeat)),
            ("Model.transform(frame) (encoding alone)", timed(lambda: model.transform(cand), a.repeat)),
            ("previous path: Model.predict(frame)", timed(previous(lambda: model.predict(cand)), a.repeat)),
            ("previous path: Model.predict_dist(frame)", timed(previous(lambda: model.predict_dist(cand)), a.repeat)),
        ]
        if a.libraries and label.startswith("random"):
            rows += gtil_rows(forest, X, a.repeat)
        if a.tl2cgen and label.startswith("random"):
            rows += tl2cgen_rows(forest, X, a.repeat)
        for name, t in rows:
            if t is None:
                print(f"| {label} ({len(cand)}) | {name} | | | |")
                continue
            med, mn = t
            print(f"| {label} ({len(cand)}) | {name} | {med:.1f} | {mn:.1f} | "
                  f"{'yes' if med < 50 else 'no'} / {'yes' if mn < 50 else 'no'} |")
    load_end = os.getloadavg()
    print(f"\nLoad average (1, 5, 15 min) at the start: {', '.join(f'{v:.2f}' for v in load_start)}; "
          f"at the end: {', '.join(f'{v:.2f}' for v in load_end)}.")
    print(f"\nReproduce: `python bench/learn_predict.py --trees {a.trees} --points {a.points} --runs {n}"
          f"{' --libraries' if a.libraries else ''}{' --tl2cgen' if a.tl2cgen else ''}`")


if __name__ == "__main__":
    main()
