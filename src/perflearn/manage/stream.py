"""perflearn-sniff's live lines on the load's clock: each interval line (and tick) placed
by its start time, and handed to the control loop one interval at a time.

Why by time, not by count: a capture that was stopped or starved writes the intervals it
missed together when it runs again, and a stall must not shift every later interval's
label by one (session 49: after a 6-s SIGSTOP of the sniffer, each step's first interval
read the step before). No process here: the sniffer's reader thread puts lines, the loop
takes them, so the waiting rules are tested on their own (tests/manage/test_stream.py).
"""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perflearn.wire.sniff import clock_offset

# How late after its end an interval's line may come and still be the stream's: perflearn-sniff
# closes intervals on a timer of at most 100 ms, 20 ms behind the packets
SNIFFER_DELAY_S = 0.15
LATE_WAIT_S = 0.25  # the least a late loop waits for a line before it calls the stream stalled
# a line that starts at the load's start, as the sniffer writes it (its mark at the announced start,
# to the nanosecond, in decimal seconds), may read a hair before it: still the load's
START_SLACK_S = 1e-3


@dataclass
class Taken:
    """What the loop gets for the interval it asked for: its ``line`` and the ``ticks`` read
    in it; ``earlier``: (line, ticks) of intervals the loop fell behind on, oldest first.
    ``past``: the stream reached the caller's horizon first (the next turn's line came, the
    asked-for ones never did): ``line`` is None and ``index`` is the horizon."""

    index: int
    line: dict | None
    ticks: list[dict] = field(default_factory=list)
    earlier: list[tuple[dict, list[dict]]] = field(default_factory=list)

    @property
    def past(self) -> bool:
        return self.line is None


class LineStream:
    """Lines of one live run. ``put`` (the sniffer's thread) places each; ``take`` (the
    loop) waits for the next interval's. ``begin`` when the load's profile begins: lines of
    intervals before it (the preload) are refused by ``put``. Deadlines are on the monotonic
    clock, as the load generator's schedule.

    The load's clock is the sniffer's: the wall clock as it read at the capture's start,
    moved on by the monotonic clock (its ready line's ``clock_offset``). A step of the wall
    clock during the run (NTP, a VM resumed) moves neither; the sniffer says each with a
    ``clock_step`` line, listed in ``steps`` for the loop to say. (Until session 54 the
    sniffer kept the wall clock, and this class moved its lines back by whole intervals
    after a step; a step back still held the sniffer's interval open for the step's length:
    at -2 s, four 0.5-s intervals stalled and the next held all their requests.)"""

    def __init__(self, interval_s: float, offset: float | None = None):
        self.interval = interval_s
        self.offset = offset  # the sniffer's clock_offset: its times minus the monotonic clock
        self.steps: list[float] = []  # each step of the wall clock the sniffer said, not yet said here
        self.lines: queue.Queue = queue.Queue()
        self.carry: list[dict] = []  # read, not yet the loop's: ticks of later intervals, the next turn's lines
        self.intervals_seen = 0
        self.origin: float | None = None  # start of the first interval of the trace, on the load's clock
        self.expected = 0  # the interval of the load's clock the loop asks for next
        self.horizon: int | None = None  # the first interval not the caller's (the next policy's turn): not returned
        self.load_start = math.inf

    def begin(self, ago: float = 0.0) -> None:
        """The load's profile began ``ago`` seconds ago (now, live; negative: it begins then)."""
        self.load_start = self.now() - ago

    def now(self) -> float:
        """The load's clock (the sniffer's), in the epoch seconds its lines carry."""
        return time.monotonic() + self._offset()

    def _offset(self) -> float:
        if self.offset is None:
            raise RuntimeError("the sniffer's clock is not known: its ready line was not put")
        return self.offset

    def put(self, obj: dict) -> bool:
        """Place a wire line (``obj["index"]``) and queue it for the loop; False, and not
        queued, for a line that is not the trace's: one that began before the load did (the
        preload's burst of sets), or a sliver of an interval that began between the load's
        start and the sniffer's mark (a whole second could fall there). The ready line gives
        the clock; a clock_step line is listed in ``steps``."""
        kind = obj.get("type")
        if kind == "ready":
            self.offset = clock_offset(obj)
        elif kind == "clock_step":
            self.steps.append(float(obj["step"]))
        if kind not in ("interval", "tick"):
            return False
        start = float(obj.get("start", 0.0))
        if start < self.load_start - START_SLACK_S or (kind == "interval" and not self.intervals_seen
                                       and float(obj.get("end", 0.0)) - start < self.interval / 2):
            return False
        if kind == "interval":
            self.intervals_seen += 1
            if self.origin is None:
                self.origin = start
        # the sniffer's intervals lie on a grid from the mark, one line each (those it could not write
        # while stopped come together when it runs again); a tick lies inside its interval. Epoch seconds
        # in a double are good to about 2.4e-7 s: at 0.01-s intervals, 2.4e-5 of an interval, so a line's
        # place is rounded, a tick's floored with 1e-4 to spare (a floor with 1e-6 put 42 % of lines one
        # interval early). A tick is at least 1/1000 of an interval (MAX_TICKS).
        if self.origin is None:  # a tick of the first interval, before its line
            obj["index"] = 0
        else:
            place = (start - self.origin) / self.interval
            obj["index"] = round(place) if kind == "interval" else math.floor(place + 1e-4)
        self.lines.put(obj)
        return True

    def take(self, react: Callable[[dict], None] | None = None) -> Taken | None:
        """The interval ``expected``; None if its line is not there half an interval (and the
        sniffer's own delay) after it ended: the stream stalled, and its line, if it comes,
        is passed over. When the loop fell behind (lines of later intervals wait), the newest
        is the one returned, those before it in ``earlier``. Lines at or past ``horizon`` wait
        for the next call with a later horizon. ``react``: told each tick of the turn as it
        comes while the line is awaited."""
        deadline = self._deadline()
        seen: list[dict] = []  # ticks of this turn read while waiting
        later: list[dict] = []  # ticks of the next turn read while waiting: its own
        line, late = None, False
        # past the deadline already, the loop is late (this process was stopped or starved): the lines may be in
        # the pipe still, its reader thread late too (it read three intervals as stalls after a 4-s SIGSTOP)
        least = LATE_WAIT_S if time.monotonic() > deadline else 0.0
        while line is None:
            try:
                got = self.carry.pop(0) if self.carry else \
                    self.lines.get(timeout=max(least, deadline - time.monotonic()))
            except queue.Empty:
                if not late and time.monotonic() > deadline + LATE_WAIT_S:  # it woke long after: stopped while it waited
                    late, least = True, LATE_WAIT_S
                    continue
                self.expected += 1
                self.carry[:0] = [*(t for t in seen if t["index"] >= self.expected), *later]
                return None
            if got["index"] < self.expected:  # of an interval given up as stalled, or a tick of one
                continue
            if self._past(got):
                if got.get("type") == "tick":  # the sniffer writes the ticks a late timer closes before the lines
                    later.append(got)
                    continue
                self.carry[:0] = [*later, got]  # the next turn's line came: the intervals asked for were never written
                self.expected = self.horizon
                return Taken(self.horizon, None)
            if got.get("type") == "tick":
                seen.append(got)
                if react is not None:
                    react(got)
                continue
            line = got
        waiting, self.carry = self.carry, []  # what was read before (the next turn's lines), then what came since
        while not self.lines.empty():
            waiting.append(self.lines.get_nowait())
        mine = [obj for obj in waiting if not self._past(obj) and obj["index"] >= self.expected]
        ticks_by: dict[int, list[dict]] = {}
        for tick in [*seen, *(obj for obj in mine if obj.get("type") == "tick")]:
            ticks_by.setdefault(tick["index"], []).append(tick)
        # the loop fell behind when lines of later intervals wait: the newest is the one to decide on
        lines = [line, *(obj for obj in mine if obj.get("type") != "tick")]
        line = lines[-1]
        earlier = [(old, ticks_by.get(old["index"], [])) for old in lines[:-1]]
        self.carry = [*(t for k in sorted(ticks_by) if k > line["index"] for t in ticks_by[k]),  # intervals under way
                      *later, *(obj for obj in waiting if self._past(obj))]
        self.expected = line["index"] + 1
        return Taken(line["index"], line, ticks_by.get(line["index"], []), earlier)

    def _deadline(self) -> float:
        """When the line of interval ``expected`` is late, on the monotonic clock."""
        origin = self.origin if self.origin is not None else self.load_start
        return origin - self._offset() + (self.expected + 1.5) * self.interval + SNIFFER_DELAY_S

    def _past(self, obj: dict) -> bool:
        return self.horizon is not None and obj["index"] >= self.horizon
