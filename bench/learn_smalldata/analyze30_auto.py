"""Session 30: the table of dev30_auto.py's jsonl (as analyze9_auto.py): default vs + mlp, per size.

    python analyze30_auto.py auto30.jsonl
"""
import sys
import pandas as pd
from analyze9_auto import report

report(pd.read_json(sys.argv[1], lines=True), "default", "+ mlp", "mlp",
       real=("BDBJ", "Dune", "hsmgp", "SQL", "Lrzip", "VP8"))
