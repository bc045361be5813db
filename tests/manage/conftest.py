"""Helpers shared by the manage tests."""

from __future__ import annotations

import time

import pytest


@pytest.fixture
def when_written():
    """``run(proc, csv, ready, act)``: once ``ready(text of csv)`` holds (at most ``wait`` s),
    ``act(proc)`` (a signal to a running manager), then its output; killed if it still runs."""
    def run(proc, csv, ready, act, wait: float = 60.0) -> str:
        try:
            deadline = time.monotonic() + wait
            while not (csv.exists() and ready(csv.read_text())) and time.monotonic() < deadline:
                time.sleep(0.05)
            act(proc)
            output, _ = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
        return output

    return run
