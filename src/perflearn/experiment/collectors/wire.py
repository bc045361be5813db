"""Request latency measured at the wire during the workload (perflearn-sniff, live).

All wire metrics of a spec share one capture per (interface, port, protocol), started
just before the workload and stopped just after it. The summary gives the metrics
(``field``: rps, requests, mean_us, p50_us, p90_us, p95_us, p99_us, p999_us, max_us,
and the analyzer's counters: evicted, discarded, unmatched_responses, gaps, desyncs,
flows_dropped, kernel_dropped); every interval aggregate is also stored as a sample
``wire.<field>`` of the run, at the interval's start in seconds since the capture began
(the store's convention for sample times). A capture that saw no request leaves the
latencies missing. With a measured phase (``measure_from``) the summary and the samples
cover only the requests that follow its mark: a load generator's preload is left out.
"""

from __future__ import annotations

import time

from ..launch import fill
from .base import Collector, Missing

FIELDS = ("rps", "requests", "mean_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "max_us",
          "evicted", "discarded", "unmatched_responses", "gaps", "desyncs", "flows_dropped", "kernel_dropped")
INTERVAL_FIELDS = ("rps", "requests", "mean_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "max_us")


class Wire(Collector):
    source = "wire"
    default_unit = "us"
    OPTIONS = {"field": ((str,), True), "port": ((int, str), True), "interface": ((str,), False),
               "protocol": ((str,), False), "interval": ((int, float), False), "scale": ((int, float), False)}

    @classmethod
    def validate(cls, metric):
        from perflearn.wire.sniff import PROTOCOLS

        if metric.options["field"] not in FIELDS:
            raise ValueError(f"field: expected one of {', '.join(FIELDS)}, got {metric.options['field']!r}")
        if metric.options.get("protocol", "auto") not in PROTOCOLS:
            raise ValueError(f"protocol: expected one of {', '.join(PROTOCOLS)}")
        if not metric.options["field"].endswith("_us") and "unit" not in metric.options:
            metric.unit = "req/s" if metric.options["field"] == "rps" else "count"

    def __init__(self, metrics):
        super().__init__(metrics)
        self._captures: dict[tuple, object] = {}
        self._results: dict[tuple, object] = {}
        self._errors: dict[tuple, str] = {}

    @staticmethod
    def _key(metric, run=None) -> tuple:
        port = metric.options["port"]
        if run is not None:
            port = fill(str(port), run.values)
        return (metric.options.get("interface", "lo"), str(port), metric.options.get("protocol", "auto"),
                float(metric.options.get("interval", 1.0)))

    def check(self) -> list[str]:
        import os

        from perflearn.errors import UnsupportedError
        from perflearn.wire import locate

        locate("perflearn-sniff")  # raises UnsupportedError with how to build it
        if os.geteuid() != 0:
            raise UnsupportedError("wire metrics capture packets: run as root (or give perflearn-sniff CAP_NET_RAW)")
        return []

    def before(self, run):
        from perflearn.errors import PerflearnError
        from perflearn.wire import LiveSniffer

        self._captures, self._results, self._errors = {}, {}, {}
        # on the monotonic clock: a capture's times are its start's wall clock moved on by it (clock_offset)
        self._started = time.monotonic()
        self._marked = float("-inf")
        for metric in self.metrics:
            key = self._key(metric, run)
            if key in self._captures or key in self._errors:
                continue
            interface, port, protocol, interval = key
            try:
                sniffer = LiveSniffer(interface, bpf=f"tcp port {int(port)}", protocol=protocol, ports=[int(port)],
                                      interval=interval)
                self._captures[key] = sniffer.start()
            except (PerflearnError, ValueError) as exc:
                self._errors[key] = f"capture on {interface} port {port} did not start: {exc}"

    def mark(self, run):
        self._marked = time.monotonic()
        for sniffer in self._captures.values():
            sniffer.mark()

    def after(self, run):
        from perflearn.errors import PerflearnError

        for key, sniffer in self._captures.items():
            try:
                self._results[key] = sniffer.stop()
            except PerflearnError as exc:
                self._errors[key] = f"capture failed: {exc}"
        self._captures = {}

    def values(self, run, result):
        from perflearn.wire import summary_metrics

        out = {}
        for metric in self.metrics:
            key = self._key(metric, run)
            if key in self._errors:
                out[metric.name] = Missing(self._errors[key])
                continue
            if key not in self._results:
                out[metric.name] = Missing("no capture ran")
                continue
            summary = self._results[key].summary
            flat = summary_metrics(summary, prefix="")
            value = flat.get(metric.options["field"])
            if value is None and summary.get("requests") == 0:
                frames = (summary.get("counters") or {}).get("frames")
                out[metric.name] = Missing(f"no request matched on {key[0]} port {key[1]} ({frames} frames captured)")
            elif value is None:
                out[metric.name] = Missing(f"the capture reported no {metric.options['field']}")
            else:
                out[metric.name] = value * float(metric.options.get("scale", 1.0))
        return out

    def samples(self, run) -> list[tuple[str, float, float | None]]:
        rows = []
        for (_, _, _, _), capture in self._results.items():
            offset = capture.clock_offset  # a live capture's ready line said it (LiveSniffer.start waits for it)
            for i, interval in enumerate(capture.intervals):
                start = interval.get("start")
                at = float(start) - offset if isinstance(start, (int, float)) else None
                if at is not None and at < self._marked:
                    continue  # before the measured phase: the sniffer starts its next interval at the mark
                t = at - self._started if at is not None else float(i)
                for name in INTERVAL_FIELDS:
                    if isinstance(interval.get(name), (int, float)):
                        rows.append((f"wire.{name}", t, float(interval[name])))
        return rows
