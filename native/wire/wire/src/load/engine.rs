//! Threads, each driving its connections with mio; per-interval statistics merged by the
//! caller's thread.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
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
use super::timer::{Wakeup, SPIN_MARGIN};
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
}

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
    /// (end offset, intended time) of requests not yet fully written.
    unsent: VecDeque<(u64, Instant)>,
    pending: VecDeque<Pending>,
    replies: Replies,
    alive: bool,
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
    counts: Counts,
}

impl IntervalStats {
    fn new() -> Self {
        IntervalStats { window: Window::default(), send_err: Latencies::default(), counts: Counts::default() }
    }
}

enum Msg {
    Interval(usize, Box<IntervalStats>),
    Done { unanswered: u64, broken: u64, error: Option<String> },
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
    send_err_p50_us: f64,
    send_err_p99_us: f64,
    send_err_max_us: f64,
    ops: BTreeMap<&'static str, Summary>,
}

/// What a run did, as written in the summary line.
#[derive(Serialize, Debug, Clone)]
pub struct Report {
    #[serde(rename = "type")]
    kind: &'static str,
    pub start: f64,
    pub end: f64,
    pub duration_s: f64,
    pub target_requests: f64,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    /// Requests with no reply when the run ended.
    pub unanswered: u64,
    /// Connections the server closed or reset.
    pub broken_connections: u64,
    pub rps: f64,
    #[serde(flatten)]
    pub latency: Summary,
    pub send_err_p50_us: f64,
    pub send_err_p99_us: f64,
    pub send_err_max_us: f64,
    pub ops: BTreeMap<&'static str, Summary>,
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
fn flush(c: &mut Conn, send_err: &mut Latencies) -> io::Result<()> {
    while !c.out.is_empty() {
        let issued = Instant::now();
        match c.stream.write(&c.out) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(n) => {
                c.out.drain(..n);
                c.written += n as u64;
                while let Some(&(end, intended)) = c.unsent.front() {
                    if end > c.written {
                        break;
                    }
                    send_err.record(issued.saturating_duration_since(intended).as_nanos() as u64);
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

#[allow(clippy::too_many_arguments)]
fn worker(
    opts: Arc<Options>,
    index: usize,
    conns_n: usize,
    rate_share: f64,
    start_gate: Arc<Barrier>,
    start_at: Arc<std::sync::OnceLock<Instant>>,
    tx: mpsc::Sender<Msg>,
) {
    let result = worker_inner(&opts, index, conns_n, rate_share, &start_gate, &start_at, &tx);
    let _ = tx.send(match result {
        Ok((unanswered, broken)) => Msg::Done { unanswered, broken, error: None },
        Err(e) => Msg::Done { unanswered: 0, broken: 0, error: Some(e.to_string()) },
    });
}

fn worker_inner(
    opts: &Options,
    index: usize,
    conns_n: usize,
    rate_share: f64,
    start_gate: &Barrier,
    start_at: &std::sync::OnceLock<Instant>,
    tx: &mpsc::Sender<Msg>,
) -> Result<(u64, u64)> {
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
    // Every thread reaches the gate, connected or not, so none waits forever.
    start_gate.wait();
    if let Some(e) = connect_error {
        return Err(e);
    }
    let start = *start_at.get_or_init(Instant::now);
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

    let first_gap = |t: f64, rng: &mut SmallRng| -> f64 {
        match opts.profile.next_active(t) {
            Some(a) => a + opts.arrivals.gap(opts.profile.rate_at(a) * rate_share, rng),
            None => f64::INFINITY,
        }
    };
    let mut next_t = first_gap(0.0, &mut rng);
    let mut stop_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let el = now.duration_since(start).as_secs_f64();
        // Requests due before an interval's end are generated before it closes.
        while el >= (idx + 1) as f64 * interval && next_t >= (idx + 1) as f64 * interval {
            let done = std::mem::replace(&mut stats, IntervalStats::new());
            let _ = tx.send(Msg::Interval(idx, Box::new(done)));
            idx += 1;
        }
        if stop_at.is_none() {
            while next_t <= el && next_t < duration {
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
                let alive: Vec<usize> = (0..conns.len()).filter(|&i| conns[i].alive).collect();
                if alive.is_empty() {
                    break;
                }
                let ci = alive[rr % alive.len()];
                rr = rr.wrapping_add(1);
                let c = &mut conns[ci];
                opaque = opaque.wrapping_add(1);
                let before = c.out.len();
                let op = opts.workload.request(&mut rng, opaque, &mut key_buf, &mut c.out);
                c.queued += (c.out.len() - before) as u64;
                c.unsent.push_back((c.queued, intended));
                c.pending.push_back(Pending { intended, op });
                stats.counts.sent += 1;
                let rate = opts.profile.rate_at(next_t) * rate_share;
                let gap = opts.arrivals.gap(rate, &mut rng);
                next_t = if gap.is_finite() { next_t + gap } else { first_gap(next_t, &mut rng) };
            }
            if next_t >= duration || conns.iter().all(|c| !c.alive) {
                stop_at = Some(Instant::now());
            }
            for c in conns.iter_mut().filter(|c| c.alive && !c.out.is_empty()) {
                if flush(c, &mut stats.send_err).is_err() {
                    c.alive = false;
                    broken += 1;
                }
            }
        }
        if let Some(s) = stop_at {
            let outstanding: usize = conns.iter().filter(|c| c.alive).map(|c| c.pending.len()).sum();
            if outstanding == 0 || s.elapsed().as_secs_f64() >= opts.drain {
                break;
            }
        }
        // Sleep until shortly before the next send, then spin for precision: woken by the
        // timer SPIN_MARGIN ahead, or (no timerfd) by epoll's timeout a millisecond ahead.
        let next_event = if stop_at.is_none() { next_t.min((idx + 1) as f64 * interval) } else { el + 0.01 };
        let wait = next_event - Instant::now().duration_since(start).as_secs_f64();
        let margin = SPIN_MARGIN.as_secs_f64();
        let timeout = match &wakeup {
            Some(w) if wait > margin && w.arm(Duration::from_secs_f64(wait - margin)) => Some(Duration::from_secs_f64(wait)),
            _ if wait > 0.0015 => Some(Duration::from_secs_f64(wait - 0.001)),
            _ => Some(Duration::ZERO),
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(WireError::new("load", format!("epoll wait: {e}")));
            }
        }
        for ev in events.iter() {
            if let Some(w) = wakeup.as_ref().filter(|w| w.token == ev.token()) {
                w.clear();
                continue;
            }
            let Some(c) = conns.get_mut(ev.token().0) else { continue };
            if !c.alive {
                continue;
            }
            if ev.is_writable() && !c.out.is_empty() && flush(c, &mut stats.send_err).is_err() {
                c.alive = false;
                broken += 1;
                continue;
            }
            if ev.is_readable() || ev.is_read_closed() {
                loop {
                    match c.stream.read(&mut buf) {
                        Ok(0) => {
                            c.alive = false;
                            broken += 1;
                            break;
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
                                broken += 1;
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            c.alive = false;
                            broken += 1;
                            break;
                        }
                    }
                }
            }
        }
    }
    let _ = tx.send(Msg::Interval(idx, Box::new(stats)));
    let unanswered = conns.iter().map(|c| c.pending.len() as u64).sum();
    for c in conns.iter_mut() {
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
    }
    Ok((unanswered, broken))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Run the load; each finished interval goes to `on_line` as one JSON line.
pub fn run(opts: Options, on_line: &mut dyn FnMut(&str)) -> Result<Report> {
    if opts.threads == 0 || opts.connections == 0 {
        return Err(WireError::new("load", "--threads and --connections must be at least 1"));
    }
    if opts.interval.is_nan() || opts.interval <= 0.0 {
        return Err(WireError::new("--interval", "must be positive"));
    }
    if opts.preload {
        preload(&opts)?;
    }
    let threads = opts.threads.min(opts.connections);
    let opts = Arc::new(opts);
    let gate = Arc::new(Barrier::new(threads + 1));
    let start_at: Arc<std::sync::OnceLock<Instant>> = Arc::new(std::sync::OnceLock::new());
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for t in 0..threads {
        let conns = opts.connections / threads + usize::from(t < opts.connections % threads);
        let (o, g, s, tx) = (Arc::clone(&opts), Arc::clone(&gate), Arc::clone(&start_at), tx.clone());
        let share = conns as f64 / opts.connections as f64;
        handles.push(std::thread::spawn(move || worker(o, t, conns, share, g, s, tx)));
    }
    drop(tx);
    gate.wait();
    let start = *start_at.get_or_init(Instant::now);
    let unix_start = unix_now() - start.elapsed().as_secs_f64();
    // The profile starts now (after any preload): a controller reading the wire can tell
    // the preload's traffic from the load's.
    on_line(&serde_json::json!({"type": "start", "start": unix_start, "preloaded": opts.preload}).to_string());
    let mut pending: BTreeMap<usize, (usize, IntervalStats)> = BTreeMap::new();
    let mut totals = IntervalStats::new();
    let mut done = 0usize;
    let mut unanswered = 0;
    let mut broken = 0;
    let mut first_error = None;
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
        totals.window.add(&s.window);
        totals.send_err.add(&s.send_err);
        totals.counts.sent += s.counts.sent;
        totals.counts.completed += s.counts.completed;
        totals.counts.errors += s.counts.errors;
    };
    for msg in rx {
        match msg {
            Msg::Interval(i, s) => {
                let e = pending.entry(i).or_insert_with(|| (0, IntervalStats::new()));
                e.0 += 1;
                e.1.window.add(&s.window);
                e.1.send_err.add(&s.send_err);
                e.1.counts.sent += s.counts.sent;
                e.1.counts.completed += s.counts.completed;
                e.1.counts.errors += s.counts.errors;
                // An interval is complete once every live thread has reported it.
                while pending.get(&next_print).is_some_and(|(n, _)| *n >= threads - done) {
                    if let Some((_, s)) = pending.remove(&next_print) {
                        emit(next_print, &s, &mut totals, false);
                    }
                    next_print += 1;
                }
            }
            Msg::Done { unanswered: u, broken: b, error } => {
                done += 1;
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
        return Err(WireError::new("load", e));
    }
    let last = pending.keys().copied().max();
    for (i, (_, s)) in std::mem::take(&mut pending) {
        emit(i, &s, &mut totals, Some(i) == last);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let all = totals.window.all().summary();
    let se = totals.send_err.summary();
    let duration = opts.profile.duration();
    let target: f64 = {
        let steps = (duration / 0.01).ceil().max(1.0) as usize;
        (0..steps).map(|i| opts.profile.rate_at((i as f64 + 0.5) * 0.01) * 0.01).sum()
    };
    Ok(Report {
        kind: "summary",
        start: unix_start,
        end: unix_start + elapsed,
        duration_s: duration,
        target_requests: target.round(),
        sent: totals.counts.sent,
        completed: totals.counts.completed,
        errors: totals.counts.errors,
        unanswered,
        broken_connections: broken,
        rps: totals.counts.sent as f64 / duration.max(1e-9),
        latency: all,
        send_err_p50_us: se.p50_us,
        send_err_p99_us: se.p99_us,
        send_err_max_us: se.max_us,
        ops: totals.window.ops_summary(),
    })
}

fn start_at_elapsed(s: &std::sync::OnceLock<Instant>) -> f64 {
    s.get().map(|i| i.elapsed().as_secs_f64()).unwrap_or(0.0)
}
