"""A time limit on Python work that can run away: a user's regular expression can backtrack
for longer than the universe lasts (``(a+)+$`` on forty a's and a b), inside one call.

Python's ``re`` checks for signals while it matches, so a SIGALRM handler can stop it. Only the
main thread receives signals; elsewhere the block runs unbounded (the CLI runs in the main thread).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class TimeLimit(BaseException):
    """The block ran out of time. A BaseException, so that no ``except Exception`` in the
    code being timed swallows it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeLimit inside the block once ``seconds`` have passed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeLimit(f"took more than {seconds:g} s")

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    outer, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's timer was running: give it back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-6), interval)
