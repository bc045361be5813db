"""The detect evaluation as Markdown tables, from the committed data set.

    python bench/detect_report.py [--json report.json]    # the detector as `perflearn detect` fits it
    python bench/detect_report.py --variants              # ... beside the variants it was chosen from

Runs `perflearn detect evaluate` on examples/detect/data (no re-measuring) and prints
macro-F1, false-alarm and miss rates per evaluation (per window, and the verdict over the
latest 3 windows that `detect watch` gives), per-class F1, macro-F1 of each held-out
workload, the 5-fold confusion matrix and the slowdown regressor's error.

``--variants`` evaluates, in this process and with the same folds, the feature sets and
models that were compared while building the detector (seed 0; over seeds 0-2 the
spread of each number was about ±0.005).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "examples" / "detect" / "data"
GROUPS = ["app", "input"]


def report_tables(report: dict) -> None:
    parts = [name for name in report if name != "slowdown"]
    print("| evaluation | macro-F1 | false alarm | miss | windows |\n|---|---|---|---|---|")
    for name in parts:
        r = report[name]
        print(f"| {name} | {r['macro_f1']:.3f} | {r['false_alarm']:.3f} | {r['miss']:.3f} | {r['windows']} |")
    print("\n| class | " + " | ".join(parts) + " |\n|---|" + "---|" * len(parts))
    for cls in report["kfold"]["per_class_f1"]:
        print(f"| {cls} | " + " | ".join(f"{report[p]['per_class_f1'][cls]:.3f}" for p in parts) + " |")
    held = [p for p in parts if "per_group" in report[p]]
    for name in held:
        groups = report[name]["per_group"]
        if name.startswith("leave_one_app_out"):
            print(f"\n{name}: macro-F1 of each held-out workload\n")
            print("| " + " | ".join(groups) + " |\n|" + "---|" * len(groups))
            print("| " + " | ".join(f"{v:.3f}" for v in groups.values()) + " |")
    confusion = report["kfold"]["confusion"]
    print("\n5-fold confusion, per window (rows: true, columns: predicted)\n")
    print("| | " + " | ".join(confusion["labels"]) + " |\n|---|" + "---|" * len(confusion["labels"]))
    for cls, row in zip(confusion["labels"], confusion["matrix"]):
        print(f"| {cls} | " + " | ".join(map(str, row)) + " |")
    if "slowdown" in report:
        s = report["slowdown"]
        print(f"\nSlowdown regressor (runtime / the same workload and input's healthy runtime), 5-fold by run: "
              f"MAPE {s['mape']:.1f}% (median {s['median_ape']:.1f}%) over {s['runs']} runs.")


# -- variants ------------------------------------------------------------------------
_OLD_REST = ("rest.cpu", "rest.read_bytes", "rest.write_bytes", "rest.pgfault", "rest.net_rx", "rest.net_tx")


def raw_and_old_rest(signal: str) -> bool:
    """The first detector's signals: every raw signal plus six rest-of-node differences."""
    from perflearn.detect.features import DERIVED

    return signal in _OLD_REST or not signal.startswith(DERIVED)


def every_signal(signal: str) -> bool:
    return True


_ANON = ("rest.anon", "share.rest_anon", "rate.rest_anon")


def node_without_anon(signal: str) -> bool:
    """The detector's signals without the rest of the node's anonymous memory."""
    from perflearn.detect.features import node_signal

    return node_signal(signal) and signal not in _ANON


def _pipeline(keep, final, select: bool = True):
    from sklearn.ensemble import ExtraTreesClassifier
    from sklearn.feature_selection import SelectFromModel, VarianceThreshold
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline

    from perflearn.detect.model import NodeSignals

    steps = [("signals", NodeSignals(keep)), ("impute", SimpleImputer(strategy="median", keep_empty_features=True)),
             ("variance", VarianceThreshold())]
    if select:
        screen = ExtraTreesClassifier(n_estimators=100, class_weight="balanced", n_jobs=1, random_state=0)
        steps.append(("select", SelectFromModel(screen, threshold="median")))
    return Pipeline([*steps, ("forest", final)])


def variants():
    from sklearn.ensemble import ExtraTreesClassifier, HistGradientBoostingClassifier, RandomForestClassifier

    from perflearn.detect.features import node_signal

    def rf():
        return RandomForestClassifier(n_estimators=300, class_weight="balanced", n_jobs=1, random_state=0)

    def et(**kw):
        return ExtraTreesClassifier(n_estimators=300, bootstrap=True, n_jobs=1, random_state=0,
                                    **{"class_weight": "balanced", **kw})

    return [
        ("before: raw + 6 rest-of-node signals, random forest", _pipeline(raw_and_old_rest, rf())),
        ("all signals (raw + derived), random forest", _pipeline(every_signal, rf())),
        ("all signals (raw + derived), extra trees", _pipeline(every_signal, et())),
        ("node signals, random forest", _pipeline(node_signal, rf())),
        ("node signals, gradient boosting", _pipeline(node_signal, HistGradientBoostingClassifier(
            max_iter=200, class_weight="balanced", random_state=0), select=False)),
        ("node signals, extra trees, no class weights", _pipeline(node_signal, et(class_weight=None))),
        ("node signals without rest.anon (anonymous memory), extra trees", _pipeline(node_without_anon, et())),
        ("node signals, extra trees (the detector)", _pipeline(node_signal, et())),
    ]


def compare_variants() -> None:
    from perflearn.detect.features import window_features
    from perflearn.detect.model import evaluate, training_set
    from perflearn.detect.watch import samples_interval
    from perflearn.store.export import read_frame

    runs, samples = read_frame(DATA / "runs.parquet"), read_frame(DATA / "samples.parquet")
    interval = samples_interval(samples)
    data = training_set(window_features(samples, interval, 4), runs, "interference", GROUPS, None)
    print("| variant | 5-fold | 5-fold, 3 windows | unseen workload | unseen workload, 3 windows | unseen input "
          "| unseen input, 3 windows | held out (per window): fio / redis / sort / stream / zstd | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, model in variants():
        start = time.monotonic()
        r = evaluate(data, model=model)
        lowo = r["leave_one_app_out"]["per_group"]
        cells = [f"{r[k]['macro_f1']:.3f}" for k in ("kfold", "kfold (3 windows)", "leave_one_app_out",
                                                     "leave_one_app_out (3 windows)", "leave_one_input_out",
                                                     "leave_one_input_out (3 windows)")]
        print(f"| {name} | " + " | ".join(cells) + " | " + " / ".join(f"{v:.2f}" for v in lowo.values())
              + f" | {time.monotonic() - start:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="Keep the full report here.")
    parser.add_argument("--variants", action="store_true", help="Compare the variants the detector was chosen from.")
    args = parser.parse_args()
    if args.variants:
        compare_variants()
        return
    out = args.json or Path(tempfile.mkdtemp()) / "report.json"
    subprocess.run([sys.executable, "-m", "perflearn", "detect", "evaluate", "--runs", str(DATA / "runs.parquet"),
                    "--samples", str(DATA / "samples.parquet"), *(a for g in GROUPS for a in ("--group", g)),
                    "--time-metric", "runtime", "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
    report_tables(json.loads(out.read_text()))


if __name__ == "__main__":
    main()
