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
import os, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dev
from dev9 import real
from dev9_auto import run
from perflearn.learn import models

DEFAULT = models.SMALL_FAMILIES
VARIANTS = {"default": (None, DEFAULT), "+ mlp": (None, DEFAULT + ("mlp",))}
REAL_FILES = ["BDBJ.csv", "Dune_prefix.csv", "hsmgp_prefix.csv", "SQL_prefix.csv", "Lrzip_sample.csv", "VP8_sample.csv"]


def systems(which):
    if which == "real":
        for f in REAL_FILES:
            yield real(f.split("_")[0].split(".")[0], os.path.join(os.environ.get("DEV_DIR", "."), f))
        return
    yield from dev.synthetic()

if __name__ == "__main__":
    run(sys.argv[1], systems(sys.argv[2]), VARIANTS)
