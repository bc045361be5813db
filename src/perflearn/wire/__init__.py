"""Thin Python face over the native wire tools (native/wire).

``perflearn-sniff`` measures request latency from packets (pcap/pcapng files or a live
interface); ``perflearn-load`` is an open-loop load generator. Both run as subprocesses
and speak JSON Lines, so capture can run with raw-socket rights while the rest does not.

    from perflearn.wire import sniff_file, LiveSniffer, run_load
    result = sniff_file("capture.pcap", records=True)
    result.summary["p99_us"], len(result.records)
"""

from __future__ import annotations

from .locate import BIN_ENV, locate
from .load import LoadFailed, LoadResult, run_load
from .sniff import LiveSniffer, SniffResult, sniff_file, summary_metrics

__all__ = [
    "BIN_ENV",
    "LiveSniffer",
    "LoadFailed",
    "LoadResult",
    "SniffResult",
    "locate",
    "run_load",
    "sniff_file",
    "summary_metrics",
]
