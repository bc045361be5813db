//! Threads, each driving its connections with mio; per-interval statistics merged by the
//! caller's thread.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use super::dist::Arrivals;
use super::profile::Profile;
use super::request::{Replies, Workload};
use super::sched::{self, Applied, Sched};
use super::timer::Wakeup;
use crate::error::{Result, WireError};
use crate::stats::{Latencies, Summary, Window};

#[derive(Debug, Clone)]
pub struct Options {
    pub addr: SocketAddr,
    pub workload: Workload,
    pub profile: Profile,
    pub arrivals: Arrivals,
    pub connections: usize,
    pub threads: usize,
    /// Seconds per reported interval.
    pub interval: f64,
    /// Seconds to wait for outstanding replies after the last request.
    pub drain: f64,
    pub seed: u64,
    /// Set every key once before the measured run.
    pub preload: bool,
    /// Pinning and real-time priority of the send threads.
    pub sched: Sched,
    /// How long before a send a thread stops sleeping and spins.
    pub spin: Duration,
    /// How long after the start line the profile starts: a reader of the line has that
    /// long to act on it before the first request (a capture marks its intervals there).
    pub start_in: Duration,
}

/// A send later than this is attributed to its largest cause in the report.
const LATE: Duration = Duration::from_micros(20);

/// Issuing stops this long after the profile's end (wall clock) even with requests still
/// due: a thread that cannot meet the rate would otherwise catch up for ever, its backlog
/// growing (5e11 sends for 0.5 s at 1e12/s). The slack lets a last send due just before
/// the end go out a little late, as any other.
const STOP_SLACK: f64 = 0.01;

struct Pending {
    intended: Instant,
    op: &'static str,
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    /// Cumulative bytes queued / written.
    queued: u64,
    written: u64,
    /// Requests not yet fully written.
    unsent: VecDeque<Unsent>,
    pending: VecDeque<Pending>,
    replies: Replies,
    alive: bool,
}

/// A request queued for writing: where it ends in the output, when it was due, when its
/// thread last returned from epoll, when the thread built it, and how long after it was
/// due (and the thread awake) the thread was still inside an earlier request's write.
#[derive(Clone, Copy)]
struct Unsent {
    end: u64,
    intended: Instant,
    woke: Instant,
    noticed: Instant,
    prior_write: Duration,
}

/// Sends later than `LATE`, each counted under its largest part: the thread woke up
/// late (timer, scheduler, vCPU), was awake but busy (reading replies, interrupts,
/// bookkeeping), or was inside its own earlier writes (a loopback write delivers the
/// request to the server within the call, 10-20 µs).
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct LateCauses {
    pub late_wakeup: u64,
    pub busy: u64,
    pub behind_writes: u64,
}

impl LateCauses {
    fn add(&mut self, o: &LateCauses) {
        self.late_wakeup += o.late_wakeup;
        self.busy += o.busy;
        self.behind_writes += o.behind_writes;
    }

    fn count(&mut self, u: &Unsent, issued: Instant) {
        if issued.saturating_duration_since(u.intended) <= LATE {
            return;
        }
        let wake = u.woke.saturating_duration_since(u.intended);
        let busy = u.noticed.saturating_duration_since(u.intended).saturating_sub(wake).saturating_sub(u.prior_write);
        let queue = issued.saturating_duration_since(u.noticed.max(u.intended)) + u.prior_write;
        if wake >= busy && wake >= queue {
            self.late_wakeup += 1;
        } else if busy >= queue {
            self.busy += 1;
        } else {
            self.behind_writes += 1;
        }
    }
}

#[derive(Default)]
struct Counts {
    sent: u64,
    completed: u64,
    errors: u64,
}

struct IntervalStats {
    window: Window,
    send_err: Latencies,
    /// How long each write(2) of a request took: on loopback the kernel delivers the
    /// request to the server inside the call, so this is the generator's floor per send.
    write_time: Latencies,
    late: LateCauses,
    counts: Counts,
}

impl IntervalStats {
    fn new() -> Self {
        IntervalStats {
            window: Window::default(),
            send_err: Latencies::default(),
            write_time: Latencies::default(),
            late: LateCauses::default(),
            counts: Counts::default(),
        }
    }

    fn add(&mut self, s: &IntervalStats) {
        self.window.add(&s.window);
        self.send_err.add(&s.send_err);
        self.write_time.add(&s.write_time);
        self.late.add(&s.late);
        self.counts.sent += s.counts.sent;
        self.counts.completed += s.counts.completed;
        self.counts.errors += s.counts.errors;
    }
}

enum Msg {
    Interval(usize, Box<IntervalStats>),
    /// `unsent`: requests the profile still had due when issuing stopped (expected count);
    /// `stopped`: seconds into the profile when this thread stopped issuing.
    Done { unanswered: u64, broken: u64, unsent: f64, stopped: f64, applied: Option<Applied>, error: Option<WireError> },
}

#[derive(Serialize)]
struct IntervalLine {
    #[serde(rename = "type")]
    kind: &'static str,
    start: f64,
    end: f64,
    target_rps: f64,
    sent: u64,
    completed: u64,
    errors: u64,
    rps: f64,
    #[serde(flatten)]
    latency: Summary,
    send_err_p50_us: Option<f64>,
    send_err_p99_us: Option<f64>,
    send_err_max_us: Option<f64>,
    ops: BTreeMap<&'static str, Summary>,
}

/// What a run did, as written in the summary line.
#[derive(Serialize, Debug, Clone)]
pub struct Report {
    #[serde(rename = "type")]
    kind: &'static str,
    pub start: f64,
    pub end: f64,
    /// The profile's length, as asked.
    pub duration_s: f64,
    /// Seconds the profile actually ran: `duration_s`, unless issuing stopped early
    /// (every connection broke) or ran over (the threads fell behind the rate).
    pub elapsed_s: f64,
    pub target_requests: f64,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    /// Requests with no reply when the run ended.
    pub unanswered: u64,
    /// Connections the server closed or reset.
    pub broken_connections: u64,
    /// Requests the profile had due that were never sent: the send threads fell behind
    /// and issuing stopped at the end of the profile (0 when the rate was met).
    pub unsent: u64,
    /// Requests sent per second of `elapsed_s`: the achieved rate (sent over the nominal
    /// duration said 169/s for a run of 2000/s whose connections broke after 0.27 s).
    pub rps: f64,
    #[serde(flatten)]
    pub latency: Summary,
    pub send_err_p50_us: Option<f64>,
    pub send_err_p99_us: Option<f64>,
    pub send_err_max_us: Option<f64>,
    /// Duration of the write(2) calls that sent requests (on loopback: delivery included).
    pub write_p50_us: Option<f64>,
    pub write_p99_us: Option<f64>,
    /// Sends later than 20 µs, by cause.
    pub send_late: LateCauses,
    /// How the send threads ran: CPUs pinned to (thread order), SCHED_FIFO priority,
    /// timer slack, spin margin; so a result says how it was obtained.
    pub sched: SchedReport,
    pub ops: BTreeMap<&'static str, Summary>,
}

impl Report {
    /// Why a run that ran still failed: connections broke (closed, reset, or replies not
    /// understood), or nothing was answered. The summary is written all the same; the
    /// tool then exits non-zero with this line (it exited 0 with 8 of 8 broken).
    pub fn failure(&self, connections: usize) -> Option<String> {
        let cut = if self.elapsed_s < self.duration_s {
            format!("; the load stopped after {:.3} s of {} s", self.elapsed_s, self.duration_s)
        } else {
            String::new()
        };
        if self.broken_connections > 0 {
            Some(format!(
                "{} of {connections} connections broke (closed, reset, or replies not understood): {} requests sent, {} answered{cut}",
                self.broken_connections, self.sent, self.completed
            ))
        } else if self.completed == 0 && self.sent > 0 {
            Some(format!("no request was answered ({} sent){cut}", self.sent))
        } else {
            None
        }
    }
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct SchedReport {
    pub cpus: Vec<usize>,
    pub realtime_priority: Option<u8>,
    pub timer_slack_ns: u64,
    pub spin_us: f64,
    /// CPU wake-up latency held at 0 (PM QoS) during the run.
    pub pm_qos: bool,
}

fn connect(addr: SocketAddr) -> Result<TcpStream> {
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| WireError::new(addr.to_string(), format!("cannot connect: {e}")))?;
    let _ = s.set_nodelay(true);
    s.set_nonblocking(true).map_err(|e| WireError::new(addr.to_string(), e.to_string()))?;
    Ok(TcpStream::from_std(s))
}

/// Set every key once, pipelined in batches, on a blocking connection.
fn preload(opts: &Options) -> Result<()> {
    let w = &opts.workload;
    if w.proto == super::request::LoadProto::Http {
        return Ok(());
    }
    let where_ = opts.addr.to_string();
    let mut s = std::net::TcpStream::connect_timeout(&opts.addr, Duration::from_secs(5))
        .map_err(|e| WireError::new(&where_, format!("cannot connect: {e}")))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut rng = SmallRng::seed_from_u64(opts.seed ^ 0xface);
    let mut replies = Replies::new(w.proto);
    let mut kb = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut i = 0u64;
    while i < w.keys {
        let n = (w.keys - i).min(100);
        let mut out = Vec::new();
        for j in 0..n {
            w.set_request(i + j, &mut rng, &mut kb, &mut out);
        }
        s.write_all(&out).map_err(|e| WireError::new(&where_, format!("preload write: {e}")))?;
        let mut got = 0;
        while got < n {
            let k = s.read(&mut buf).map_err(|e| WireError::new(&where_, format!("preload read: {e}")))?;
            if k == 0 {
                return Err(WireError::new(&where_, "server closed the connection during preload"));
            }
            replies
                .feed(&buf[..k], &mut |_| got += 1)
                .map_err(|_| WireError::new(&where_, "preload: reply not understood"))?;
        }
        i += n;
    }
    Ok(())
}

/// Write what is queued. A request's send error runs from its intended time to the start
/// of the write(2) that hands its last byte to the kernel: the kernel's own loopback
/// delivery, done inside the call, is the network's time, not the generator's lateness.
fn flush(c: &mut Conn, stats: &mut IntervalStats) -> io::Result<()> {
    while !c.out.is_empty() {
        let issued = Instant::now();
        match c.stream.write(&c.out) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(n) => {
                stats.write_time.record(issued.elapsed().as_nanos() as u64);
                c.out.drain(..n);
                c.written += n as u64;
                while let Some(u) = c.unsent.front() {
                    if u.end > c.written {
                        break;
                    }
                    stats.send_err.record(issued.saturating_duration_since(u.intended).as_nanos() as u64);
                    stats.late.count(u, issued);
                    c.unsent.pop_front();
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Read what a connection has; each reply completes its oldest pending request.
fn read_replies(c: &mut Conn, buf: &mut [u8], stats: &mut IntervalStats, broken: &mut u64) {
    loop {
        match c.stream.read(buf) {
            Ok(0) => {
                c.alive = false;
                *broken += 1;
                return;
            }
            Ok(n) => {
                let now = Instant::now();
                let Conn { replies, pending, .. } = c;
                let w = &mut stats.window;
                let counts = &mut stats.counts;
                let r = replies.feed(&buf[..n], &mut |error| {
                    if let Some(p) = pending.pop_front() {
                        w.record(p.op, now.saturating_duration_since(p.intended).as_nanos() as u64);
                        counts.completed += 1;
                        if error {
                            counts.errors += 1;
                        }
                    }
                });
                if r.is_err() {
                    c.alive = false;
                    *broken += 1;
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                c.alive = false;
                *broken += 1;
                return;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn worker(
    opts: Arc<Options>,
    index: usize,
    conns_n: usize,
    rate_share: f64,
    start_gate: Arc<Barrier>,
    start_at: Arc<std::sync::OnceLock<Instant>>,
    failed: Arc<AtomicBool>,
    tx: mpsc::Sender<Msg>,
) {
    let applied = sched::apply(&opts.sched, index);
    let result = match &applied {
        Ok(_) => worker_inner(&opts, index, conns_n, rate_share, &start_gate, &start_at, &failed, &tx),
        Err(e) => {
            // Reach the gate all the same, so no other thread waits forever.
            failed.store(true, Ordering::SeqCst);
            start_gate.wait();
            Err(WireError::new("load", e.clone()))
        }
    };
    let _ = tx.send(match result {
        Ok((unanswered, broken, unsent, stopped)) => Msg::Done { unanswered, broken, unsent, stopped, applied: applied.ok(), error: None },
        Err(e) => Msg::Done { unanswered: 0, broken: 0, unsent: 0.0, stopped: 0.0, applied: None, error: Some(e) },
    });
}

#[allow(clippy::too_many_arguments)]
fn worker_inner(
    opts: &Options,
    index: usize,
    conns_n: usize,
    rate_share: f64,
    start_gate: &Barrier,
    start_at: &std::sync::OnceLock<Instant>,
    failed: &AtomicBool,
    tx: &mpsc::Sender<Msg>,
) -> Result<(u64, u64, f64, f64)> {
    let mut poll = Poll::new().map_err(|e| WireError::new("load", format!("epoll: {e}")))?;
    let mut conns = Vec::new();
    let mut connect_error = None;
    for i in 0..conns_n {
        match connect(opts.addr) {
            Ok(mut stream) => {
                poll.registry()
                    .register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| WireError::new("load", format!("epoll register: {e}")))?;
                conns.push(Conn {
                    stream,
                    out: Vec::new(),
                    queued: 0,
                    written: 0,
                    unsent: VecDeque::new(),
                    pending: VecDeque::new(),
                    replies: Replies::new(opts.workload.proto),
                    alive: true,
                });
            }
            Err(e) => {
                connect_error = Some(e);
                break;
            }
        }
    }
    // Every thread reaches the gate, connected or not, so none waits forever; a failure
    // is flagged first, so the run does not announce a start it will not make.
    if connect_error.is_some() {
        failed.store(true, Ordering::SeqCst);
    }
    start_gate.wait();
    if let Some(e) = connect_error {
        return Err(e);
    }
    let start = *start_at.get_or_init(|| Instant::now() + opts.start_in);
    std::thread::sleep(start.saturating_duration_since(Instant::now())); // the profile starts as announced
    let mut rng = SmallRng::seed_from_u64(opts.seed.wrapping_add(index as u64 * 7919));
    let duration = opts.profile.duration();
    let interval = opts.interval;
    let mut idx = 0usize;
    let mut stats = IntervalStats::new();
    let mut events = Events::with_capacity(1024);
    let wakeup = Wakeup::new(poll.registry(), Token(usize::MAX));
    let mut buf = vec![0u8; 1 << 16];
    let mut key_buf = Vec::new();
    let mut rr = 0usize;
    let mut opaque = 0u32;
    let mut broken = 0u64;
    let mut unsent = 0.0;
    let mut stopped = duration;

    let first_gap = |t: f64, rng: &mut SmallRng| -> f64 {
        match opts.profile.next_active(t) {
            Some(a) => a + opts.arrivals.gap(opts.profile.rate_at(a) * rate_share, rng),
            None => f64::INFINITY,
        }
    };
    let mut next_t = first_gap(0.0, &mut rng);
    let mut stop_at: Option<Instant> = None;
    // Events taken from epoll but not handled yet: a send that falls due while replies
    // are being read goes first, the remaining events after it.
    let mut deferred: VecDeque<(usize, bool, bool)> = VecDeque::new();
    let mut woke = start;
    let mut last_write_end = start;
    let spin = opts.spin.as_secs_f64();
    let realtime = opts.sched.realtime.is_some();
    loop {
        let mut el = Instant::now().duration_since(start).as_secs_f64();
        // Requests due before an interval's end are generated before it closes.
        while el >= (idx + 1) as f64 * interval && next_t >= (idx + 1) as f64 * interval {
            let done = std::mem::replace(&mut stats, IntervalStats::new());
            let _ = tx.send(Msg::Interval(idx, Box::new(done)));
            idx += 1;
        }
        if stop_at.is_none() {
            while next_t <= el && next_t < duration && el < duration + STOP_SLACK {
                // A request counts in the interval of its intended time.
                while next_t >= (idx + 1) as f64 * interval {
                    let done = std::mem::replace(&mut stats, IntervalStats::new());
                    let _ = tx.send(Msg::Interval(idx, Box::new(done)));
                    idx += 1;
                }
                if opts.profile.rate_at(next_t) <= 0.0 {
                    // The gap was drawn at the old rate and ran into a pause.
                    next_t = first_gap(next_t, &mut rng);
                    continue;
                }
                let intended = start + Duration::from_secs_f64(next_t);
                let Some(ci) = (0..conns.len()).map(|k| (rr + k) % conns.len()).find(|&i| conns[i].alive) else { break };
                rr = ci + 1;
                let c = &mut conns[ci];
                opaque = opaque.wrapping_add(1);
                let noticed = Instant::now();
                let prior_write = last_write_end.saturating_duration_since(intended.max(woke));
                let before = c.out.len();
                let op = opts.workload.request(&mut rng, opaque, &mut key_buf, &mut c.out);
                c.queued += (c.out.len() - before) as u64;
                c.unsent.push_back(Unsent { end: c.queued, intended, woke, noticed, prior_write });
                c.pending.push_back(Pending { intended, op });
                stats.counts.sent += 1;
                // Written at once, so a request waits only behind the writes before it
                // (a write that would block is finished on the writable event).
                if flush(c, &mut stats).is_err() {
                    c.alive = false;
                    broken += 1;
                }
                last_write_end = Instant::now();
                let rate = opts.profile.rate_at(next_t) * rate_share;
                let gap = opts.arrivals.gap(rate, &mut rng);
                next_t = if gap.is_finite() { next_t + gap } else { first_gap(next_t, &mut rng) };
                el = Instant::now().duration_since(start).as_secs_f64();
            }
            let overrun = el >= duration + STOP_SLACK;
            let all_broken = conns.iter().all(|c| !c.alive);
            if next_t >= duration || overrun || all_broken {
                if overrun && next_t < duration {
                    unsent = expected_requests(&opts.profile, next_t, duration) * rate_share;
                }
                if next_t < duration {
                    stopped = el; // cut short (or run over): the rate is over the time it ran
                }
                stop_at = Some(Instant::now());
            }
        }
        if let Some(s) = stop_at {
            let outstanding: usize = conns.iter().filter(|c| c.alive).map(|c| c.pending.len()).sum();
            if outstanding == 0 || s.elapsed().as_secs_f64() >= opts.drain {
                break;
            }
        }
        if deferred.is_empty() {
            // Sleep until shortly before the next send, then spin for precision: woken by
            // the timer `spin` ahead, or (no timerfd) by epoll's timeout a millisecond ahead.
            let next_event = if stop_at.is_none() { next_t.min((idx + 1) as f64 * interval) } else { el + 0.01 };
            let wait = next_event - Instant::now().duration_since(start).as_secs_f64();
            let margin = spin_margin(spin, realtime, opts.profile.rate_at(el) * rate_share);
            let timeout = match &wakeup {
                Some(w) if wait > margin && w.arm(Duration::from_secs_f64(wait - margin)) => Some(Duration::from_secs_f64(wait)),
                _ if wait > margin.max(0.0015) => Some(Duration::from_secs_f64(wait - 0.001)),
                _ => {
                    // Spinning: let another send thread on this CPU run (under SCHED_FIFO
                    // nothing else would until this one sleeps, and its sends go late).
                    std::thread::yield_now();
                    Some(Duration::ZERO)
                }
            };
            if let Err(e) = poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(WireError::new("load", format!("epoll wait: {e}")));
                }
            }
            woke = Instant::now();
            for ev in events.iter() {
                match wakeup.as_ref() {
                    Some(w) if w.token == ev.token() => w.clear(),
                    _ => deferred.push_back((ev.token().0, ev.is_writable(), ev.is_readable() || ev.is_read_closed())),
                }
            }
        }
        while let Some((token, writable, readable)) = deferred.pop_front() {
            let Some(c) = conns.get_mut(token) else { continue };
            if !c.alive {
                continue;
            }
            if writable && !c.out.is_empty() && flush(c, &mut stats).is_err() {
                c.alive = false;
                broken += 1;
                continue;
            }
            if readable {
                read_replies(c, &mut buf, &mut stats, &mut broken);
            }
            if stop_at.is_none() && next_t < duration && start.elapsed().as_secs_f64() >= next_t {
                break;
            }
        }
    }
    let _ = tx.send(Msg::Interval(idx, Box::new(stats)));
    let unanswered = conns.iter().map(|c| c.pending.len() as u64).sum();
    for c in conns.iter_mut() {
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
    }
    Ok((unanswered, broken, unsent, stopped))
}

/// Requests the profile asks for between `from` and `to` seconds (10 ms steps).
fn expected_requests(profile: &Profile, from: f64, to: f64) -> f64 {
    let steps = ((to - from) / 0.01).ceil().max(1.0) as usize;
    let dt = (to - from) / steps as f64;
    (0..steps).map(|i| profile.rate_at(from + (i as f64 + 0.5) * dt) * dt).sum()
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// CLOCK_MONOTONIC in seconds (Python's `time.monotonic`; `Instant` does not show its value).
fn monotonic_now() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Run the load; each finished interval goes to `on_line` as one JSON line.
pub fn run(opts: Options, on_line: &mut dyn FnMut(&str)) -> Result<Report> {
    if opts.threads == 0 || opts.connections == 0 {
        return Err(WireError::usage("load", "--threads and --connections must be at least 1"));
    }
    if opts.interval.is_nan() || opts.interval <= 0.0 {
        return Err(WireError::usage("--interval", "must be positive"));
    }
    // Held (the file kept open) until the report is made.
    let pm_qos = if opts.sched.pm_qos { Some(sched::hold_pm_qos().map_err(|e| WireError::new("--pm-qos", e))?) } else { None };
    if opts.preload {
        preload(&opts)?;
    }
    let threads = opts.threads.min(opts.connections);
    let opts = Arc::new(opts);
    let gate = Arc::new(Barrier::new(threads + 1));
    let start_at: Arc<std::sync::OnceLock<Instant>> = Arc::new(std::sync::OnceLock::new());
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for t in 0..threads {
        let conns = opts.connections / threads + usize::from(t < opts.connections % threads);
        let (o, g, s, f, tx) = (Arc::clone(&opts), Arc::clone(&gate), Arc::clone(&start_at), Arc::clone(&failed), tx.clone());
        let share = conns as f64 / opts.connections as f64;
        handles.push(std::thread::spawn(move || worker(o, t, conns, share, g, s, f, tx)));
    }
    drop(tx);
    gate.wait();
    let (now, mono_now, unix) = (Instant::now(), monotonic_now(), unix_now());
    let start = *start_at.get_or_init(|| now + opts.start_in);
    // the start on CLOCK_MONOTONIC too (a capture keeps its times on it) and on the wall clock: ahead by
    // `start_in`, or behind by the moment a send thread took
    let ahead = start.saturating_duration_since(now).as_secs_f64() - now.saturating_duration_since(start).as_secs_f64();
    let (mono_start, unix_start) = (mono_now + ahead, unix + ahead);
    // The profile starts now (after any preload): a controller reading the wire can tell
    // the preload's traffic from the load's. Not when a thread could not start: the run
    // ends with that thread's error instead (the start line came before it).
    if !failed.load(Ordering::SeqCst) {
        on_line(&serde_json::json!({"type": "start", "start": unix_start, "monotonic": mono_start,
                                    "preloaded": opts.preload}).to_string());
    }
    let mut pending: BTreeMap<usize, (usize, IntervalStats)> = BTreeMap::new();
    let mut totals = IntervalStats::new();
    let mut done = 0usize;
    let mut unanswered = 0;
    let mut broken = 0;
    let mut unsent = 0.0;
    let mut stopped: f64 = 0.0;
    let mut first_error = None;
    let mut applied: Vec<Applied> = Vec::new();
    let mut next_print = 0usize;
    let mut emit = |i: usize, s: &IntervalStats, totals: &mut IntervalStats, last: bool| {
        let start = i as f64 * opts.interval;
        let end = if last { start.max(start_at_elapsed(&start_at)) } else { start + opts.interval };
        let end = end.max(start + 1e-9);
        let mid = (start + end) / 2.0;
        let all = s.window.all().summary();
        let se = s.send_err.summary();
        let line = IntervalLine {
            kind: "interval",
            start: unix_start + start,
            end: unix_start + end,
            target_rps: opts.profile.rate_at(mid),
            sent: s.counts.sent,
            completed: s.counts.completed,
            errors: s.counts.errors,
            rps: s.counts.completed as f64 / (end - start),
            latency: all,
            send_err_p50_us: se.p50_us,
            send_err_p99_us: se.p99_us,
            send_err_max_us: se.max_us,
            ops: s.window.ops_summary(),
        };
        if let Ok(text) = serde_json::to_string(&line) {
            on_line(&text);
        }
        totals.add(s);
    };
    for msg in rx {
        match msg {
            Msg::Interval(i, s) => {
                let e = pending.entry(i).or_insert_with(|| (0, IntervalStats::new()));
                e.0 += 1;
                e.1.add(&s);
                // An interval is complete once every live thread has reported it.
                while pending.get(&next_print).is_some_and(|(n, _)| *n >= threads - done) {
                    if let Some((_, s)) = pending.remove(&next_print) {
                        emit(next_print, &s, &mut totals, false);
                    }
                    next_print += 1;
                }
            }
            Msg::Done { unanswered: u, broken: b, unsent: n, stopped: st, applied: a, error } => {
                done += 1;
                unsent += n;
                stopped = stopped.max(st);
                applied.extend(a);
                unanswered += u;
                broken += b;
                if first_error.is_none() {
                    first_error = error;
                }
            }
        }
    }
    for h in handles {
        let _ = h.join();
    }
    if let Some(e) = first_error {
        return Err(e); // already names where ("load: load: cannot pin" named it twice)
    }
    let last = pending.keys().copied().max();
    for (i, (_, s)) in std::mem::take(&mut pending) {
        emit(i, &s, &mut totals, Some(i) == last);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let all = totals.window.all().summary();
    let se = totals.send_err.summary();
    let wt = totals.write_time.summary();
    let duration = opts.profile.duration();
    let target = expected_requests(&opts.profile, 0.0, duration);
    Ok(Report {
        kind: "summary",
        start: unix_start,
        end: unix_start + elapsed,
        duration_s: duration,
        elapsed_s: stopped,
        target_requests: target.round(),
        sent: totals.counts.sent,
        completed: totals.counts.completed,
        errors: totals.counts.errors,
        unanswered,
        broken_connections: broken,
        unsent: unsent.round() as u64,
        rps: totals.counts.sent as f64 / stopped.max(1e-9),
        latency: all,
        send_err_p50_us: se.p50_us,
        send_err_p99_us: se.p99_us,
        send_err_max_us: se.max_us,
        write_p50_us: wt.p50_us,
        write_p99_us: wt.p99_us,
        send_late: totals.late,
        sched: SchedReport {
            cpus: if opts.sched.cpus.is_empty() { Vec::new() } else { (0..threads).map(|t| opts.sched.cpus[t % opts.sched.cpus.len()]).collect() },
            realtime_priority: opts.sched.realtime,
            timer_slack_ns: applied.iter().map(|a| a.timer_slack_ns).max().unwrap_or(0),
            spin_us: opts.spin.as_secs_f64() * 1e6,
            pm_qos: pm_qos.is_some(),
        },
        ops: totals.window.ops_summary(),
    })
}

/// How long before a send the thread stops sleeping and spins. Under SCHED_FIFO the
/// kernel throttles a thread that runs for more than 95 % of a second
/// (`sched_rt_runtime_us`): it is stopped for the rest of that second, tens of ms of
/// send error. A thread that spins `m` before each send of a Poisson stream at `rate`
/// sleeps a fraction e^(-rate m) of the time, so the margin is capped to keep that
/// fraction at 1/4 or more (m <= ln 4 / rate): 46 µs at 30 000 sends/s.
fn spin_margin(spin: f64, realtime: bool, rate: f64) -> f64 {
    if realtime && rate > 0.0 {
        spin.min(4f64.ln() / rate)
    } else {
        spin
    }
}

fn start_at_elapsed(s: &std::sync::OnceLock<Instant>) -> f64 {
    s.get().map(|i| i.elapsed().as_secs_f64()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn realtime_spin_leaves_a_quarter_of_the_time_asleep() {
        use super::spin_margin;
        assert_eq!(spin_margin(100e-6, false, 50_000.0), 100e-6);
        assert_eq!(spin_margin(100e-6, true, 1_000.0), 100e-6);
        let m = spin_margin(100e-6, true, 30_000.0);
        assert!((m - 46.2e-6).abs() < 0.1e-6, "{m}");
        assert!(((-30_000.0 * m).exp() - 0.25).abs() < 1e-9);
        assert_eq!(spin_margin(100e-6, true, 0.0), 100e-6);
    }

    use super::*;
    use crate::load::dist::Sizes;
    use crate::load::request::LoadProto;
    use std::net::TcpListener;

    fn options(addr: SocketAddr, duration: f64, cpus: Vec<usize>) -> Options {
        Options {
            addr,
            workload: Workload { proto: LoadProto::McBinary, keys: 10, key_sizes: Sizes::Fixed(8), value_sizes: Sizes::Fixed(8),
                                 set_ratio: 0.0, path: "/".into(), host: addr.to_string() },
            profile: Profile::Constant { rate: 1000.0, duration },
            arrivals: Arrivals::parse("uniform").unwrap(),
            connections: 2,
            threads: 1,
            interval: 1.0,
            drain: 0.1,
            seed: 1,
            preload: false,
            sched: Sched { cpus, realtime: None, pm_qos: false },
            spin: Duration::from_micros(100),
            start_in: Duration::ZERO,
        }
    }

    /// A server that accepts `n` connections, answers nothing, and closes them after `hold`.
    fn mute_server(n: usize, hold: Duration) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let conns: Vec<_> = (0..n).map(|_| l.accept().unwrap().0).collect();
            std::thread::sleep(hold);
            drop(conns);
        });
        (addr, t)
    }

    #[test]
    fn a_thread_that_cannot_start_says_so_once_and_announces_no_start() {
        // `--cpus 99` wrote the start line, then "load: load: cannot pin to CPU 99".
        let l = TcpListener::bind("127.0.0.1:0").unwrap(); // never connected to: the thread fails first
        let mut lines = Vec::new();
        let e = run(options(l.local_addr().unwrap(), 0.2, vec![1000]), &mut |l| lines.push(l.to_string())).unwrap_err().to_string();
        assert!(e.starts_with("load: cannot pin to CPU 1000") && !e.contains("load: load:"), "{e}");
        assert!(lines.is_empty(), "{lines:?}");
    }

    #[test]
    fn connections_the_server_closes_cut_the_run_short_and_fail_it() {
        // memcached killed 1 s into `-d 3` gave exit 0, "duration_s": 3.0 and "rps": sent / 3.
        let (addr, server) = mute_server(2, Duration::from_millis(200));
        let r = run(options(addr, 10.0, vec![]), &mut |_| {}).unwrap();
        server.join().unwrap();
        assert_eq!((r.broken_connections, r.completed, r.duration_s), (2, 0, 10.0));
        assert!(r.sent > 0 && r.elapsed_s > 0.0 && r.elapsed_s < 10.0, "{r:?}");
        assert_eq!(r.rps, r.sent as f64 / r.elapsed_s);
        assert!(r.latency.p95_us.is_none()); // nothing answered: no latency, not 0
        let why = r.failure(2).unwrap();
        assert!(why.starts_with(&format!("2 of 2 connections broke (closed, reset, or replies not understood): {} requests sent, 0 answered; the load stopped after ", r.sent)), "{why}");
    }

    #[test]
    fn a_run_nothing_answered_fails() {
        let (addr, server) = mute_server(2, Duration::from_millis(1500));
        let r = run(options(addr, 0.2, vec![]), &mut |_| {}).unwrap();
        assert_eq!((r.broken_connections, r.completed, r.elapsed_s), (0, 0, 0.2));
        assert_eq!(r.failure(2).unwrap(), format!("no request was answered ({} sent)", r.sent));
        server.join().unwrap();
    }

    #[test]
    fn late_sends_go_to_their_largest_cause() {
        let t0 = Instant::now();
        let us = |n: u64| t0 + Duration::from_micros(n);
        let u = |woke, noticed, prior| Unsent { end: 0, intended: us(100), woke: us(woke), noticed: us(noticed), prior_write: Duration::from_micros(prior) };
        let mut c = LateCauses::default();
        c.count(&u(90, 101, 0), us(110)); // 10 µs late: not counted
        c.count(&u(150, 151, 0), us(152)); // woke 50 µs after it was due
        c.count(&u(90, 140, 0), us(141)); // awake, but 40 µs passed before it was built
        c.count(&u(90, 140, 35), us(141)); // most of those 40 µs inside an earlier write
        c.count(&u(90, 101, 0), us(160)); // its own write waited (socket full)
        assert_eq!(c, LateCauses { late_wakeup: 1, busy: 1, behind_writes: 2 });
    }
}
