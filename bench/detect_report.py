"""The detect evaluation as Markdown tables, from the committed data set.

    python bench/detect_report.py [--json report.json]

Runs `perflearn detect evaluate` on examples/detect/data (no re-measuring) and prints
macro-F1, false-alarm and miss rates per evaluation, per-class F1, the 5-fold confusion
matrix and the slowdown regressor's error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "examples" / "detect" / "data"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="Keep the full report here.")
    args = parser.parse_args()
    out = args.json or Path(tempfile.mkdtemp()) / "report.json"
    subprocess.run([sys.executable, "-m", "perflearn", "detect", "evaluate", "--runs", str(DATA / "runs.parquet"),
                    "--samples", str(DATA / "samples.parquet"), "--group", "app", "--group", "input",
                    "--time-metric", "runtime", "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    parts = [name for name in report if name != "slowdown"]
    print("| evaluation | macro-F1 | false alarm | miss | windows |\n|---|---|---|---|---|")
    for name in parts:
        r = report[name]
        print(f"| {name} | {r['macro_f1']:.3f} | {r['false_alarm']:.3f} | {r['miss']:.3f} | {r['windows']} |")
    print("\n| class | " + " | ".join(parts) + " |\n|---|" + "---|" * len(parts))
    for cls in report["kfold"]["per_class_f1"]:
        print(f"| {cls} | " + " | ".join(f"{report[p]['per_class_f1'][cls]:.3f}" for p in parts) + " |")
    confusion = report["kfold"]["confusion"]
    print("\n5-fold confusion (rows: true, columns: predicted)\n")
    print("| | " + " | ".join(confusion["labels"]) + " |\n|---|" + "---|" * len(confusion["labels"]))
    for cls, row in zip(confusion["labels"], confusion["matrix"]):
        print(f"| {cls} | " + " | ".join(map(str, row)) + " |")
    if "slowdown" in report:
        s = report["slowdown"]
        print(f"\nSlowdown regressor (runtime / the same workload and input's healthy runtime), 5-fold by run: "
              f"MAPE {s['mape']:.1f}% (median {s['median_ape']:.1f}%) over {s['runs']} runs.")


if __name__ == "__main__":
    main()
