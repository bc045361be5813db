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

# How late after its end an interval's line may come and still be the stream's: perflearn-sniff
# closes intervals on a timer of at most 100 ms, 20 ms behind the packets
SNIFFER_DELAY_S = 0.15
LATE_WAIT_S = 0.25  # the least a late loop waits for a line before it calls the stream stalled
# A change of the wall clock against the monotonic one larger than this is a step (NTP, a resumed
# VM): reading the two clocks one after the other differs by microseconds; slewing moves both
CLOCK_STEP_S = 0.002


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
    intervals before it (the preload) are refused by ``put``.

    The sniffer stamps on the wall clock, the load generator keeps time on the monotonic
    one: a step of the wall clock during the run (NTP, a VM resumed) would shift every later
    line's place by the step. Each step is seen (the wall clock against the monotonic one),
    added to ``stepped``, listed in ``steps`` for the loop to say, and lines are placed, and
    deadlines set, that much later, so that each interval keeps its load. The first interval
    line after a step is marked ``clock_stepped``: its requests may be of other intervals
    (a step back of 2 s put four 0.5-s intervals' requests in one)."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.time):
        self.interval = interval_s
        self.clock = clock  # the sniffer's: its lines carry epoch seconds
        self.offset: float | None = None  # wall clock minus monotonic clock at the load's start
        self.stepped = 0.0  # how far the wall clock stepped since (seconds, + forward)
        self.steps: list[float] = []  # each step seen, not yet said
        self.straddled = False  # a step was seen since the last interval line: the next one is marked "clock_stepped"
        self.lines: queue.Queue = queue.Queue()
        self.carry: list[dict] = []  # read, not yet the loop's: ticks after their interval's line, the next turn's
        self.intervals_seen = 0
        self.origin: float | None = None  # start of the first interval of the trace
        self.expected = 0  # the interval of the load's clock the loop asks for next
        self.horizon: int | None = None  # the first interval not the caller's (the next policy's turn): not returned
        self.load_start = math.inf

    def begin(self) -> None:
        """The load's profile begins now."""
        self.load_start = self.clock()
        self.offset = self.load_start - time.monotonic()

    def _watch_clock(self) -> None:
        if self.offset is None:
            return
        drift = self.clock() - time.monotonic() - self.offset
        if abs(drift - self.stepped) > CLOCK_STEP_S:
            self.steps.append(drift - self.stepped)
            self.stepped, self.straddled = drift, True

    def put(self, obj: dict) -> bool:
        """Place a wire line (``obj["index"]``) and queue it for the loop; False, and not
        queued, for a line that is not the trace's: one that began before the load did (the
        preload's burst of sets), or a sliver of an interval that began between the load's
        start and the sniffer's mark (a whole second could fall there)."""
        kind = obj.get("type")
        if kind not in ("interval", "tick"):
            return False
        self._watch_clock()
        stamped = float(obj.get("start", 0.0))
        start = stamped - self.stepped  # on the wall clock as it was at the load's start
        if start < self.load_start or (kind == "interval" and not self.intervals_seen
                                       and float(obj.get("end", 0.0)) - stamped < self.interval / 2):
            return False
        if kind == "interval":
            self.intervals_seen += 1
            if self.origin is None:
                self.origin = start
            if self.straddled:  # the sniffer's grid is on the wall clock: stepped back, it held this interval
                obj["clock_stepped"], self.straddled = True, False  # open until the clock came back (all of them)
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
        for the next call with a later horizon. ``react``: told each tick of the interval
        under way as it comes."""
        self._watch_clock()
        deadline = self._deadline()
        line, ticks, late = None, [], False
        # past the deadline already, the loop is late (this process was stopped or starved): the lines may be in
        # the pipe still, its reader thread late too (it read three intervals as stalls after a 4-s SIGSTOP)
        least = LATE_WAIT_S if self.clock() > deadline else 0.0
        while line is None:
            try:
                got = self.carry.pop(0) if self.carry else \
                    self.lines.get(timeout=max(least, deadline - self.clock()))
            except queue.Empty:
                stepped = self.stepped
                self._watch_clock()
                if self.stepped != stepped:  # the wall clock stepped while it waited: the deadline moves with it
                    deadline = self._deadline()
                    continue
                if not late and self.clock() > deadline + LATE_WAIT_S:  # it woke long after: stopped while it waited
                    late, least = True, LATE_WAIT_S
                    continue
                self.expected += 1
                return None
            if got["index"] < self.expected:  # of an interval given up as stalled, or a tick of one
                continue
            if self._past(got):  # the next turn's: the intervals asked for were never written
                self.carry.insert(0, got)
                self.expected = self.horizon
                return Taken(self.horizon, None)
            if got.get("type") != "tick":
                line = got
                continue
            ticks.append(got)
            if react is not None:
                react(got)
        waiting, self.carry = self.carry, []  # what was read before (the next turn's lines), then what came since
        while not self.lines.empty():
            waiting.append(self.lines.get_nowait())
        earlier = []
        mine = next((k for k, obj in enumerate(waiting) if self._past(obj)), len(waiting))
        newest = max((k for k, obj in enumerate(waiting[:mine]) if obj.get("type") != "tick"), default=None)
        if newest is not None:  # the loop fell behind: the newest interval is the one to decide on
            pending = []  # ticks come before the interval line they end with
            for obj in waiting[:newest + 1]:
                if obj.get("type") == "tick":
                    pending.append(obj)
                else:
                    earlier.append((line, ticks))
                    line, ticks, pending = obj, pending, []
            waiting = waiting[newest + 1:]
        self.carry = waiting  # ticks of the next interval, and lines of the next turn
        self.expected = line["index"] + 1
        return Taken(line["index"], line, ticks, earlier)

    def _deadline(self) -> float:
        """When the line of interval ``expected`` is late, on the wall clock."""
        origin = (self.origin if self.origin is not None else self.load_start) + self.stepped
        return origin + (self.expected + 1.5) * self.interval + SNIFFER_DELAY_S

    def _past(self, obj: dict) -> bool:
        return self.horizon is not None and obj["index"] >= self.horizon
