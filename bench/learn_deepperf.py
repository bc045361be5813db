"""DeepPerf external accuracy benchmark for `perflearn fit --family auto`.

Protocol (DeepPerf, Ha & Zhang ICSE'19, exactly as published): for each system and
sample size N, 30 repetitions; repetition r trains on the N rows listed in row r of
`<system>_training_index.csv` and is scored by MRE = mean(|pred - y| / y) * 100 on
*all* remaining rows. We report the mean over the 30 repetitions with the 95% margin
(1.96 * std / sqrt(30)), beside DeepPerf's published mean (result_<system>.csv) and
DECART's and Divide-and-Learn's figures quoted in the data README.

`auto` chooses family, hyperparameters and log target by 5-fold CV on the N training
rows only; nothing here is specific to these systems.

    python bench/learn_deepperf.py                     # all 30 repetitions (30-40 min on 2 idle cores)
    python bench/learn_deepperf.py --reps 5 --systems Apache
    python bench/learn_deepperf.py --out bench/learn_deepperf.md
    python bench/learn_deepperf.py --data-dir /tmp/heldout --system LLVM --interleave   # another system

A system from another directory (`--data-dir`) needs `<SYS>_AllNumeric.csv` and
`<SYS>_training_index.csv` in DeepPerf's layout; its published figures are read from
`result_<SYS>.csv` (DeepPerf) and, if present, `CART_<SYS>_Stat_crossvalidation_gridsearch.csv`
(DECART, column "GeneralizedError(%)") in the same directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "deepperf"

PUBLISHED = {  # mean MRE (%) per sample size, from ../shared/data/deepperf/README.md
    "x264": {
        "sizes": [16, 32, 48, 64, 80],
        "DeepPerf": [10.43, 3.61, 2.13, 1.49, 0.87],
        "DECART": [17.71, 9.31, 6.37, 4.26, 2.94],
        "DaL (median)": [8.04, 3.21, 1.66, 1.13, 0.79],
    },
    "Apache": {
        "sizes": [9, 18, 27, 36, 45],
        "DeepPerf": [17.87, 10.24, 8.25, 6.97, 6.29],
        "DECART": [None, 15.83, 11.03, 9.49, 7.84],
    },
}


def published(system: str, data_dir: Path = DATA) -> dict:
    """Published figures: the table above for x264/Apache, else DeepPerf's (and DECART's) files in data_dir."""
    if system in PUBLISHED and Path(data_dir).resolve() == DATA.resolve():
        return PUBLISHED[system]
    res = pd.read_csv(Path(data_dir) / f"result_{system}.csv", comment="#", header=None)
    pub = {"sizes": [int(v) for v in res[0]], "DeepPerf": [round(float(v), 2) for v in res[1]]}
    cart = Path(data_dir) / f"CART_{system}_Stat_crossvalidation_gridsearch.csv"
    if cart.exists():
        c = pd.read_csv(cart)
        c = c[pd.to_numeric(c["SamplingSize"], errors="coerce").notna()]
        err = dict(zip(c["SamplingSize"].astype(float).astype(int), c["GeneralizedError(%)"].astype(float)))
        pub["DECART"] = [round(err[n], 2) if n in err else None for n in pub["sizes"]]
    return pub


def load(system: str, data_dir: Path = DATA):
    data = pd.read_csv(Path(data_dir) / f"{system}_AllNumeric.csv")
    idx = pd.read_csv(Path(data_dir) / f"{system}_training_index.csv", header=None)
    labels = idx.iloc[0].astype(int).to_numpy()
    return data, idx, labels


def one(args):
    system, n, rep, family, ensemble, loo_below, blend, small_ratio, point = args[:9]
    data_dir = args[9] if len(args) > 9 else DATA
    weights = args[10] if len(args) > 10 else None
    import warnings

    warnings.filterwarnings("ignore")
    from perflearn.learn.features import training_data
    from perflearn.learn.model import fit_data
    from perflearn.learn.metrics import mre
    from perflearn.store import Dataset

    data, idx, labels = load(system, data_dir)
    cols = np.flatnonzero(labels == n)
    train = idx.iloc[rep, cols].astype(int).to_numpy()
    test = np.setdiff1d(np.arange(len(data)), train)
    target = data.columns[-1]
    ds = Dataset.from_frame(data.iloc[train].reset_index(drop=True), metrics=[target], name=system)
    t0 = time.perf_counter()
    model = fit_data(training_data(ds, target), family, ensemble=ensemble, loo_below=loo_below, blend=blend,
                     small_ratio=small_ratio, point=point, weights=weights, random_state=0,
                     experiment=system)
    fit_s = time.perf_counter() - t0
    pred = model.predict(data.iloc[test])
    label = model.family + (" log" if model.log_target else "")
    if len(model.cv.get("members", [])) > 1:
        label = "ensemble of " + str(len(model.cv["members"]))
    return system, n, rep, mre(data[target].to_numpy()[test], pred), label, fit_s


def table(df: pd.DataFrame, family: str, systems: list[str], data_dir: Path = DATA) -> list[str]:
    """Markdown table lines: our mean MRE ± 95% margin per system and N beside the published ones."""
    lines = [
        f"### DeepPerf benchmark: perflearn `{family}` vs published MRE (%)",
        "",
        "Repetitions per sample size from the published training index files; MRE on all remaining rows; "
        "mean ± 95% margin (1.96 std / sqrt(reps)). Lower is better.",
        "",
    ]
    for system in systems:
        if system not in set(df.system):
            continue
        pub = published(system, data_dir)
        others = [k for k in pub if k != "sizes"]
        lines += [f"**{system}**", "", "| N | reps | perflearn " + family + " | " + " | ".join(others)
                  + " | beats best published | chosen (most often) | fit s (median) |",
                  "|---|---|---|" + "---|" * len(others) + "---|---|---|"]
        for i, n in enumerate(pub["sizes"]):
            sub = df[(df.system == system) & (df.n == n)]
            if sub.empty:
                continue
            m = sub.mre.mean()
            margin = 1.96 * sub.mre.std(ddof=1) / np.sqrt(len(sub)) if len(sub) > 1 else 0.0
            pubs = [pub[k][i] for k in others]
            best = min(v for v in pubs if v is not None)
            cells = [("NA" if v is None else f"{v:.2f}") for v in pubs]
            top = sub.chosen.value_counts()
            chosen = ", ".join(f"{k} ×{v}" for k, v in top.head(2).items())
            lines.append(f"| {n} | {len(sub)} | {m:.2f} ± {margin:.2f} | " + " | ".join(cells)
                         + f" | {'yes' if m < best else 'no'} ({best:.2f}) | {chosen} | {sub.fit_s.median():.1f} |")
        lines.append("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", "--system", default="x264,Apache")
    ap.add_argument("--data-dir", default=str(DATA), help="directory of the systems' files (default: ../shared/data/deepperf)")
    ap.add_argument("--interleave", action="store_true",
                    help="run repetition by repetition across systems and sample sizes (partial runs then cover every N)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--sizes", default=None, help="only these sample sizes, e.g. 9,16")
    ap.add_argument("--first-rep", type=int, default=1, help="first repetition (1-based) of the index files")
    ap.add_argument("--jsonl", default=None, help="append each repetition's result here as it finishes")
    ap.add_argument("--family", default="auto")
    ap.add_argument("--ensemble", type=int, default=None, help="auto: greedy ensemble rounds (default: perflearn's)")
    ap.add_argument("--loo-below", type=int, default=None, help="auto: leave-one-out up to this many runs (default: perflearn's)")
    ap.add_argument("--blend", type=float, default=None, help="auto: average candidates within this fraction of the best")
    ap.add_argument("--small-ratio", type=float, default=None,
                    help="auto: low-variance families only up to this many runs per feature (default: perflearn's)")
    ap.add_argument("--point", default=None, choices=["auto", "median", "relative"],
                    help="auto: point predicted (default: perflearn's, auto = relative-error point on small data)")
    ap.add_argument("--weights", default=None, choices=["auto", "near-ties", "inverse"],
                    help="auto: how candidates are combined (default: perflearn's, auto = 1/CV error^2 weights on small data)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default=None, help="also write the Markdown table here")
    ap.add_argument("--summarize", default=None, help="only print the table of results stored by --jsonl")
    a = ap.parse_args()
    if a.summarize:
        df = pd.read_json(a.summarize, lines=True).drop_duplicates(["system", "n", "rep"])
        print("\n".join(table(df, a.family, a.systems.split(","), Path(a.data_dir))))
        return
    jobs = []
    for system in a.systems.split(","):
        _, _, labels = load(system, Path(a.data_dir))
        for n in sorted(set(labels)):
            if a.sizes and int(n) not in {int(v) for v in a.sizes.split(",")}:
                continue
            for rep in range(a.first_rep, a.first_rep + a.reps):
                jobs.append((system, int(n), rep, a.family, a.ensemble, a.loo_below, a.blend, a.small_ratio, a.point,
                             Path(a.data_dir), a.weights))
    if a.interleave:
        order = {s: i for i, s in enumerate(a.systems.split(","))}
        jobs.sort(key=lambda j: (j[2], order[j[0]], j[1]))
    t0 = time.time()
    results = []
    with ProcessPoolExecutor(a.workers) as pool:
        for res in pool.map(one, jobs, chunksize=1):
            results.append(res)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps(dict(zip(["system", "n", "rep", "mre", "chosen", "fit_s"], res))) + "\n")
    wall = time.time() - t0
    df = pd.DataFrame(results, columns=["system", "n", "rep", "mre", "chosen", "fit_s"])
    lines = table(df, a.family, a.systems.split(","), Path(a.data_dir))
    extra = "" if Path(a.data_dir).resolve() == DATA.resolve() else f" --data-dir {a.data_dir}"
    lines += [f"Wall time {wall / 60:.1f} min with {a.workers} worker(s). Reproduce: "
              f"`python bench/learn_deepperf.py --reps {a.reps} --first-rep {a.first_rep} --systems {a.systems}{extra}`", ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
