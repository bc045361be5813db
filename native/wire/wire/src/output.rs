//! Writers: per-request records (JSON Lines or CSV) and per-interval aggregates (JSON
//! Lines), closed by capture time so files and live streams give the same lines.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analyzer::Sink;
use crate::capture::live::KernelStats;
use crate::proto::Protocol;
use crate::record::{Counters, Exchange};
use crate::stats::{Summary, Window};
use crate::Ts;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    Jsonl,
    Csv,
}

pub fn secs(ts: Ts) -> f64 {
    ts as f64 / 1e9
}

#[derive(Serialize)]
struct RecordLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    t: f64,
    t_resp: f64,
    flow: &'a str,
    proto: &'static str,
    op: &'static str,
    key_len: Option<u32>,
    keys: u32,
    req_bytes: u64,
    resp_bytes: u64,
    latency_us: f64,
    ttfb_us: f64,
    status: u16,
    error: bool,
}

pub const CSV_HEADER: &str = "t,t_resp,flow,proto,op,key_len,keys,req_bytes,resp_bytes,latency_us,ttfb_us,status,error";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[derive(Serialize)]
struct IntervalLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    start: f64,
    end: f64,
    rps: f64,
    #[serde(flatten)]
    all: Summary,
    ops: BTreeMap<&'static str, Summary>,
    outstanding: u64,
    flows: u64,
    evicted: u64,
    discarded: u64,
    unmatched_responses: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<&'a KernelStats>,
}

/// The request arrivals of a short tick (live control reacts on these between intervals).
#[derive(Serialize)]
struct TickLine {
    #[serde(rename = "type")]
    kind: &'static str,
    start: f64,
    end: f64,
    requests: u64,
    rps: f64,
}

/// One JSON line, flushed: a reader of the stream sees each line as it is written.
fn write_json_line<W: Write + ?Sized>(w: &mut W, line: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *w, line).map_err(io::Error::from)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// A step of the wall clock seen during a live capture (its times do not follow it).
#[derive(Serialize)]
struct ClockStepLine {
    #[serde(rename = "type")]
    kind: &'static str,
    at: f64,
    step: f64,
}

#[derive(Serialize)]
struct SummaryLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    /// None (null) when no frame was read: a capture with no packet has no time span.
    start: Option<f64>,
    end: Option<f64>,
    /// Answered requests per second over their own span, from the first request to the
    /// last response; 0 with frames but no request answered; None with no frame (or when
    /// the requests span no time).
    rps: Option<f64>,
    #[serde(flatten)]
    all: Summary,
    ops: BTreeMap<&'static str, Summary>,
    counters: &'a Counters,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<&'a KernelStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated: Option<bool>,
}

impl serde::Serialize for KernelStats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("KernelStats", 3)?;
        st.serialize_field("received", &self.received)?;
        st.serialize_field("dropped", &self.dropped)?;
        st.serialize_field("if_dropped", &self.if_dropped)?;
        st.end()
    }
}

/// State the interval lines report besides latencies.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gauges {
    pub outstanding: u64,
    pub flows: u64,
}

pub struct Reporter {
    records: Option<(Box<dyn Write>, RecordFormat)>,
    intervals: Option<Box<dyn Write>>,
    summary: Option<Box<dyn Write>>,
    interval_ns: u64,
    /// When the reporting began: the first frame (or the mark, or a live capture's start).
    first: Option<Ts>,
    start: Option<Ts>,
    /// The span of the answered requests the summary counts: the first one's request
    /// (its last byte) and the last response; the summary's rate is over it.
    answered: Option<(Ts, Ts)>,
    /// Ticks: (length, start of the open tick, request counter at its start).
    tick: Option<(u64, Option<Ts>, u64)>,
    last: Ts,
    window: Window,
    totals: Window,
    error: Option<io::Error>,
}

impl Reporter {
    pub fn new(
        records: Option<(Box<dyn Write>, RecordFormat)>,
        intervals: Option<Box<dyn Write>>,
        summary: Option<Box<dyn Write>>,
        interval_ns: u64,
    ) -> io::Result<Reporter> {
        let mut r = Reporter {
            records,
            intervals,
            summary,
            interval_ns: interval_ns.max(1),
            first: None,
            start: None,
            answered: None,
            tick: None,
            last: 0,
            window: Window::default(),
            totals: Window::default(),
            error: None,
        };
        if let Some((w, RecordFormat::Csv)) = r.records.as_mut() {
            writeln!(w, "{CSV_HEADER}")?;
        }
        Ok(r)
    }

    /// Also write a tick line (requests that arrived) every `tick_ns` of capture time,
    /// on the interval stream, before the interval line a tick ends with.
    pub fn with_ticks(mut self, tick_ns: u64) -> Reporter {
        self.tick = Some((tick_ns.max(1), None, 0));
        self
    }

    /// The first write error, if any (writing stops reporting further ones).
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// Whether a write failed (e.g. stdout closed by `| head`): nothing more will be read.
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    fn keep(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            if self.error.is_none() {
                self.error = Some(e);
            }
        }
    }

    /// A step of the wall clock, `step_ns` (+ forward), seen at capture time `at`: a line on
    /// the interval stream, for a controller to say (the capture's own times do not step).
    pub fn clock_step(&mut self, at: Ts, step_ns: i64) {
        if let Some(w) = self.intervals.as_mut() {
            let line = ClockStepLine { kind: "clock_step", at: secs(at), step: step_ns as f64 / 1e9 };
            let r = write_json_line(w, &line);
            self.keep(r);
        }
    }

    /// Note the latest capture time without closing intervals.
    #[inline]
    pub fn observe(&mut self, now: Ts) {
        if now > self.last {
            self.last = now;
        }
    }

    /// Whether `clock(now)` would close an interval (cheap; call before building counters).
    #[inline]
    pub fn due(&self, now: Ts) -> bool {
        let tick_due = match self.tick {
            Some((len, Some(s), _)) => now >= s + len,
            _ => false,
        };
        tick_due
            || match self.start {
                Some(s) => now >= s + self.interval_ns,
                None => true,
            }
    }

    /// Capture time advanced to `now`: write every interval that ended.
    pub fn clock(&mut self, now: Ts, c: &Counters, g: Gauges, kernel: Option<&KernelStats>) {
        self.observe(now);
        let start = match self.start {
            Some(s) => s,
            None => {
                let s = now - now % self.interval_ns;
                self.first = Some(now);
                self.start = Some(s);
                if let Some((len, _, _)) = self.tick {
                    self.tick = Some((len, Some(now - now % len), c.requests));
                }
                return;
            }
        };
        self.clock_ticks(now, c);
        let mut start = start;
        while now >= start + self.interval_ns {
            self.write_interval(start, start + self.interval_ns, c, g, kernel);
            start += self.interval_ns;
        }
        self.start = Some(start);
    }

    /// The measured phase begins at `now` (e.g. a load generator's preload just ended):
    /// the interval in progress closes there, a partial one, the next ones start there,
    /// and the summary covers only what follows. Intervals before it stay on the stream.
    pub fn mark(&mut self, now: Ts, c: &Counters, g: Gauges, kernel: Option<&KernelStats>) {
        self.clock(now, c, g, kernel);
        if let Some(start) = self.start {
            if now > start {
                self.write_interval(start, now, c, g, kernel);
            }
        }
        self.window.reset();
        self.totals.reset();
        self.answered = None;
        self.first = Some(now);
        self.start = Some(now);
        // ticks start over there too, so that each lies inside one interval (the open
        // tick's requests before the mark belong to what the mark ends)
        if let Some((len, Some(_), _)) = self.tick {
            self.tick = Some((len, Some(now), c.requests));
        }
        self.observe(now);
    }

    /// Write every tick that ended by `now`. Requests are counted as the analyzer parses
    /// them, so a tick holds those seen before the packet (or timer) that closes it.
    fn clock_ticks(&mut self, now: Ts, c: &Counters) {
        let Some((len, Some(mut start), mut at)) = self.tick else { return };
        while now >= start + len {
            let requests = c.requests.saturating_sub(at);
            at = c.requests;
            // The first tick began with the capture, not on the grid: its rate is over that.
            let from = self.covered_from(start);
            if let Some(w) = self.intervals.as_mut() {
                let line = TickLine { kind: "tick", start: secs(from), end: secs(start + len), requests,
                                      rps: requests as f64 / secs((start + len - from).max(1)) };
                let r = write_json_line(w, &line);
                self.keep(r);
            }
            start += len;
        }
        self.tick = Some((len, Some(start), at));
    }

    /// Where an interval (or tick) on the grid from `start` really begins: the first one
    /// began when the capture did (its first frame, or start-up), not on the grid.
    fn covered_from(&self, start: Ts) -> Ts {
        self.first.map_or(start, |first| first.max(start))
    }

    fn write_interval(&mut self, start: Ts, end: Ts, c: &Counters, g: Gauges, kernel: Option<&KernelStats>) {
        if self.intervals.is_none() {
            // Nobody reads interval lines: skip their percentiles (~3 % of a file's time).
            self.totals.add(&self.window);
            self.window.reset();
            return;
        }
        let all = self.window.all().summary();
        // A rate over the time the interval covered: the first one's began at 0.4 s of a
        // second read 60 % low, its requests divided by the whole second.
        let from = self.covered_from(start);
        let line = IntervalLine {
            kind: "interval",
            start: secs(from),
            end: secs(end),
            rps: all.requests as f64 / secs(end.saturating_sub(from).max(1)),
            all,
            ops: self.window.ops_summary(),
            outstanding: g.outstanding,
            flows: g.flows,
            evicted: c.evicted,
            discarded: c.discarded,
            unmatched_responses: c.unmatched_responses,
            kernel,
        };
        if let Some(w) = self.intervals.as_mut() {
            let r = write_json_line(w, &line);
            self.keep(r);
        }
        self.totals.add(&self.window);
        self.window.reset();
    }

    /// End of input: the last (partial) interval and the summary. Returns the summary's
    /// request count (answered requests), so the caller can warn when none matched.
    pub fn finish(&mut self, c: &Counters, g: Gauges, kernel: Option<&KernelStats>, truncated: Option<bool>) -> u64 {
        if let Some(start) = self.start {
            let end = (self.last + 1).max(start + 1);
            if !self.window.is_empty() || self.last > start {
                self.write_interval(start, end, c, g, kernel);
            }
        }
        let all = self.totals.all().summary();
        let requests = all.requests;
        let span = self.first.map(|first| (first, self.last.max(first)));
        // Over the answered requests' own span, file or live alike: a live capture's span
        // (start-up to stop) took idle time before and after the load into the rate.
        let rps = match self.answered {
            Some((from, to)) if requests > 0 => (to > from).then(|| requests as f64 / secs(to - from)),
            _ => span.map(|_| 0.0),
        };
        let line = SummaryLine {
            kind: "summary",
            start: span.map(|(first, _)| secs(first)),
            end: span.map(|(_, last)| secs(last)),
            rps,
            all,
            ops: self.totals.ops_summary(),
            counters: c,
            kernel,
            truncated,
        };
        if let Some((w, _)) = self.records.as_mut() {
            let r = w.flush();
            self.keep(r);
        }
        if let Some(w) = self.summary.as_mut() {
            let r = write_json_line(w, &line);
            self.keep(r);
        }
        requests
    }

    fn write_record(&mut self, flow: &str, proto: Protocol, ex: &Exchange) {
        let Some((w, fmt)) = self.records.as_mut() else { return };
        let latency_us = ex.latency_ns() as f64 / 1000.0;
        let ttfb_us = ex.ttfb_ns() as f64 / 1000.0;
        let r = match fmt {
            RecordFormat::Jsonl => {
                let line = RecordLine {
                    kind: "record",
                    t: secs(ex.t_req),
                    t_resp: secs(ex.t_resp),
                    flow,
                    proto: proto.name(),
                    op: ex.op,
                    key_len: ex.key_len,
                    keys: ex.keys,
                    req_bytes: ex.req_bytes,
                    resp_bytes: ex.resp_bytes,
                    latency_us,
                    ttfb_us,
                    status: ex.status,
                    error: ex.error,
                };
                serde_json::to_writer(&mut *w, &line).map_err(io::Error::from).and_then(|_| w.write_all(b"\n"))
            }
            RecordFormat::Csv => writeln!(
                w,
                "{:.6},{:.6},{},{},{},{},{},{},{},{:.3},{:.3},{},{}",
                secs(ex.t_req),
                secs(ex.t_resp),
                csv_field(flow),
                proto.name(),
                csv_field(ex.op),
                ex.key_len.map(|k| k.to_string()).unwrap_or_default(),
                ex.keys,
                ex.req_bytes,
                ex.resp_bytes,
                latency_us,
                ttfb_us,
                ex.status,
                ex.error
            ),
        };
        self.keep(r);
    }
}

impl Sink for Reporter {
    fn wants_flow_names(&self) -> bool {
        self.records.is_some()
    }
    fn exchange(&mut self, flow: Option<&str>, ex: &Exchange) {
        self.window.record(ex.op, ex.latency_ns());
        self.answered = Some(match self.answered {
            Some((from, to)) => (from.min(ex.t_req), to.max(ex.t_resp)),
            None => (ex.t_req, ex.t_resp),
        });
        if self.records.is_some() {
            self.write_record(flow.unwrap_or(""), ex.proto, ex);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Shared(Rc<RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn exchange(at: Ts, latency: Ts) -> Exchange {
        Exchange { proto: Protocol::McBinary, op: "get", key_len: Some(3), keys: 1, req_bytes: 27, resp_bytes: 30,
                   t_req_start: at, t_req: at, t_resp_start: at + latency, t_resp: at + latency, error: false, status: 0 }
    }

    #[test]
    fn a_mark_starts_the_summary_and_the_intervals_over() {
        let (lines, summary) = (Shared::default(), Shared::default());
        let mut r = Reporter::new(None, Some(Box::new(lines.clone())), Some(Box::new(summary.clone())), 1_000_000_000).unwrap();
        let c = Counters::default();
        let s = 10_000_000_000;
        // a preload: 50 slow requests in the first 0.5 s, then the mark, then 20 fast ones
        for i in 0..50 {
            r.clock(s + i * 10_000_000, &c, Gauges::default(), None);
            r.exchange(None, &exchange(s + i * 10_000_000, 1_000_000));
        }
        r.mark(s + 700_000_000, &c, Gauges::default(), None);
        for i in 0..20 {
            r.clock(s + 800_000_000 + i * 50_000_000, &c, Gauges::default(), None);
            r.exchange(None, &exchange(s + 800_000_000 + i * 50_000_000, 10_000));
        }
        r.finish(&c, Gauges::default(), None, None);
        let summary: serde_json::Value = serde_json::from_slice(&summary.0.borrow()).unwrap();
        assert_eq!(summary["requests"], 20);
        assert!(summary["max_us"].as_f64().unwrap() < 20.0, "{summary}");
        assert_eq!(summary["start"].as_f64().unwrap(), 10.7);
        let text = String::from_utf8(lines.0.borrow().clone()).unwrap();
        let intervals: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        // the preload's interval closes at the mark; the next one starts there
        assert_eq!((intervals[0]["start"].as_f64(), intervals[0]["end"].as_f64()), (Some(10.0), Some(10.7)));
        assert_eq!(intervals[0]["requests"], 50);
        assert_eq!(intervals[1]["start"].as_f64(), Some(10.7));
        let after: u64 = intervals[1..].iter().map(|i| i["requests"].as_u64().unwrap()).sum();
        assert_eq!(after, 20);
    }

    #[test]
    fn a_mark_starts_the_ticks_over_with_the_intervals() {
        // A live manager marks the sniffer when its load starts: each tick must lie inside
        // one interval, or an interval's arrivals lose the ticks that straddle its edges.
        let lines = Shared::default();
        let mut r = Reporter::new(None, Some(Box::new(lines.clone())), None, 1_000_000_000).unwrap().with_ticks(100_000_000);
        let mut c = Counters::default();
        let s = 10_000_000_000;
        for i in 0..30 {
            c.requests += 1;
            r.clock(s + i * 10_000_000, &c, Gauges::default(), None);
        }
        r.mark(s + 345_000_000, &c, Gauges::default(), None);
        for i in 0..150 {
            c.requests += 1;
            r.clock(s + 350_000_000 + i * 10_000_000, &c, Gauges::default(), None);
        }
        let text = String::from_utf8(lines.0.borrow().clone()).unwrap();
        let all: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let after: Vec<&serde_json::Value> =
            all.iter().filter(|l| l["start"].as_f64().unwrap() >= 10.345 - 1e-9).collect();
        let ticks: Vec<f64> = after.iter().filter(|l| l["type"] == "tick").map(|l| l["start"].as_f64().unwrap()).collect();
        assert!(ticks.len() >= 10, "{text}");
        for (k, t) in ticks.iter().enumerate() {
            assert!((t - (10.345 + 0.1 * k as f64)).abs() < 1e-6, "tick {k} starts at {t}: {text}");
        }
        let interval = after.iter().find(|l| l["type"] == "interval").unwrap();
        assert_eq!(interval["start"].as_f64(), Some(10.345));
    }

    fn lines_of(text: &[u8]) -> Vec<serde_json::Value> {
        String::from_utf8(text.to_vec()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn the_first_interval_and_tick_rates_are_over_the_time_they_covered() {
        // The capture began 0.4 s into a second: its 60 requests in 0.6 s read 60/s, not 100/s.
        let (lines, summary) = (Shared::default(), Shared::default());
        let mut r = Reporter::new(None, Some(Box::new(lines.clone())), Some(Box::new(summary.clone())), 1_000_000_000)
            .unwrap()
            .with_ticks(500_000_000);
        let mut c = Counters::default();
        let s = 10_400_000_000;
        for i in 0..120 {
            let at = s + i * 10_000_000;
            c.requests += 1;
            r.clock(at, &c, Gauges::default(), None);
            r.exchange(None, &exchange(at, 1_000));
        }
        r.finish(&c, Gauges::default(), None, None);
        let all = lines_of(&lines.0.borrow());
        let first = all.iter().find(|l| l["type"] == "interval").unwrap();
        assert_eq!((first["start"].as_f64(), first["end"].as_f64(), first["requests"].as_u64()), (Some(10.4), Some(11.0), Some(60)));
        assert!((first["rps"].as_f64().unwrap() - 100.0).abs() < 1e-6, "{first}");
        let tick = all.iter().find(|l| l["type"] == "tick").unwrap();
        assert_eq!((tick["start"].as_f64(), tick["end"].as_f64()), (Some(10.4), Some(10.5)));
        assert!((tick["rps"].as_f64().unwrap() - 100.0).abs() < 1e-6, "{tick}");
        for l in &all {  // every line's rate is its requests over its own span
            let span = l["end"].as_f64().unwrap() - l["start"].as_f64().unwrap();
            assert!((l["rps"].as_f64().unwrap() * span - l["requests"].as_f64().unwrap()).abs() < 1e-6, "{l}");
        }
        let later: Vec<f64> = all.iter().filter(|l| l["type"] == "tick").skip(1).map(|l| l["start"].as_f64().unwrap()).collect();
        assert_eq!(later, vec![10.5, 11.0], "the grid is kept after the first");
    }

    #[test]
    fn the_summary_rate_is_over_the_answered_requests_span() {
        // Live, the summary divided by start-up to stop: 10 s of capture around 1 s of
        // load at 100/s read 10/s.
        let summary = Shared::default();
        let mut r = Reporter::new(None, None, Some(Box::new(summary.clone())), 1_000_000_000).unwrap();
        let c = Counters::default();
        r.clock(10_000_000_000, &c, Gauges::default(), None); // start-up
        for i in 0..100 {
            let at = 14_000_000_000 + i * 10_000_000;
            r.clock(at, &c, Gauges::default(), None);
            r.exchange(None, &exchange(at, 10_000_000));
        }
        r.clock(20_000_000_000, &c, Gauges::default(), None); // stop
        r.finish(&c, Gauges::default(), None, None);
        let s: serde_json::Value = serde_json::from_slice(&summary.0.borrow()).unwrap();
        assert_eq!((s["start"].as_f64(), s["end"].as_f64(), s["requests"].as_u64()), (Some(10.0), Some(20.0), Some(100)));
        // first request 14.0, last response 14.99 + 0.01 = 15.0
        assert!((s["rps"].as_f64().unwrap() - 100.0).abs() < 1e-6, "{s}");
    }

    fn summary_of(frames: &[Ts]) -> serde_json::Value {
        let summary = Shared::default();
        let mut r = Reporter::new(None, None, Some(Box::new(summary.clone())), 1_000_000_000).unwrap();
        for &t in frames {
            r.clock(t, &Counters::default(), Gauges::default(), None);
        }
        assert_eq!(r.finish(&Counters::default(), Gauges::default(), None, Some(false)), 0);
        let v = serde_json::from_slice(&summary.0.borrow()).unwrap();
        v
    }

    #[test]
    fn no_request_matched_leaves_the_latencies_null() {
        // A capture with frames but no match said p95_us 0.0: a spec stored wire_p95 = 0.
        let s = summary_of(&[10_000_000_000, 12_000_000_000]);
        assert_eq!(s["requests"], 0);
        for k in ["mean_us", "p50_us", "p95_us", "p99_us", "max_us"] {
            assert!(s[k].is_null(), "{k}: {s}");
        }
        assert_eq!(s["rps"].as_f64(), Some(0.0)); // 0 requests over 2 s is a rate
        assert_eq!((s["start"].as_f64(), s["end"].as_f64()), (Some(10.0), Some(12.0)));
    }

    #[test]
    fn no_frame_leaves_the_time_span_null() {
        // A header-only pcap said start 0.0, end 0.0 (1970) and rps 0.0.
        let s = summary_of(&[]);
        assert!(s["start"].is_null() && s["end"].is_null() && s["rps"].is_null() && s["p95_us"].is_null(), "{s}");
    }
}
