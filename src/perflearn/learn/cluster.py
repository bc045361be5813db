"""Group configurations by their measured profile; keep one representative per group (NESCAT).

Profiles are the mean of the chosen columns (default: every metric) over the
repetitions of each point, standardised, optionally reduced by PCA. k-means runs
for k = 1..kmax (at most the distinct profiles); k is the elbow of inertia vs k found with kneedle
(NESCAT's rule), or the k of the highest mean silhouette (``k_by="silhouette"``). The point
closest to each centroid represents its cluster, so a later sweep can measure
only the representatives.

Kneedle on inertia often stops one k short of well-separated groups: on 27 random sets of
4 groups in 3-D (bench/learn.md, "Clustering: elbow and silhouette") it found 4 in 16 and
the silhouette in 27 (5 groups: 1 and 20 of 22). So the silhouette of every k is reported,
and an elbow that a silhouette showing structure contradicts is said
(``ClusterResult.silhouette_note``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler

from perflearn.errors import UsageError
from perflearn.store import Dataset

from .knee import find_knee


@dataclass
class ClusterResult:
    k: int
    ks: list[int]
    inertias: list[float]
    elbow_found: bool
    labels: np.ndarray  # per profile row
    profiles: pd.DataFrame  # per point: features, the profile columns, cluster
    representatives: pd.DataFrame  # one row per cluster: cluster, size, point_id, features, profile columns
    coords: np.ndarray  # 2-D PCA coordinates of the profiles (for the figure)
    explained: list[float]  # variance ratio of the 2 plotted components
    columns: list[str]
    pca: int | None
    dropped: int = 0  # profiles left out: NULL (NaN) in a profile column
    null_metrics: list[str] = field(default_factory=list)  # left out of the default profile: NULL in every run
    incomplete_runs: int = 0  # runs left out of their point's mean: NULL in some or all profile columns
    kmax_capped: int | None = None  # the largest k tried, when fewer (distinct) profiles than --kmax allowed no more
    distinct: int = 0  # distinct profiles (after scaling and --pca): repeats of a configuration measure one twice
    silhouettes: dict[int, float] = field(default_factory=dict)  # mean silhouette by k (2..), of the k-means fits
    k_by: str = "elbow"  # how k was chosen: "elbow" (kneedle on inertia), "silhouette" or "given"

    def silhouette_note(self) -> str | None:
        """One line when the elbow's k is not the best silhouette's and that silhouette shows a
        structure (at least SILHOUETTE_STRUCTURE, Kaufman and Rousseeuw's "reasonable"); on
        profiles without groups it stays under it, and nothing is said."""
        if self.k_by != "elbow" or not self.silhouettes:
            return None
        best = max(self.silhouettes, key=self.silhouettes.get)
        top, here = self.silhouettes[best], self.silhouettes.get(self.k)  # k = 1 (no elbow) has none
        if best == self.k or top < SILHOUETTE_STRUCTURE:
            return None
        against = f", against {here:.2f} at k = {self.k}" if here is not None else ""
        return f"the silhouette favours k = {best} ({top:.2f}{against}): --k-by silhouette (or --k {best}) takes it"

    def plot(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
        ax1.plot(self.ks, self.inertias, marker="o")
        ax1.axvline(self.k, color="r", ls="--", lw=1)
        ax1.set_xlabel("k")
        ax1.set_ylabel("k-means inertia")
        ax1.set_title({"elbow": "elbow" + ("" if self.elbow_found else " (none found)"),
                       "silhouette": "highest silhouette"}.get(self.k_by, "k given"))
        if self.silhouettes:  # the other criterion beside it, on its own scale
            ax3 = ax1.twinx()
            ax3.plot(list(self.silhouettes), list(self.silhouettes.values()), marker="s", color="tab:orange", lw=1)
            ax3.set_ylabel("mean silhouette", color="tab:orange")
        colours = plt.get_cmap("tab10" if self.k <= 10 else "tab20")
        for c in range(self.k):  # one legend entry per cluster: a colourbar read 0.25 for 2 clusters
            mine = self.labels == c
            ax2.scatter(self.coords[mine, 0], self.coords[mine, 1], color=colours(c % colours.N), s=18,
                        label=f"cluster {c} ({int(mine.sum())})")
        rep_rows = self.representatives["_row"].to_numpy()
        ax2.scatter(self.coords[rep_rows, 0], self.coords[rep_rows, 1], marker="*", s=220, c="k", label="representative")
        ax2.set_xlabel(f"PC1 ({self.explained[0]:.0%})")
        ax2.set_ylabel(f"PC2 ({self.explained[1]:.0%})" if len(self.explained) > 1 else "PC2")
        ax2.set_title(f"k-means, k={self.k}")
        ax2.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=100, format="png")  # exactly ``path`` (without format, no suffix gets ".png" added)
        plt.close(fig)
        return Path(path)


PROFILE_MAX = 1e150  # |value| whose square the scaler still holds
ELBOW_KS = 4  # kneedle on k = 1..3 never confirms an elbow (its threshold step, 0.5, is the most the curve bends)
K_BY = ("elbow", "silhouette")
SILHOUETTE_STRUCTURE = 0.5  # Kaufman and Rousseeuw: above 0.5 a reasonable structure has been found
SILHOUETTE_SAMPLE = 2000  # profiles the silhouette is computed on at most (all pairs: quadratic in them)


def cluster(
    ds: Dataset,
    columns: list[str] | None = None,
    *,
    k: int | None = None,
    kmax: int = 10,
    pca: int | None = None,
    by: str = "point",
    random_state: int = 0,
    k_by: str = "elbow",
) -> ClusterResult:
    """Cluster the points (or runs, ``by="run"``) of ``ds`` by ``columns`` (default: all metrics)."""
    where = ds.where
    if kmax < 2:  # k = 1..kmax: the elbow needs more than one k (it was silently raised to 2)
        raise UsageError(f"the largest k tried must be at least 2, got {kmax}", where="--kmax")
    if k_by not in K_BY:
        raise UsageError(f"k is chosen by {' or '.join(K_BY)}, got {k_by!r}", where="--k-by")
    if k is None and k_by == "elbow" and kmax < ELBOW_KS:  # kneedle's threshold on 3 points is never crossed: k = 1
        raise UsageError(f"an elbow is found among k = 1..{ELBOW_KS} at least, got {kmax}; or give --k",
                         where="--kmax")
    if by not in ("point", "run"):
        raise UsageError(f"by must be point or run, got {by!r}", where="--by")
    if not len(ds.ok()):  # else "every metric is NULL in every run": read as an unsupported counter
        raise UsageError(f"no ok run ({len(ds.frame)} run(s), none ok: {_status_counts(ds)})", where=where)
    null = []
    if not columns:  # every metric, but one NULL in every run (a counter this machine lacks) profiles nothing
        null = [m for m in ds.metrics if ds.ok()[m].isna().all()]
    columns = list(columns or [m for m in ds.metrics if m not in null])
    if not columns:
        raise UsageError(f"every metric is NULL in every run ({', '.join(null)})", where=where)
    for c in columns:
        if c not in ds.frame.columns or c in ("run_id", "point_id", "rep", "status"):
            raise UsageError(f"unknown column {c!r} (metrics: {', '.join(ds.metrics)}; features: {', '.join(ds.features)})",
                             where=where)
        if ds.kinds.get(c) == "categorical":
            raise UsageError(f"column {c!r} is categorical; cluster over numeric columns", where=where)
    frame = ds.ok()
    # inf is no profile value (it breaks the scaling); NaN is NULL, left out below
    # beyond PROFILE_MAX the scaler's squares overflow and the column dropped out of the distances unsaid
    infinite = {c: int((np.abs(pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float)) > PROFILE_MAX).sum())
                for c in columns}
    infinite = {c: k for c, k in infinite.items() if k}
    if infinite:
        raise UsageError(f"infinite values (or beyond ±{PROFILE_MAX:.0e}) in "
                         + ", ".join(f"{c!r} ({k} run(s))" for c, k in infinite.items()) + "; remove or cap them",
                         where=where)
    for c in columns:
        if frame[c].isna().all():
            raise UsageError(f"column {c!r} is NULL in every run", where=where)
    incomplete = 0
    if by == "point":
        # a point's profile is of runs that measured every column: with a NULL in one run, its columns were
        # means over different runs (one over both repetitions, the other over the second only)
        before = int(frame["point_id"].nunique())
        complete = frame[columns].notna().all(axis=1)
        incomplete = int((~complete & frame["point_id"].isin(frame.loc[complete, "point_id"])).sum())
        agg = {c: "mean" for c in columns}
        agg.update({f: "first" for f in ds.features if f not in columns})
        prof = frame[complete].groupby("point_id", sort=True).agg(agg).reset_index()
    elif by == "run":
        prof = frame[["run_id", "point_id", *[f for f in ds.features if f not in columns], *columns]].reset_index(drop=True)
        before = len(prof)
    prof = prof.dropna(subset=columns).reset_index(drop=True)
    n = len(prof)
    if n < 3:
        raise UsageError(f"{n} profiles are too few to cluster (need 3)", where=where)
    Z = StandardScaler().fit_transform(prof[columns].to_numpy(dtype=float))
    Z = np.nan_to_num(Z)  # a constant column scales to 0/0
    standardised = Z
    if pca is not None:
        if not 1 <= pca <= len(columns):
            raise UsageError(f"PCA components must be in 1..{len(columns)}, got {pca}", where="--pca")
        Z = PCA(n_components=pca, random_state=random_state).fit_transform(Z)
    # repeated runs often measure one profile twice: k-means cannot make more clusters than distinct
    # profiles (--k 3 over 2 distinct ones left a cluster empty: an internal error)
    distinct = len(np.unique(Z, axis=0))
    largest = _largest_k(n, distinct)
    capped = largest if kmax > largest else None
    kmax = min(kmax, largest)
    # it read "k = 1 (no elbow found)" for 4 clearly separate profiles; and as few distinct ones among many (an
    # elbow beyond them was read off a curve of empty clusters). One distinct profile is one cluster: no choice
    if k is None and k_by == "elbow" and kmax < ELBOW_KS and distinct > 1:
        held = f"the {n} profiles hold only {distinct} distinct ones:" if distinct < n else f"{n} profiles are"
        raise UsageError(f"{held} too few to find an elbow (k = 1..{ELBOW_KS} at least needs "
                         f"{ELBOW_KS + 1}); give --k", where=where)
    if k is not None and not 1 <= k <= n:
        raise UsageError(f"k must be in 1..{n}, got {k}", where="--k")
    if k is not None and k > distinct:
        raise UsageError(f"k must be at most {distinct}: the {n} profiles hold only {distinct} distinct ones, got {k}",
                         where="--k")
    ks = list(range(1, kmax + 1))
    inertias, fits, silhouettes = [], {}, {}
    sample = SILHOUETTE_SAMPLE if n > SILHOUETTE_SAMPLE else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kk in ks:
            km = KMeans(n_clusters=kk, n_init=10, random_state=random_state).fit(Z)
            inertias.append(float(km.inertia_))
            fits[kk] = km
            if kk >= 2:
                try:
                    silhouettes[kk] = float(silhouette_score(Z, km.labels_, sample_size=sample,
                                                             random_state=random_state))
                except ValueError:  # one cluster in the sample, or as many as profiles: undefined
                    pass
        elbow = find_knee(ks, inertias, curve="convex", direction="decreasing") if len(ks) >= 3 else None
        if k is not None:
            chosen = k
        elif k_by == "silhouette":
            chosen = max(silhouettes, key=silhouettes.get) if silhouettes else 1
        else:
            chosen = int(elbow.x) if elbow is not None else 1
        km = fits.get(chosen) or KMeans(n_clusters=chosen, n_init=10, random_state=random_state).fit(Z)
    labels = km.labels_
    # the result's own columns, named apart from a knob or metric called "cluster" or "size"
    label, size = _unused("cluster", prof.columns), _unused("size", prof.columns)
    reps = []
    for c in range(chosen):
        members = np.flatnonzero(labels == c)
        d = np.linalg.norm(Z[members] - km.cluster_centers_[c], axis=1)
        row = int(members[np.argmin(d)])
        reps.append({label: c, size: len(members), "_row": row, **prof.iloc[row].to_dict()})
    prof[label] = labels
    # the figure's axes: the profiles' first components and their share of all the variance (those of
    # the --pca reduction are its first components too; refitted on it, they claimed its variance as all)
    ncomp = min(2, Z.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant profile has no variance to share out
        p2 = PCA(n_components=ncomp, random_state=random_state).fit(standardised)
    coords = p2.transform(standardised)
    if ncomp == 1:
        coords = np.column_stack([coords[:, 0], np.zeros(n)])
    explained = [float(v) if np.isfinite(v) else 0.0 for v in p2.explained_variance_ratio_]
    return ClusterResult(chosen, ks, inertias, elbow is not None, labels, prof, pd.DataFrame(reps), coords,
                         explained, columns, pca, before - n, null, incomplete, capped, distinct, silhouettes,
                         k_by if k is None else "given")


def _largest_k(profiles: int, distinct: int) -> int:
    """The largest k worth trying: fewer clusters than profiles (k-means needs more profiles
    than clusters), and no more than the distinct profiles. Beyond those, k-means leaves a
    cluster empty and its inertia is noise: session 57's audit saw it rise above k = 1's at
    k = 9 on 6 distinct profiles of 22, and the elbow taken from that curve was 2, not 3."""
    return max(1, min(profiles - 1, distinct))


def _unused(name: str, taken) -> str:
    while name in taken:
        name = f"k-means {name}" if not name.startswith("k-means") else f"{name}_"
    return name


def _status_counts(ds: Dataset) -> str:
    counts = ds.frame["status"].value_counts() if "status" in ds.frame else {}
    return ", ".join(f"{n} {status}" for status, n in counts.items()) or "no status"
