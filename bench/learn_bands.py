"""How often `predict`'s 90 % band holds the held-out value: the family's own spread alone
(as before session 47) and widened to the fit's out-of-fold residuals (the default now).

Data: the DeepPerf systems with their published training sets (repetition r trains on
row r of `<SYS>_training_index.csv` and is scored on all remaining rows), and the
manager's live load sweeps of memcached (p95 per interval from cores, level and offered
load; a random share of one sweep's intervals trains, the rest are scored). Per setting:
coverage (share of held-out values inside lo..hi, the goal is 0.90) and the median band
width relative to the prediction, as mean over the repetitions.

    python bench/learn_bands.py --reps 10 --out bench/learn_bands.md
    python bench/learn_bands.py --reps 10 --data-dir /tmp/heldout --systems LLVM,BDBC   # held-out systems
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DEEPPERF = HERE.parent / ".." / "shared" / "data" / "deepperf"
SWEEPS = sorted((HERE / "manage_live_s36").glob("sweep*.csv.gz"))
SIZES = {"Apache": [9, 18, 45], "x264": [16, 32, 80], "LLVM": [11, 22, 55], "BDBC": [18, 36, 90]}
SWEEP_SHARES = [0.05, 0.2]


def deepperf_sets(system: str, data_dir: Path, reps: int):
    """(label, train frame, test frame, target) per published training set."""
    data = pd.read_csv(data_dir / f"{system}_AllNumeric.csv")
    idx = pd.read_csv(data_dir / f"{system}_training_index.csv", header=None)
    labels = idx.iloc[0].astype(int).to_numpy()
    for n in SIZES.get(system, sorted(set(labels))[:3]):
        cols = np.flatnonzero(labels == n)
        for rep in range(reps):
            train = idx.iloc[rep + 1, cols].astype(int).to_numpy()  # row 0 holds the sizes
            test = np.setdiff1d(np.arange(len(data)), train)
            yield f"{system} N={n}", data.iloc[train], data.iloc[test], data.columns[-1]


def sweep_sets(reps: int):
    for path in SWEEPS:
        frame = pd.read_csv(path)
        frame = frame[(frame.policy == "sweep") & (frame.rps > 0) & frame.p95.notna()]
        frame = frame[["cores", "level", "offered_rps", "p95"]].reset_index(drop=True)
        for share in SWEEP_SHARES:
            for rep in range(reps):
                rng = np.random.default_rng(rep)
                train = rng.choice(len(frame), size=max(10, int(share * len(frame))), replace=False)
                test = np.setdiff1d(np.arange(len(frame)), train)
                yield f"sweep p95 {int(share * 100)} %", frame.iloc[train], frame.iloc[test], "p95"


def score(label: str, train: pd.DataFrame, test: pd.DataFrame, target: str, family: str) -> dict:
    from perflearn.learn.features import training_data
    from perflearn.learn.model import fit_data
    from perflearn.learn.uncertainty import calibrated_band, predict_spread
    from perflearn.store import Dataset

    ds = Dataset.from_frame(train.reset_index(drop=True), metrics=[target], name="bands")
    t0 = time.perf_counter()
    model = fit_data(training_data(ds, target), family, random_state=0, experiment="bands")
    fit_s = time.perf_counter() - t0
    X = model.transform(test[model.features])
    y = test[target].to_numpy(dtype=float)
    out = {"set": label, "family": family, "n": len(train), "fit_s": fit_s}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name, band in (("own", None), ("calibrated", model.cv.get("band"))):
            pred, _, lo, hi = predict_spread(model.estimator, X, rel_error=model.cv.get("mre"), band=band)
            out[f"{name}_coverage"] = float(np.mean((y >= lo) & (y <= hi)))
            out[f"{name}_width"] = float(np.nanmedian((hi - lo) / np.abs(pred)))
        if model.cv.get("band"):  # the residuals' band alone, without the family's own spread
            lo, hi = calibrated_band(pred, model.cv["band"])
            out["residual_coverage"] = float(np.mean((y >= lo) & (y <= hi)))
            out["residual_width"] = float(np.nanmedian((hi - lo) / np.abs(pred)))
    return out


def summarize(rows: list[dict]) -> list[str]:
    df = pd.DataFrame(rows)
    lines = ["| data | family | runs | reps | coverage: own spread | calibrated | residuals alone "
             "| width: own | calibrated | residuals alone |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (label, family), g in df.groupby(["set", "family"], sort=False):
        lines.append(f"| {label} | {family} | {int(g.n.median())} | {len(g)} | {g.own_coverage.mean():.2f} | "
                     f"{g.calibrated_coverage.mean():.2f} | {g.residual_coverage.mean():.2f} | {g.own_width.median():.2f} | "
                     f"{g.calibrated_width.median():.2f} | {g.residual_width.median():.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--systems", default="Apache,x264,sweeps")
    ap.add_argument("--data-dir", default=str(DEEPPERF))
    ap.add_argument("--families", default="auto,rf,cart")
    ap.add_argument("--sizes", default=None, help="only these training sizes N of the DeepPerf systems (e.g. 9,11)")
    ap.add_argument("--jsonl", default=None, help="append each result here as it finishes")
    ap.add_argument("--summarize", default=None, help="print the table of this JSONL file and stop")
    ap.add_argument("--out", default=None, help="write the table here (Markdown)")
    args = ap.parse_args()
    if args.summarize:
        print("\n".join(summarize([json.loads(line) for line in open(args.summarize)])))
        return
    rows = []
    for system in args.systems.split(","):
        sets = sweep_sets(args.reps) if system == "sweeps" else deepperf_sets(system, Path(args.data_dir), args.reps)
        sizes = {f"N={n}" for n in args.sizes.split(",")} if args.sizes else None
        for label, train, test, target in sets:
            if sizes and label.split()[-1] not in sizes:
                continue
            for family in args.families.split(","):
                row = score(label, train, test, target, family)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
    table = summarize(rows)
    print("\n".join(table))
    if args.out:
        Path(args.out).write_text("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
