import pickle, glob, sys, numpy as np, collections
res = [r for f in sys.argv[1:] for r in pickle.load(open(f, "rb"))]
mre = lambda p, y: np.mean(np.abs(p - y) / y) * 100
rows = collections.defaultdict(list)
for name, rep, n, y, p0, P in res:
    g = lambda A: np.exp(np.log(np.clip(A, 1e-300, None)).mean(0))
    rows[name].append((mre(p0, y), mre(g(P), y), mre(g(np.vstack([p0, P])), y), mre(g(np.vstack([p0, g(P)])), y)))
print("system  n  full  jk  full+jk(eq)  half/half")
allr = []
for name, v in rows.items():
    a = np.array(v); allr.append(a.mean(0))
    print(name, len(v), *np.round(a.mean(0), 2))
d = np.array([r for v in rows.values() for r in v])
diff = d[:, 1:] - d[:, :1]
print("paired mean diff vs full:", np.round(diff.mean(0), 3), "+-", np.round(1.96 * diff.std(0, ddof=1) / np.sqrt(len(d)), 3), "better:", (diff < 0).sum(0), "of", len(d))
