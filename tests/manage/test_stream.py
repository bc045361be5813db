"""perflearn-sniff's live lines on the load's clock (perflearn.manage.stream): placing each
line by its start time, and what the loop is handed when lines are late, missing, come
in a backlog, or belong to the next policy's turn. Real time, short intervals: the
waiting rules are the ones a live run uses (the live runs are in test_live_failures.py)."""

import math
import time

import pytest

from perflearn.manage.config import ConfigSpace
from perflearn.manage.loop import Controller, Measured, Service, take_turns
from perflearn.manage.policies import Static
from perflearn.manage.power import PowerModel
from perflearn.manage.stream import SNIFFER_DELAY_S, LineStream

INTERVAL = 0.05
SPACE = ConfigSpace(cores=(1, 2), levels=(0.5, 1.0))


def started(interval=INTERVAL, ago=0.0):
    """A stream whose load began ``ago`` seconds ago, on a sniffer's clock as perflearn-sniff gives it."""
    stream = LineStream(interval)
    stream.put({"type": "ready", "clock_offset": time.time() - time.monotonic()})
    stream.begin(ago)
    return stream


def put(stream, k, ticks=2, rps=None):
    """Interval ``k``'s ticks and line, as perflearn-sniff writes them (ticks first)."""
    start = stream.load_start + k * stream.interval
    for j in range(ticks):
        width = stream.interval / ticks
        stream.put({"type": "tick", "start": start + j * width, "end": start + (j + 1) * width, "rps": 100.0 * k})
    stream.put({"type": "interval", "start": start, "end": start + stream.interval,
                "rps": 1000.0 * (k + 1) if rps is None else rps})


def test_a_wire_line_is_placed_on_the_load_clock_at_any_interval():
    """Epoch seconds in a double are good to about 2.4e-7 s: placed with a floor and 1e-6
    to spare, 42 % of 0.01-s interval lines (12 % at 0.1 s) came one interval early, were
    passed over as stale, and good intervals were recorded as misses."""
    for interval in (0.01, 0.1, 1.0):
        stream = LineStream(interval, offset=time.time() - time.monotonic())
        mark_ns = 1_796_018_137_806_830_600
        stream.load_start = mark_ns / 1e9
        step, tick = round(interval * 1e9), round(interval * 1e9) // 10
        for k in range(3000 if interval < 1 else 300):
            start = mark_ns + k * step
            for j in range(10):  # as perflearn-sniff writes them: ns over 1e9
                stream.put({"type": "tick", "start": (start + j * tick) / 1e9, "end": (start + (j + 1) * tick) / 1e9})
            stream.put({"type": "interval", "start": start / 1e9, "end": (start + step) / 1e9})
        placed = [stream.lines.get_nowait() for _ in range(stream.lines.qsize())]
        lines = [o["index"] for o in placed if o["type"] == "interval"]
        ticks = [o["index"] for o in placed if o["type"] == "tick"]
        assert lines == list(range(len(lines))), interval
        assert ticks == [k for k in range(len(lines)) for _ in range(10)], interval


def test_the_preload_and_a_sliver_before_the_mark_are_not_the_traces():
    stream = started()
    before = {"type": "interval", "start": stream.load_start - 1.0, "end": stream.load_start}
    sliver = {"type": "interval", "start": stream.load_start + 0.001, "end": stream.load_start + 0.01}
    assert not stream.put(before) and not stream.put(sliver) and not stream.put({"type": "summary"})
    put(stream, 0)
    assert stream.take().index == 0 and stream.origin == stream.load_start


def test_lines_in_order_come_one_interval_at_a_time_with_their_ticks():
    stream, told = started(), []
    got = []
    for k in range(3):  # each before the loop asks for it
        put(stream, k, ticks=3)
        got.append(stream.take(react=told.append))
    assert [t.index for t in got] == [0, 1, 2] and not any(t.earlier for t in got)
    assert [len(t.ticks) for t in got] == [3, 3, 3] and {x["index"] for x in got[1].ticks} == {1}
    assert [x["rps"] for x in told] == [0.0] * 3 + [100.0] * 3 + [200.0] * 3  # every tick, as it came


def test_a_stall_is_called_at_its_deadline_and_its_late_line_passed_over():
    stream = started()
    began = time.monotonic()
    assert stream.take() is None  # interval 0's line never came
    waited = time.monotonic() - began
    assert 1.5 * INTERVAL + SNIFFER_DELAY_S - 0.02 <= waited < 1.5 * INTERVAL + SNIFFER_DELAY_S + 0.2
    put(stream, 0)  # late: given up already
    put(stream, 1)
    taken = stream.take()
    assert taken.index == 1 and taken.line["rps"] == 2000.0 and not taken.earlier


def test_a_loop_that_fell_behind_decides_on_the_newest_and_keeps_the_rest_in_place():
    stream = started(ago=1.0)  # the loop woke late: every line is waiting
    for k in range(4):
        put(stream, k)
    taken = stream.take()
    assert taken.index == 3 and [line["index"] for line, _ in taken.earlier] == [0, 1, 2]
    assert all(len(ticks) == 2 and {t["index"] for t in ticks} == {line["index"]} for line, ticks in taken.earlier)
    assert len(taken.ticks) == 2 and stream.expected == 4


def test_the_next_turns_lines_wait_for_it_even_when_this_turns_never_came():
    """A loop that fell behind at a turn's end: the next turn's lines are not this turn's.
    Before, the first line read past the horizon was taken (and lost to the next turn, whose
    first interval read as 'neither measured'), and a line left over from a turn was
    dropped when the next took its first."""
    stream = started(ago=1.0)
    stream.horizon = 2
    for k in (0, 2, 3, 4):  # interval 1's line never came
        put(stream, k)
    assert stream.take().index == 0
    past = stream.take()
    assert past.past and past.index == 2 and stream.expected == 2
    stream.horizon = 4  # the next turn
    taken = stream.take()
    assert taken.index == 3 and [line["index"] for line, _ in taken.earlier] == [2]
    stream.horizon = 6
    assert stream.take().index == 4  # not dropped with the turn before


class StreamService(Service):
    """The loop's view of a stream, as LiveService gives it: rates and indexes only."""

    def __init__(self, stream):
        self.space, self.stream, self.applied = SPACE, stream, []

    @property
    def horizon(self):
        return self.stream.horizon

    @horizon.setter
    def horizon(self, index):
        self.stream.horizon = index

    def apply(self, config):
        self.applied.append(config)

    def observe(self, t):
        taken = self.stream.take()
        if taken is None:
            return None
        if taken.past:
            return Measured(0.0, math.nan, math.nan, 0.0, index=taken.index)
        make = lambda line: Measured(line["rps"], 1e-4, 2e-4, 0.3, index=line["index"])  # noqa: E731
        return Measured(taken.line["rps"], 1e-4, 2e-4, 0.3, index=taken.index,
                        behind=[make(line) for line, _ in taken.earlier])

    def close(self):
        pass


def test_taking_turns_a_loop_behind_at_its_turns_end_leaves_the_next_turn_whole():
    """Two policies take turns of two intervals; the first's last line never came and the
    next turn's lines were all waiting. Every interval is recorded once, by the policy whose
    turn it was, at its own load."""
    stream = started(ago=2.0)
    for k in (0, 2, 3, 4, 5, 6, 7):
        put(stream, k)
    service = StreamService(stream)
    controllers = {n: Controller(Static(SPACE, 1e-3, 10_000), SPACE, INTERVAL, PowerModel()) for n in "ab"}
    take_turns(controllers, service, [1.0, 1.0, 2.0, 2.0], 2)
    frames = {n: c.frame() for n, c in controllers.items()}
    assert sorted(i for f in frames.values() for i in f["service_interval"]) == list(range(8))
    rps = {i: r for f in frames.values() for i, r in zip(f["service_interval"], f["rps"])}
    notes = {i: n for f in frames.values() for i, n in zip(f["service_interval"], f["note"])}
    assert math.isnan(rps.pop(1))  # never measured: its rate unknown
    assert rps == {i: 1000.0 * (i + 1) for i in range(8) if i != 1}  # each measured at its own place
    assert "neither measured" in notes[1]
    assert not any("neither" in notes[i] or "stalled" in notes[i] for i in (0, 2, 3, 4, 5, 6, 7))


def test_the_load_clock_is_the_sniffers_not_the_wall_clock():
    """perflearn-sniff keeps its times on the wall clock as it read at its start, moved on by
    the monotonic clock, and says so in its ready line (``clock_offset``): lines are placed
    and awaited on that clock, whatever the wall clock reads. Here it is a day behind (a
    step back since the sniffer started): before, the stream read the wall clock, and every
    line was refused as before the load's start."""
    stream = LineStream(INTERVAL)
    with pytest.raises(RuntimeError, match="ready line"):
        stream.now()
    stream.put({"type": "ready", "clock_offset": time.time() - time.monotonic() - 86_400.0})
    stream.begin(ago=0.5 * INTERVAL)
    assert stream.now() == pytest.approx(time.time() - 86_400.0, abs=0.01)
    for k in range(3):
        put(stream, k)
        taken = stream.take()
        assert (taken.index, taken.line["rps"]) == (k, 1000.0 * (k + 1))
    assert stream.take() is None  # interval 3 awaited on the sniffer's clock: its line never came, a stall


def test_a_step_of_the_wall_clock_is_listed_to_be_said():
    """The sniffer says each step of the wall clock in a clock_step line: listed, not queued."""
    stream = started(ago=0.5 * INTERVAL)
    assert not stream.put({"type": "clock_step", "at": stream.now(), "step": -1.5})
    assert stream.steps == [-1.5] and stream.lines.empty()
    put(stream, 0)
    assert stream.take().index == 0


def test_ticks_go_with_their_own_interval_whatever_order_they_come_in():
    """perflearn-sniff writes the ticks a late timer closes before the interval lines: a
    tick of the next turn's interval came before this turn's last line, which was then taken
    for the next turn's and lost; in a backlog, ticks went to the interval read first."""
    stream = started(ago=1.0)
    stream.horizon = 2
    put(stream, 0)
    assert stream.take().index == 0
    stream.put({"type": "tick", "start": stream.load_start + 2 * INTERVAL, "end": stream.load_start + 2.5 * INTERVAL})
    put(stream, 1, ticks=0)
    taken = stream.take()
    assert not taken.past and taken.index == 1
    stream.horizon = 5
    put(stream, 2, ticks=1)
    taken = stream.take()
    assert taken.index == 2 and len(taken.ticks) == 2  # the early tick, and its own
    # a backlog: every tick first, then the lines
    for k in (3, 4):
        for j in range(3):
            stream.put({"type": "tick", "start": stream.load_start + (k + j / 3) * INTERVAL,
                        "end": stream.load_start + (k + (j + 1) / 3) * INTERVAL})
    put(stream, 3, ticks=0)
    put(stream, 4, ticks=0)
    taken = stream.take()
    assert taken.index == 4 and len(taken.ticks) == 3
    assert [(line["index"], len(ticks)) for line, ticks in taken.earlier] == [(3, 3)]
