"""Session 9 confirmation on dev data through perflearn's own code path: `auto` as `perflearn fit`
builds it (model_for with the AUTO_* defaults) on the same training sets as dev9.py, default
candidates (now with the random forest) vs the session-6 candidates (families linear, bayes, gp,
which the small-data rule keeps as they are). No x264, Apache, LLVM or BDBC.

    BDBJ_CSV=BDBJ.csv DEV_DIR=dir DEV_EXTRA=dir/SQL_prefix.csv python dev9_auto.py out.jsonl [SYSTEM,...]
"""
import json, os, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev9 import systems
from perflearn.learn import models
from perflearn.learn.models import (AUTO_BLEND, AUTO_ENSEMBLE, AUTO_LOO_BELOW, AUTO_POINT, AUTO_SMALL_RATIO,
                                    AUTO_WEIGHTS, model_for)

VARIANTS = {  # label: (families, the families `auto` keeps on small data)
    "session 6 (linear, bayes, gp)": (("linear", "bayes", "gp"), models.SMALL_FAMILIES),
    "default (+ rf)": (None, models.SMALL_FAMILIES),
}


def run(out, systems, variants, only=None):
    """`auto` of every variant on dev9.py's training sets (N = p + 1 and 1.5 p) of ``systems``,
    one JSON line per fit in ``out``."""
    for name, X, y in systems:
        if only and name not in only:
            continue
        p = X.shape[1]
        for mult, reps in ((1.0, 10), (1.5, 8)):
            n = p + 1 if mult == 1 else int(round(mult * p))
            for rep in range(reps):
                r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
                for label, (fams, small) in variants.items():
                    models.SMALL_FAMILIES = small
                    t0 = time.time()
                    est = model_for("auto", families=fams, cv=5, ensemble=AUTO_ENSEMBLE, loo_below=AUTO_LOO_BELOW,
                                    blend=AUTO_BLEND, small_ratio=AUTO_SMALL_RATIO, point=AUTO_POINT,
                                    weights=AUTO_WEIGHTS, random_state=0, n_jobs=1).fit(X[tr], y[tr])
                    e = float(np.mean(np.abs(est.predict(X[te]) - y[te]) / y[te]) * 100)
                    rec = dict(system=name, mult=mult, n=n, rep=rep, variant=label, mre=e, fit_s=time.time() - t0,
                               members=est.members_)
                    with open(out, "a") as f:
                        f.write(json.dumps(rec) + "\n")
                print(name, n, rep, flush=True)


if __name__ == "__main__":
    run(sys.argv[1], systems(), VARIANTS, set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None)
