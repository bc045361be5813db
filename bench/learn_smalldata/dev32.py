"""Session 32: a confirmation run, on fresh dev data, of session 21's best-placed combination:
the small-data average clipped to the training targets' range.

Session 21 (`analyze21.py`) found it ahead at both sizes (-0.47 ± 0.53 at N = p + 1, -0.22 ± 0.26
at N = 1.5 p) but with margins that include 0, after comparing eight variants on one set of data.
This run asks that one question again on data none of those comparisons saw:
- the 13 synthetic systems of `dev.py`, generated with new seeds (every generator seed + 5000);
- the real dev systems with new training sets (seeds 7000 + rep instead of 1000 + rep): BDBJ and
  the Dune, hsmgp and SQL prefixes, and session 30's Lrzip and VP8 samples (other rows of the
  DaL files than session 21's samples, which were not kept);
- no x264, Apache, LLVM or BDBC.

Decision rule, written before the run (session 9's): adopt the clip only if it is better on the
mean over systems at both sizes, with the 95 % margin over systems excluding 0 at one size at
least, and no real system worse by more than 0.5 points averaged over the two sizes.

    DEV_DIR=dir BDBJ_CSV=dir/BDBJ.csv DEV_EXTRA=dir/SQL_prefix.csv,dir/Lrzip_sample.csv,dir/VP8_sample.csv \\
      python dev32.py 1.0 10 c_1.pkl        # and: python dev32.py 1.5 8 c_15.pkl
    python analyze32.py c_1.pkl c_15.pkl
"""
import os, pickle, sys, time
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("MEMBERS", "ridge1,ridge2,ard,bridge,gp,rf")  # the six small-data candidates of `auto`
import dev
import dev9

SEED_SHIFT = 5000  # new synthetic systems
SET_SEED = 7000  # new training sets


def synthetic():
    """dev.synthetic()'s 13 kinds of system, each generated anew."""
    k = SEED_SHIFT
    for s in range(3):
        p = [8, 10, 12][s]; yield f"loglin{s}(p={p})", *dev.syn_loglin(k + s, p)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"inter{s}(p={p})", *dev.syn_loglin(k + 100 + s, p, scale=0.3, dens=0.5, n_int=(4, 9), three=True)
    for s in range(3):
        p = [8, 10, 12][s]; yield f"add{s}(p={p})", *dev.syn_additive(k + 200 + s, p)
    for s in range(2):
        p = [9, 11][s]; yield f"noisy{s}(p={p})", *dev.syn_loglin(k + 300 + s, p, noise=0.1)
    for s in range(2):
        yield f"numeric{s}", *dev.syn_numeric(k + 400 + s)


dev.synthetic = synthetic  # dev.sets() yields BDBJ, then these

if __name__ == "__main__":
    mult = float(sys.argv[1]); reps = int(sys.argv[2]); outp = sys.argv[3]
    res = []
    for name, X, y in dev9.systems():
        p = X.shape[1]; n = p + 1 if mult == 1 else int(round(mult * p))
        for rep in range(reps):
            r = np.random.default_rng(SET_SEED + rep); tr = r.choice(len(y), n, replace=False); te = np.setdiff1d(np.arange(len(y)), tr)
            t0 = time.time()
            res.append((name, rep, y[tr], y[te], dev.member_run(X, y, tr, te)))
            print(name, n, rep, round(time.time() - t0, 1), flush=True)
        pickle.dump(res, open(outp, "wb"))
