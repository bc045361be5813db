"""What a configuration change costs a live service: memcached at one constant load, a
schedule of configurations applied one interval at a time, each interval's CPU time per
request, p95 and CFS throttling, then the same grouped by the configuration before and
the seconds since the change (session 64: the cost behind ``--handover``).

    PERFLEARN_WIRE_BIN=native/wire/target/release python bench/manage_handover.py \\
        --rps 15200 --schedule "2:1x6,1:0.375x8,1:0.5x6,1:0.375x8" --repeat 10 --jsonl t3.jsonl
    python bench/manage_handover.py --analyse t3.jsonl --config 1:0.375 --target-us 196.735
    python bench/manage_handover.py --rounds bench/manage_live_s63/f?.csv.gz bench/manage_live_s62/[rt]?.csv.gz
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def measure(rps: float, plan: list, out: Path) -> None:
    from perflearn.manage.config import ConfigSpace
    from perflearn.manage.live import LiveService, work_directory, write_trace
    from perflearn.runner.process import free_port

    workdir, port = work_directory(), free_port()
    trace = write_trace([(1.0, rps)] * (len(plan) + 6), Path(workdir.name) / "constant.trace")
    load = ["--server", f"127.0.0.1:{port}", "--protocol", "memcache-binary", "--rate", f"{rps:g}", "--profile",
            "trace", "--trace", str(trace), "--preload", "--connections", "8", "--drain", "1",
            "--value-size", "fixed:4096"]
    service = LiveService(f"memcached -u root -l 127.0.0.1 -p {port} -t 2 -U 0", port, ConfigSpace.make(2, 8), 1.0,
                          "memcache-binary", load)
    rows, before = [], None
    try:
        for _ in range(5):  # settled at the first configuration
            service.apply(plan[0])
            service.observe(0)
        for i, config in enumerate(plan):
            service.apply(config)
            m = service.observe(i)
            busy = m.utilisation * config.cores * config.level
            rows.append(dict(i=i, cores=config.cores, level=config.level, changed=config != before, rps=m.rps,
                             p95=m.p95, util=m.utilisation, cpu_us=busy / m.rps * 1e6 if m.rps else None,
                             probe=m.host_probe_us, thr=m.throttled_ms))
            before = config
    finally:
        service.close()
        workdir.cleanup()
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))


def analyse(path: Path, config: str, target_us: float) -> pd.DataFrame:
    d = pd.read_json(path, lines=True)
    d["segment"] = d["changed"].cumsum()
    d["k"] = d.groupby("segment").cumcount()
    d["config"] = d["cores"].astype(str) + ":" + d["level"].map("{:g}".format)
    d["after"] = d["segment"].map(d.groupby("segment")["config"].first().shift(1))
    d["p95_us"] = d["p95"] * 1e6
    x = d[d["config"] == config]
    return x.groupby(["after", "k"]).agg(
        n=("i", "size"), cpu_us=("cpu_us", "median"), cpu_us_max=("cpu_us", "max"), p95_us=("p95_us", "median"),
        p95_us_max=("p95_us", "max"), throttled_ms=("thr", "mean"),
        misses=("p95_us", lambda s: int((s > target_us).sum()))).round(1).unstack(0)


def cuts(files: list[Path]) -> pd.DataFrame:
    """One-core intervals of interleaved live rounds (``--csv``), by what came before them
    on the service: a cut of cores (by the policy itself, or by the hand-over from another
    policy's turn) in this interval or the one before, or neither (held); misses of each."""
    frames = []
    for path in files:
        d = pd.read_csv(path)
        d = d[~d["policy"].str.contains("learning")].set_index("service_interval").sort_index()
        d = d.reindex(range(int(d.index.max()) + 1))  # a hand-over's intervals (--handover) are in no pass: NaN
        own1, own2 = d["policy"].shift(1) == d["policy"], d["policy"].shift(2) == d["policy"]
        cut1 = d["cores"].shift(1) > d["cores"]
        cut2 = (d["cores"].shift(2) > d["cores"].shift(1)) & (d["cores"].shift(1) == d["cores"])
        d["kind"] = "held"
        d.loc[d["policy"].shift(1).isna() | d["policy"].shift(2).isna(), "kind"] = "after a hand-over"
        d.loc[cut2 & own2, "kind"] = "own cut, 1 before"
        d.loc[cut2 & ~own2, "kind"] = "hand-over cut, 1 before"
        d.loc[cut1 & own1, "kind"] = "own cut now"
        d.loc[cut1 & ~own1, "kind"] = "hand-over cut now"
        d["miss"] = d["p95"] > d["target"]
        frames.append(d[(d["offered_rps"] > 0) & (d["cores"] == 1)])
    return pd.concat(frames).groupby(["policy", "kind"]).agg(
        n=("miss", "size"), misses=("miss", "sum"), share=("miss", "mean"), utilisation=("utilisation", "median")
    ).round(3)


def main() -> None:
    from perflearn.manage.config import Configuration

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rps", type=float, default=15200)
    ap.add_argument("--schedule", help="cores:level x intervals, comma-separated")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--jsonl", type=Path)
    ap.add_argument("--analyse", type=Path)
    ap.add_argument("--rounds", type=Path, nargs="+", help="interleaved live rounds' --csv files: misses after cuts")
    ap.add_argument("--config", default="1:0.375", help="the configuration whose intervals are grouped")
    ap.add_argument("--target-us", type=float, default=196.735)
    a = ap.parse_args()
    if a.rounds:
        print(cuts(a.rounds).to_string())
        return
    if a.analyse:
        pd.set_option("display.width", 250)
        print(analyse(a.analyse, a.config, a.target_us).to_string())
        return
    plan = []
    for part in a.schedule.split(",") * a.repeat:
        config, count = part.split("x")
        cores, level = config.split(":")
        plan += [Configuration(int(cores), float(level))] * int(count)
    measure(a.rps, plan, a.jsonl)


if __name__ == "__main__":
    main()
