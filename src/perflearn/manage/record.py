"""A comparison of policies kept in the results store: one experiment, one run per
policy (knob ``policy``), the summary as the run's metrics and every control interval
as its samples (load measured and offered, p95, p99, cores, level, predicted p95,
utilisation, power, whether the configuration changed at its start and how often inside
it, whether it was settled, CPU time per request, the host-speed probe, the place on the
service: interleaved passes share one); each interval's note is in the run's notes, at
its time.

Each policy's run is written as soon as its loop ends, so an interrupted comparison
keeps the policies already measured; interleaved policies' intervals so far are kept as
failed runs.
"""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd

from perflearn.store import KnobInfo, MetricInfo, ResultsStore, RunRecord

from .loop import summarize

SUMMARY = (("qos_guarantee", "%"), ("qos_tardiness", ""), ("energy_j", "J"), ("energy_reduction", "%"),
           ("changes", ""), ("intervals", ""))
# why a summary value is NULL (the store keeps a reason with every missing value)
WHY_MISSING = {"qos_guarantee": "no interval had requests or was offered any",
               "qos_tardiness": "no interval that missed had a latency (the latency stream stalled)",
               "energy_reduction": "no static pass at least as long to compare with (none run, or cut short)",
               "energy_j": "no energy known"}
SERIES = (("rps", "req/s"), ("offered_rps", "req/s"), ("p95", "s"), ("p99", "s"), ("target", "s"), ("cores", ""), ("level", ""),
          ("predicted", "s"), ("utilisation", ""), ("power_w", "W"), ("changed", ""), ("reactions", ""),
          ("settled", ""), ("cpu_us_per_request", "us"), ("host_probe_us", "us"),
          ("host_probe_min_us", "us"), ("throttled_ms", "ms"), ("service_interval", ""))


class PolicyRecorder:
    def __init__(self, store: ResultsStore, name: str, policies: list[str], description: str, energy_label: str):
        self.store, self.name, self.policies = store, name, policies
        self.description = f"{description}; energy {energy_label}"
        self.ids = {p: i for i, p in enumerate(policies)}
        self.experiment = None  # created with the first run: a run that fails before any pass left an empty
        if store.experiment(name) is not None:  # experiment whose name the next try was refused
            self._create()  # its own error: the name is taken

    def _create(self):
        knob = KnobInfo("policy", "knob", "categorical", None, {"values": self.policies})
        metrics = [MetricInfo(m, "manage", unit) for m, unit in SUMMARY]  # the series are samples, not metrics
        self.experiment = self.store.create_experiment(self.name, "manage", [knob], metrics, description=self.description)
        self.store.add_points(self.experiment, [(i, json.dumps({"policy": p}), {"policy": p})
                                                for p, i in self.ids.items()])

    def record(self, policy: str, frame: pd.DataFrame, static_energy_j: float | None, wall_s: float,
               complete: bool = True, why: str | None = None) -> None:
        """``complete``: False for a pass cut short (interrupted, or its service failed): a
        failed run, ``why`` its error (by default "cut short after N intervals"), its intervals
        kept as samples."""
        if self.experiment is None:
            self._create()
        summary = summarize(frame, static_energy_j)
        # each interval's note at its time, whole: a sorted set cut at 2000 characters lost the rest, mid-word
        notes = [f"t={t:g}: {n}" for t, n in zip(frame["t"], frame.get("note", pd.Series("", index=frame.index)))
                 if isinstance(n, str) and n]
        error = None if complete else why or f"cut short after {len(frame)} intervals"  # show --runs said nothing
        samples = [(metric, float(row.t), _value(getattr(row, metric)))
                   for row in frame.itertuples(index=False) for metric, _ in SERIES]
        values = {m: _value(summary[m]) for m, _ in SUMMARY}
        self.store.record_run(self.experiment, RunRecord(
            point_id=self.ids[policy], rep=0, status="ok" if complete else "failed", started=datetime.now(), wall_s=wall_s,
            error=error, notes="\n".join(notes) or None, values=values,
            missing={m: WHY_MISSING[m] for m, v in values.items() if v is None}, samples=samples))


def _value(v) -> float | None:
    if v is None or pd.isna(v):
        return None
    return float(v)
