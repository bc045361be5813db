//! A live capture's time, kept on the monotonic clock. The kernel stamps packets on the wall
//! clock, which NTP or a resumed virtual machine can step. On raw stamps a step back of 2 s
//! held the interval open until the wall clock came back (four 0.5-s intervals' requests in
//! one line, nothing written for 2 s), a step forward wrote the intervals it jumped over,
//! empty, and a request stamped before a step and answered after it had the step in its
//! latency. Here each stamp is placed on the wall clock as it read at the capture's start,
//! moved on by the monotonic clock: a step moves nothing, and is reported.

use crate::Ts;

/// A change of (wall - monotonic) larger than this is a step; NTP's slewing changes it by at
/// most 0.5 ms a second, and the offset is checked many times a second.
pub const STEP_NS: i64 = 10_000_000;
/// How far a stamp may seem to lie past now, or before the one placed last, before the
/// clocks are checked: reading the offset, or the capture's batches, err by microseconds.
const SLACK_NS: i64 = 2_000_000;
/// A sample of the offset whose two monotonic reads, around the wall-clock read, lie further
/// apart than this was preempted between them: it is taken again.
const READ_GAP_NS: i64 = 1_000_000;
/// After a check, a stamp well before the last placed (reordered in the kernel's buffer)
/// checks again only this much later: such stamps in a row cost a check each (150 ns).
const RECHECK_NS: i64 = 1_000_000;
/// After a step, a reading of a stamp this close after the last placed continues the stream
/// (the kernel's buffer is in order); one this close to now is a packet just arrived.
const CONTINUES_NS: i64 = 5_000_000;
const FRESH_NS: i64 = 20_000_000;
/// Steps kept until a stamp is seen on them (two before any packet was read lost the first).
const MAX_PENDING: usize = 8;

/// The two clocks, read in nanoseconds (a trait so that tests can step a wall clock).
pub trait Clocks {
    fn monotonic(&self) -> i64;
    fn wall(&self) -> i64;
}

/// CLOCK_MONOTONIC (Python's `time.monotonic`) and CLOCK_REALTIME.
pub struct SystemClocks;

impl Clocks for SystemClocks {
    fn monotonic(&self) -> i64 {
        ns(rustix::time::clock_gettime(rustix::time::ClockId::Monotonic))
    }
    fn wall(&self) -> i64 {
        ns(rustix::time::clock_gettime(rustix::time::ClockId::Realtime))
    }
}

fn ns(t: rustix::time::Timespec) -> i64 {
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// Wall-clock stamps in, times on the capture's clock out (see the module's comment).
pub struct CaptureClock<C: Clocks = SystemClocks> {
    clocks: C,
    /// wall - monotonic at the start: the capture's clock is monotonic + base
    base: i64,
    /// wall - monotonic that stamps are taken to be on
    applied: i64,
    /// after steps, their offsets in the order seen, until a stamp is seen on one
    pending: Vec<i64>,
    /// a monotonic time no stamp can lie past yet (now, read lately, plus the slack)
    horizon: i64,
    /// the last stamp placed, on the monotonic clock
    last: i64,
    /// when the clocks were last compared (monotonic)
    checked: i64,
    /// steps seen (ns, + forward), not yet taken
    steps: Vec<i64>,
}

impl CaptureClock<SystemClocks> {
    pub fn system() -> Self {
        CaptureClock::new(SystemClocks)
    }
}

impl<C: Clocks> CaptureClock<C> {
    pub fn new(clocks: C) -> Self {
        let (offset, now) = sample(&clocks);
        CaptureClock { clocks, base: offset, applied: offset, pending: vec![], horizon: now + SLACK_NS,
                       last: i64::MIN / 2, checked: now, steps: vec![] }
    }

    /// Seconds to add to CLOCK_MONOTONIC to get the capture's times (the ready line's `clock_offset`).
    pub fn offset_secs(&self) -> f64 {
        self.base as f64 / 1e9
    }

    /// The capture's clock now.
    pub fn now(&self) -> Ts {
        (self.clocks.monotonic() + self.base).max(0) as Ts
    }

    /// Compare the wall clock with the monotonic one: a step is noted (and taken by
    /// `take_steps`), a slow change (slewing) followed.
    pub fn check(&mut self) {
        let (offset, now) = sample(&self.clocks);
        self.checked = now;
        let change = offset - self.pending.last().copied().unwrap_or(self.applied);
        if change.abs() > STEP_NS {
            if self.pending.len() == MAX_PENDING {
                self.pending.remove(0);
            }
            self.pending.push(offset);
            self.steps.push(change);
        } else if let Some(newest) = self.pending.last_mut() {
            *newest = offset;
        } else {
            self.applied = offset;
        }
    }

    /// The steps seen since the last call, in ns (+ forward).
    pub fn take_steps(&mut self) -> Vec<i64> {
        std::mem::take(&mut self.steps)
    }

    /// A packet's wall-clock stamp on the capture's clock.
    pub fn place(&mut self, stamp: Ts) -> Ts {
        let stamp = stamp as i64;
        let mut at = stamp - self.applied;
        if self.pending.is_empty() && (at > self.horizon || at < self.last - SLACK_NS) {
            // past now (the clock stepped forward: always checked), or well before the last stamp (back)
            let now = self.clocks.monotonic();
            self.horizon = now + SLACK_NS;
            if at > self.horizon || (at < self.last - SLACK_NS && now >= self.checked + RECHECK_NS) {
                self.check();
            }
        }
        if !self.pending.is_empty() {
            at = self.after_step(stamp);
        }
        self.last = self.last.max(at);
        (at + self.base).max(0) as Ts
    }

    /// Where a stamp read after a step lies: on the offset applied (stamped before the step)
    /// or on a step's (after it). A reading is possible when it is not past now (packets
    /// wait in the kernel's buffer, never in the future) and not before the last stamp
    /// placed (the buffer is in order). Of two possible, the one that continues the stream
    /// (a backlog read after a stall: the later reading was placed a step late), else one
    /// just arrived (after a pause longer than the step, the earlier was a step early), else
    /// the offset applied. A stamp placed on a step's offset applies it, and drops the steps
    /// before it.
    fn after_step(&mut self, stamp: i64) -> i64 {
        let now = self.clocks.monotonic();
        self.horizon = now + SLACK_NS;
        let readings = std::iter::once(self.applied).chain(self.pending.iter().copied()).map(|o| stamp - o);
        let possible = |at: &i64| *at <= self.horizon && *at >= self.last - SLACK_NS;
        let (earliest, latest) = readings.clone().filter(possible).fold((None, None), |(lo, hi): (Option<i64>, Option<i64>), at| {
            (Some(lo.map_or(at, |v: i64| v.min(at))), Some(hi.map_or(at, |v: i64| v.max(at))))
        });
        let applied = stamp - self.applied;
        let at = match (earliest, latest) {
            (Some(lo), Some(hi)) if lo == hi => lo,
            (Some(lo), _) if lo - self.last <= CONTINUES_NS => lo,
            (_, Some(hi)) if hi >= now - FRESH_NS => hi,
            // nothing tells: the clock the stamps were on (a first packet read late is stamped before the step)
            (Some(lo), _) => if possible(&applied) { applied } else { lo },
            // none possible (reordered past the slack): the latest not past now, else the earliest
            _ => readings.clone().filter(|at| *at <= self.horizon).max().unwrap_or_else(|| readings.clone().min().unwrap_or(stamp)),
        };
        if let Some(k) = self.pending.iter().position(|o| stamp - o == at) {
            self.applied = self.pending[k];
            self.pending.drain(..=k);
        }
        at
    }
}

/// (wall - monotonic, monotonic), from a wall-clock read between two monotonic reads close together.
fn sample<C: Clocks>(clocks: &C) -> (i64, i64) {
    loop {
        let before = clocks.monotonic();
        let wall = clocks.wall();
        let after = clocks.monotonic();
        if after - before <= READ_GAP_NS {
            return (wall - (before + (after - before) / 2), after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    const MS: i64 = 1_000_000;
    const WALL0: i64 = 1_700_000_000_000_000_000;

    /// A monotonic clock moved by hand, and a wall clock that is it plus an offset moved by hand.
    #[derive(Clone, Default)]
    struct Hand {
        mono: Rc<Cell<i64>>,
        step: Rc<Cell<i64>>,
        walls: Rc<Cell<u32>>, // wall-clock reads: one per check
    }

    impl Clocks for Hand {
        fn monotonic(&self) -> i64 {
            self.mono.get()
        }
        fn wall(&self) -> i64 {
            self.walls.set(self.walls.get() + 1);
            WALL0 + self.mono.get() + self.step.get()
        }
    }

    impl Hand {
        fn at(&self, ms: i64) {
            self.mono.set(ms * MS);
        }
        /// The kernel's stamp of a packet that arrived at `ms` (monotonic), on the wall clock as it was then.
        fn stamp(&self, ms: i64, step: i64) -> Ts {
            (WALL0 + ms * MS + step) as Ts
        }
    }

    /// A capture clock started at monotonic 0 on hand-moved clocks.
    fn started() -> (Hand, CaptureClock<Hand>) {
        let hand = Hand::default();
        let clock = CaptureClock::new(hand.clone());
        (hand, clock)
    }

    fn on_start(ms: i64) -> Ts {
        (WALL0 + ms * MS) as Ts
    }

    #[test]
    fn without_a_step_stamps_are_kept() {
        let (hand, mut clock) = started();
        for ms in (0..1000).step_by(7) {
            hand.at(ms + 3);
            assert_eq!(clock.place(hand.stamp(ms, 0)), on_start(ms));
        }
        assert!(clock.take_steps().is_empty());
        assert_eq!(clock.now(), on_start(997));
    }

    #[test]
    fn a_step_back_moves_nothing_backlog_included() {
        let (hand, mut clock) = started();
        hand.at(500);
        assert_eq!(clock.place(hand.stamp(490, 0)), on_start(490));
        // the wall clock steps back 2 s at 500 ms; packets of 495-499 wait in the buffer, read at 505
        hand.step.set(-2000 * MS);
        hand.at(505);
        for ms in 495..500 {
            assert_eq!(clock.place(hand.stamp(ms, 0)), on_start(ms), "before the step");
        }
        for ms in 500..505 {
            assert_eq!(clock.place(hand.stamp(ms, -2000 * MS)), on_start(ms), "after it");
        }
        assert_eq!(clock.take_steps(), vec![-2000 * MS]);
        assert_eq!(clock.now(), on_start(505), "the capture's clock does not step");
    }

    #[test]
    fn a_step_forward_moves_nothing_backlog_included() {
        let (hand, mut clock) = started();
        hand.step.set(3000 * MS);
        hand.at(105);
        for ms in 95..100 {
            assert_eq!(clock.place(hand.stamp(ms, 0)), on_start(ms), "before the step");
        }
        for ms in 100..105 {
            assert_eq!(clock.place(hand.stamp(ms, 3000 * MS)), on_start(ms), "after it");
        }
        assert_eq!(clock.take_steps(), vec![3000 * MS]);
    }

    #[test]
    fn a_step_seen_by_the_timer_first_is_applied_at_the_first_stamp_after_it() {
        let (hand, mut clock) = started();
        hand.at(100);
        hand.step.set(-50 * MS);
        clock.check(); // the loop's check, before any packet of the step was read
        assert_eq!(clock.take_steps(), vec![-50 * MS]);
        hand.at(101);
        assert_eq!(clock.place(hand.stamp(99, 0)), on_start(99));
        assert_eq!(clock.place(hand.stamp(100, -50 * MS)), on_start(100));
        hand.at(2000);
        assert_eq!(clock.place(hand.stamp(1990, -50 * MS)), on_start(1990), "applied for good");
    }

    #[test]
    fn slewing_is_followed_not_taken_for_a_step() {
        let (hand, mut clock) = started();
        // 0.5 ms a second for 60 s, checked every 100 ms: 30 ms in all
        for k in 1..=600 {
            hand.at(k * 100);
            hand.step.set(k * 50_000);
            clock.check();
            assert_eq!(clock.place(hand.stamp(k * 100 - 1, k * 50_000)), on_start(k * 100 - 1));
        }
        assert!(clock.take_steps().is_empty());
    }

    #[test]
    fn stamps_out_of_order_are_no_step_and_check_at_most_once_a_millisecond() {
        let (hand, mut clock) = started();
        hand.at(50);
        assert_eq!(clock.place(hand.stamp(40, 0)), on_start(40));
        assert_eq!(clock.place(hand.stamp(39, 0)), on_start(39));
        let before = hand.walls.get();
        for _ in 0..1000 {
            assert_eq!(clock.place(hand.stamp(30, 0)), on_start(30)); // 10 ms behind, a thousand times
        }
        assert_eq!(hand.walls.get() - before, 1, "one check, not a thousand");
        assert!(clock.take_steps().is_empty());
    }

    /// The cost per packet of the common case (a stamp a little after the last): run with
    /// `cargo test --release -p perflearn-wire --lib cost_per_stamp -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_per_stamp() {
        let wall = SystemClocks.wall();
        let stamps: Vec<Ts> = (0..20_000_000i64).map(|i| (wall - 1_000_000_000 + i * 50) as Ts).collect();
        let (mut placed, mut read) = (vec![], vec![]);
        for _ in 0..5 {
            let mut clock = CaptureClock::system(); // a clock of its own: stamps placed again would lie behind
            let t = std::time::Instant::now();
            let sum = stamps.iter().fold(0u64, |a, &s| a.wrapping_add(clock.place(std::hint::black_box(s))));
            std::hint::black_box(sum);
            placed.push(t.elapsed().as_nanos() as f64 / stamps.len() as f64);
            let t = std::time::Instant::now();
            let sum = stamps.iter().fold(0u64, |a, &s| a.wrapping_add(std::hint::black_box(s)));
            std::hint::black_box(sum);
            read.push(t.elapsed().as_nanos() as f64 / stamps.len() as f64);
        }
        placed.sort_by(f64::total_cmp);
        read.sort_by(f64::total_cmp);
        println!("ns per stamp, median of 5: {:.2} placed, {:.2} only read", placed[2], read[2]);
    }

    /// Packets that arrived at `arrived` ms (monotonic), stamped on the wall clock of then
    /// (`steps`: (at ms, step ns), in order), read at `read` ms each, the clocks compared at
    /// `checks` ms (as the sniffer's timer, and its empty waits, do) or, with `check_each`,
    /// before each packet too: where each is placed, in ms from the start.
    fn read_back(arrived: &[i64], read: &[i64], steps: &[(i64, i64)], checks: &[i64], check_each: bool) -> Vec<f64> {
        let (hand, mut clock) = started();
        let wall_at = |ms: i64| steps.iter().filter(|(at, _)| *at <= ms).map(|(_, s)| s).sum::<i64>();
        let mut due = checks.iter().peekable();
        arrived.iter().zip(read).map(|(&a, &r)| {
            while let Some(&&c) = due.peek().filter(|&&&c| c <= r) {
                hand.at(c);
                hand.step.set(wall_at(c));
                clock.check();
                due.next();
            }
            hand.at(r);
            hand.step.set(wall_at(r));
            if check_each {
                clock.check();
            }
            (clock.place(hand.stamp(a, wall_at(a))) as i64 - WALL0) as f64 / MS as f64
        }).collect()
    }

    fn every(from: i64, to: i64, step: usize) -> Vec<i64> {
        (from..to).step_by(step).collect()
    }

    #[test]
    fn a_backlog_read_after_a_step_is_placed_where_it_arrived() {
        // a step back of 30 ms at 100 ms; packets every ms, each read 36-61 ms late (review, session 54:
        // the later reading, not past now, put those stamped before the step 30 ms late)
        let arrived: Vec<i64> = (70..130).collect();
        let read: Vec<i64> = arrived.iter().map(|a| a + 36 + (a % 26)).collect::<Vec<_>>();
        let read: Vec<i64> = read.iter().scan(0, |m, &r| { *m = r.max(*m); Some(*m) }).collect();  // in order
        for check_each in [true, false] {
            let placed = read_back(&arrived, &read, &[(100, -30 * MS)], &every(0, 300, 100), check_each);
            assert_eq!(placed, arrived.iter().map(|&a| a as f64).collect::<Vec<_>>(), "check each: {check_each}");
        }
        // starved for 500 ms, the clock stepped back 200 ms at 300 ms: the whole backlog read at 520-530 ms
        let arrived: Vec<i64> = (0..50).map(|i| 20 + i * 10).collect();
        let read: Vec<i64> = (0..50).map(|i| 520 + i / 5).collect();
        let placed = read_back(&arrived, &read, &[(300, -200 * MS)], &[], true);
        assert_eq!(placed, arrived.iter().map(|&a| a as f64).collect::<Vec<_>>());
    }

    #[test]
    fn after_a_pause_longer_than_the_step_a_packet_just_arrived_is_placed_now() {
        // quiet from 100 to 400 ms (the clocks compared at each empty wait of 10 ms), a step back of
        // 50 ms at 200: the packet at 400 is read at 401
        let placed = read_back(&[90, 100, 400, 401], &[91, 101, 401, 402], &[(200, -50 * MS)], &every(110, 400, 10),
                               false);
        assert_eq!(placed, vec![90.0, 100.0, 400.0, 401.0]);
    }

    #[test]
    fn a_step_forward_read_late_and_two_steps_before_any_packet() {
        let arrived: Vec<i64> = (80..120).collect();
        let read: Vec<i64> = arrived.iter().map(|a| a + 28).collect();
        let placed = read_back(&arrived, &read, &[(100, 30 * MS)], &[], true);
        assert_eq!(placed, arrived.iter().map(|&a| a as f64).collect::<Vec<_>>());
        // back 1 s at 100 ms, forward 400 ms at 150 ms, the clocks compared at 120 ms and 180 ms, every
        // packet read at 200 ms (the first step was lost: the second's offset replaced it)
        let arrived: Vec<i64> = (90..190).step_by(10).collect();
        let read = vec![200; arrived.len()];
        let placed = read_back(&arrived, &read, &[(100, -1000 * MS), (150, 400 * MS)], &[120, 180], false);
        assert_eq!(placed, arrived.iter().map(|&a| a as f64).collect::<Vec<_>>());
    }
}
