"""When would heimdall-experience's freshness test (experience.Freshness) have set the experience
aside, replayed on recorded passes (bench/manage.md, session 33)?

    python bench/manage_freshness.py bench/manage_live_s32/*.csv.gz bench/manage_live_s33/*.csv.gz

The experience is sessions 29-31's rounds (the 13 of session 32), without the file replayed. Each
pass's intervals are fed to the test in order, on the configurations the pass ran: it says when the
test would have fired, not what the policy would then have done.
"""
import glob
import sys

import numpy as np
import pandas as pd

from perflearn.manage.config import ConfigSpace
from perflearn.manage.experience import Experience, Freshness, load_bucket

TARGET_S, MAX_RPS = 0.000196735, 38000  # sessions 23-33's knee
EXPERIENCE = sorted(glob.glob("bench/manage_live_s29/r[456].csv.gz") + glob.glob("bench/manage_live_s30/*.csv.gz")
                    + glob.glob("bench/manage_live_s31/r?a.csv.gz"))

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # --help was read as a file: a traceback
    sys.exit(__doc__)
space = ConfigSpace.make(2, 8)
index = {(c.cores, round(c.level, 4)): i for i, c in enumerate(space)}
for path in sys.argv[1:]:
    experience = Experience.from_csvs([f for f in EXPERIENCE if f != path], space, TARGET_S, MAX_RPS)
    for policy, rows in pd.read_csv(path).groupby("policy", sort=False):
        test, fired = Freshness(experience), ""
        for row in rows.itertuples():
            i = index.get((int(row.cores), round(float(row.level), 4)))
            if i is None or not (row.rps > 0 and np.isfinite(row.p95)) or row.reactions:
                continue
            if test.add(load_bucket(row.rps, MAX_RPS, 10), i, row.p95 > TARGET_S):
                fired = f"fired at t = {row.t:.0f} s, {row.rps:.0f} req/s: {test.why()}"
        misses = int(((rows.p95 > TARGET_S) & (rows.rps > 0)).sum())
        print(f"{path:40s} {policy:22s} misses {misses:3d}  {fired or 'never fired'}")
