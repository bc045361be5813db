"""Session 30: a seventh small-data candidate tried through perflearn's own code path (as
dev9_auto.py): `auto` as `perflearn fit` builds it, the default small-data candidates against the
same plus a bag of small MLPs on log y (`mlp`'s small-data setting: one hidden layer of 32,
weight decay 1.0, L-BFGS, three random starts averaged), on dev9.py's training sets. Dev
systems: the 13 synthetic ones of dev.py (`syn`) and the six real ones (`real`: BDBJ and the
Dune, hsmgp, SQL prefixes of session 9, the Lrzip and VP8 samples of session 21, in DEV_DIR).
No x264, Apache, LLVM or BDBC.

    DEV_DIR=dir python dev30_auto.py out.jsonl syn      # and: ... out.jsonl real
    python analyze30_auto.py out.jsonl
"""
import json, os, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev
from dev9 import real
from perflearn.learn import models
from perflearn.learn.models import (AUTO_BLEND, AUTO_ENSEMBLE, AUTO_LOO_BELOW, AUTO_POINT, AUTO_SMALL_RATIO,
                                    AUTO_WEIGHTS, model_for)

DEFAULT = models.SMALL_FAMILIES
VARIANTS = {"default": DEFAULT, "+ mlp": DEFAULT + ("mlp",)}
REAL_FILES = ["BDBJ.csv", "Dune_prefix.csv", "hsmgp_prefix.csv", "SQL_prefix.csv", "Lrzip_sample.csv", "VP8_sample.csv"]


def systems(which):
    if which == "real":
        for f in REAL_FILES:
            yield real(f.split("_")[0].split(".")[0], os.path.join(os.environ.get("DEV_DIR", "."), f))
        return
    for s in range(3):  # dev.sets() without BDBJ, in its order
        p = [8, 10, 12][s]; yield f"loglin{s}(p={p})", *dev.syn_loglin(s, p)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"inter{s}(p={p})", *dev.syn_loglin(100 + s, p, scale=0.3, dens=0.5, n_int=(4, 9), three=True)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"add{s}(p={p})", *dev.syn_additive(200 + s, p)
    for s in range(2):
        p = [9, 11][s]; yield f"noisy{s}(p={p})", *dev.syn_loglin(300 + s, p, noise=0.1)
    for s in range(2):
        yield f"numeric{s}", *dev.syn_numeric(400 + s)


if __name__ == "__main__":
    out, which = sys.argv[1], sys.argv[2]
    for name, X, y in systems(which):
        p = X.shape[1]
        for mult, reps in ((1.0, 10), (1.5, 8)):
            n = p + 1 if mult == 1 else int(round(mult * p))
            for rep in range(reps):
                r = np.random.default_rng(1000 + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
                for label, fams in VARIANTS.items():
                    models.SMALL_FAMILIES = fams  # the candidates `auto` takes on small data
                    t0 = time.time()
                    est = model_for("auto", families=None, cv=5, ensemble=AUTO_ENSEMBLE, loo_below=AUTO_LOO_BELOW,
                                    blend=AUTO_BLEND, small_ratio=AUTO_SMALL_RATIO, point=AUTO_POINT,
                                    weights=AUTO_WEIGHTS, random_state=0, n_jobs=1).fit(X[tr], y[tr])
                    e = float(np.mean(np.abs(est.predict(X[te]) - y[te]) / y[te]) * 100)
                    rec = dict(system=name, mult=mult, n=n, rep=rep, variant=label, mre=e, fit_s=time.time() - t0,
                               members=est.members_)
                    with open(out, "a") as f:
                        f.write(json.dumps(rec) + "\n")
                print(name, n, rep, flush=True)
