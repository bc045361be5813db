"""The emulator's orthogonality, drawn as InterSense's Figures 5-7, plus LogGP's o.

    python bench/emu_figures.py [--runs 3] [--out bench] [--no-tcp] [--no-mpi]

Writes emu_fig5_bandwidth.png, emu_fig6_latency_under_bandwidth.png,
emu_fig7_latency.png and emu_loggp_overhead.png (each: one panel pair per layer) and
prints every plotted number as Markdown.  Each point is the median of --runs runs of
the validation programs (each run's own value the median over its iterations).

- Fig. 5 (a) measured vs target bandwidth (1 MiB); (b) window bandwidth vs message
  size under several rates: large messages are held to the rate, small ones are not.
- Fig. 6: latency vs message size under several rates: small messages unchanged,
  large ones slower by their serialisation time n/B.
- Fig. 7 (a) measured vs target added latency (8 B); (b) latency vs message size
  under added latency: the curves move up by L and keep their shape.
- LogGP: window bandwidth vs message size under latency L and under overhead o (same
  value): L overlaps across a window of 64 (bandwidth unchanged), o is paid per
  message (a window of n-byte messages is held to about n/o).  InterSense's spin
  before each send is the second curve.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from emu_accuracy import MPI, MPIP, TCP, PmQos, lib, rate_bps, run  # noqa: E402

SIZES = (8, 1 << 20)  # the programs double from min to max
RATES = ["unlimited", "8Gbit", "4Gbit", "2Gbit", "1Gbit"]
TARGET_RATES = ["0.5Gbit", "1Gbit", "2Gbit", "4Gbit", "8Gbit"]
LATS = [0, 2, 5, 10]
TARGET_LATS = [1, 2, 5, 10, 20, 50]


def prog(kind, mode, lo, hi, iters, large):
    args = [mode, "--min", str(lo), "--max", str(hi), "--iters", str(iters), "--large-iters", str(large),
            "--warmup", "20" if mode == "latency" else "2"]  # fmt: skip
    if kind == "tcp":  # pinned: unpinned, loopback TCP lands both ends on one CPU in some runs
        return [TCP, *args, "--cpus", "0,1"]
    return ["mpirun", "-n", "2", MPIP, *args]


def curves(kind, mode, series: dict[str, dict], runs, lo=SIZES[0], hi=SIZES[1]) -> dict[str, dict[int, float]]:
    """Per series and size, the median over runs (latency us; bandwidth MB/s).  The series
    take turns within each round, so the machine's drift over minutes hits them alike."""
    iters, large = (400, 40) if mode == "latency" else (10, 4)
    res = {name: [] for name in series}
    for _ in range(runs):
        for name, knobs in series.items():
            res[name].append(run(prog(kind, mode, lo, hi, iters, large), knobs, lib(kind)))
    return {name: {s: statistics.median(r[s] for r in rs) for s in rs[0]} for name, rs in res.items()}


def knobs_of(**kv) -> dict[str, str]:
    return {k: v for k, v in kv.items() if v not in (None, "unlimited", "0us")}


def table(title, xs, series: dict[str, dict]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(["x", *series]) + " |")
    print("|" + "---|" * (len(series) + 1))
    for x in xs:
        print("| " + " | ".join([str(x), *(f"{s.get(x, float('nan')):.3f}" for s in series.values())]) + " |")


def target_panel(ax, title, targets, measured, unit) -> None:
    """Measured against target on log axes, with the target line."""
    ax.plot(targets, targets, "k--", lw=1, label="target")
    ax.plot(targets, measured, "o-", label="measured")
    ax.set(xscale="log", yscale="log", xlabel=f"target ({unit})", ylabel=f"measured ({unit})", title=title)
    ax.legend()


def size_panel(ax, title, kind, mode, series, runs, legend) -> dict[str, dict[int, float]]:
    """One curve by message size per series (measured in turns), drawn and printed."""
    by_size = curves(kind, mode, series, runs)
    unit = "us" if mode == "latency" else "MB/s"
    table(f"{title}, {unit}", list(next(iter(by_size.values()))), by_size)
    for name, c in by_size.items():
        ax.plot(list(c), list(c.values()), "o-", ms=3, label=name)
    ax.set(xscale="log", yscale="log", xlabel="message size (B)", title=title,
           ylabel="half round trip (us)" if mode == "latency" else "bandwidth (MB/s)")  # fmt: skip
    ax.legend(title=legend)
    return by_size


def grid(kinds, cols):
    fig, axes = plt.subplots(len(kinds), cols, figsize=(5.5 * cols, 4.2 * len(kinds)), squeeze=False)
    return fig, axes


def fig5(kinds, runs, out):
    fig, axes = grid(kinds, 2)
    for (a, b), kind in zip(axes, kinds):
        got = curves(kind, "bw", {r: {"bandwidth": r} for r in TARGET_RATES}, runs, 1 << 20, 1 << 20)
        targets = [rate_bps(r) / 8e6 for r in TARGET_RATES]
        measured = [got[r][1 << 20] for r in TARGET_RATES]
        table(f"{kind}: Fig. 5a, bandwidth 1 MiB, MB/s", TARGET_RATES, {"target": dict(zip(TARGET_RATES, targets)),
              "measured": dict(zip(TARGET_RATES, measured))})  # fmt: skip
        target_panel(a, f"{kind.upper()}: (a) bandwidth, 1 MiB messages", targets, measured, "MB/s")
        size_panel(b, f"{kind.upper()}: (b) window bandwidth by message size", kind, "bw",
                   {r: knobs_of(bandwidth=r) for r in RATES}, runs, "link rate")  # fmt: skip
    fig.tight_layout()
    fig.savefig(out / "emu_fig5_bandwidth.png", dpi=110)


def fig6(kinds, runs, out):
    fig, axes = grid(kinds, 1)
    for (a,), kind in zip(axes, kinds):
        size_panel(a, f"{kind.upper()}: latency under the bandwidth knob", kind, "latency",
                   {r: knobs_of(bandwidth=r) for r in RATES}, runs, "link rate")  # fmt: skip
    fig.tight_layout()
    fig.savefig(out / "emu_fig6_latency_under_bandwidth.png", dpi=110)


def fig7(kinds, runs, out):
    fig, axes = grid(kinds, 2)
    for (a, b), kind in zip(axes, kinds):
        got = curves(kind, "latency", {"0": {}, **{str(L): {"latency": f"{L}us"} for L in TARGET_LATS}}, runs, 8, 8)
        added = [got[str(L)][8] - got["0"][8] for L in TARGET_LATS]
        table(f"{kind}: Fig. 7a, added latency 8 B, us", TARGET_LATS,
              {"target": {L: float(L) for L in TARGET_LATS}, "measured": dict(zip(TARGET_LATS, added))})
        target_panel(a, f"{kind.upper()}: (a) added latency, 8 B", TARGET_LATS, added, "us")
        size_panel(b, f"{kind.upper()}: (b) latency by message size", kind, "latency",
                   {f"+{L} us": knobs_of(latency=f"{L}us") for L in LATS}, runs, "latency knob")  # fmt: skip
    fig.tight_layout()
    fig.savefig(out / "emu_fig7_latency.png", dpi=110)


def loggp(kinds, runs, out):
    fig, axes = grid(kinds, 1)
    for (a,), kind in zip(axes, kinds):
        by_size = size_panel(a, f"{kind.upper()}: window of 64, L overlaps, o does not", kind, "bw",
                             {"none": {}, "latency 10 us (L)": {"latency": "10us"},
                              "overhead 10 us (o)": {"overhead": "10us"}}, runs, None)  # fmt: skip
        sizes = list(by_size["none"])
        a.plot(sizes, [s / 10.0 for s in sizes], "k:", lw=1, label="n / o (one message per o)")
        a.legend()
    fig.tight_layout()
    fig.savefig(out / "emu_loggp_overhead.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--no-tcp", action="store_true")
    ap.add_argument("--no-mpi", action="store_true")
    a = ap.parse_args()
    kinds = ([] if a.no_tcp else ["tcp"]) + ([] if a.no_mpi or not MPI.is_file() or not shutil.which("mpirun") else ["mpi"])
    a.out.mkdir(parents=True, exist_ok=True)
    qos = PmQos(True)
    print(f"Emulator orthogonality figures, medians of {a.runs} runs; {qos.describe()}.")
    for kind in kinds:  # warm up (the first runs after start were slower here)
        curves(kind, "latency", {"warm-up": {}}, 2, 8, 8)
    for draw in (fig5, fig6, fig7, loggp):
        draw(kinds, a.runs, a.out)
    qos.close()


if __name__ == "__main__":
    main()
