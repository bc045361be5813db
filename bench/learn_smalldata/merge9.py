"""Merge dev9.py pickles of the same training sets computed for different members: python merge9.py out.pkl a.pkl b.pkl ..."""
import pickle, sys
out = {}
for p in sys.argv[2:]:
    for name, rep, ytr, yte, ms in pickle.load(open(p, "rb")):
        if (name, rep) in out:
            out[(name, rep)][4].update(ms)
        else:
            out[(name, rep)] = (name, rep, ytr, yte, dict(ms))
pickle.dump(list(out.values()), open(sys.argv[1], "wb"))
