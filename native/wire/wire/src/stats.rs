//! Latency aggregates from HDR histograms: overall and per operation.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies are recorded in nanoseconds, from 1 ns to one hour, 3 significant digits.
const LOWEST: u64 = 1;
const HIGHEST: u64 = 3_600_000_000_000;
const SIGFIG: u8 = 3;

/// None only if hdrhistogram refused these constant bounds (it accepts them).
fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(LOWEST, HIGHEST, SIGFIG).ok()
}

/// Percentiles of a set of latencies, in microseconds. With no latency recorded there is
/// none to report: the percentiles are None (null in JSON), never 0, which a reader
/// would take for a fast service (a capture that matched nothing stored p95 = 0).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p95_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
}

pub struct Latencies {
    h: Option<Histogram<u64>>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies { h: new_histogram() }
    }
}

impl Latencies {
    pub fn record(&mut self, ns: u64) {
        if let Some(h) = self.h.as_mut() {
            let _ = h.record(ns.clamp(LOWEST, HIGHEST));
        }
    }
    pub fn len(&self) -> u64 {
        self.h.as_ref().map_or(0, |h| h.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn reset(&mut self) {
        if let Some(h) = self.h.as_mut() {
            h.reset();
        }
    }
    pub fn add(&mut self, other: &Latencies) {
        if let (Some(h), Some(o)) = (self.h.as_mut(), other.h.as_ref()) {
            let _ = h.add(o);
        }
    }
    pub fn summary(&self) -> Summary {
        let us = |v: u64| Some(v as f64 / 1000.0);
        match self.h.as_ref().filter(|h| !h.is_empty()) {
            None => Summary { requests: 0, mean_us: None, p50_us: None, p90_us: None, p95_us: None, p99_us: None, p999_us: None, max_us: None },
            Some(h) => Summary {
                requests: h.len(),
                mean_us: Some(h.mean() / 1000.0),
                p50_us: us(h.value_at_quantile(0.50)),
                p90_us: us(h.value_at_quantile(0.90)),
                p95_us: us(h.value_at_quantile(0.95)),
                p99_us: us(h.value_at_quantile(0.99)),
                p999_us: us(h.value_at_quantile(0.999)),
                max_us: us(h.max()),
            },
        }
    }
}

/// Overall and per-operation latencies for one interval (or a whole run). Each latency
/// is recorded once, under its operation; the overall view is their sum, made when asked
/// (once per interval), which halves the cost of recording.
#[derive(Default)]
pub struct Window {
    /// Few operations: a list searched by pointer first (names are interned).
    ops: Vec<(&'static str, Latencies)>,
}

impl Window {
    fn op_mut(&mut self, op: &'static str) -> &mut Latencies {
        let i = match self.ops.iter().position(|(k, _)| std::ptr::eq(*k, op) || *k == op) {
            Some(i) => i,
            None => {
                self.ops.push((op, Latencies::default()));
                self.ops.len() - 1
            }
        };
        &mut self.ops[i].1
    }

    pub fn record(&mut self, op: &'static str, ns: u64) {
        self.op_mut(op).record(ns);
    }
    /// Every operation together.
    pub fn all(&self) -> Latencies {
        let mut all = Latencies::default();
        for (_, l) in &self.ops {
            all.add(l);
        }
        all
    }
    pub fn is_empty(&self) -> bool {
        self.ops.iter().all(|(_, l)| l.is_empty())
    }
    pub fn reset(&mut self) {
        for (_, l) in self.ops.iter_mut() {
            l.reset();
        }
    }
    pub fn add(&mut self, other: &Window) {
        for (op, l) in &other.ops {
            self.op_mut(op).add(l);
        }
    }
    pub fn ops_summary(&self) -> BTreeMap<&'static str, Summary> {
        self.ops.iter().filter(|(_, l)| !l.is_empty()).map(|(k, l)| (*k, l.summary())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut w = Window::default();
        for i in 1..=1000u64 {
            w.record(if i % 2 == 0 { "get" } else { "set" }, i * 1000);
        }
        let s = w.all().summary();
        assert_eq!(s.requests, 1000);
        assert!((s.p50_us.unwrap() - 500.0).abs() < 1.0, "{:?}", s.p50_us);
        assert!((s.p99_us.unwrap() - 990.0).abs() < 1.0);
        assert!((s.max_us.unwrap() - 1000.0).abs() < 1.0);
        assert_eq!(w.ops_summary()["get"].requests, 500);
        w.reset();
        assert_eq!(w.all().summary().requests, 0);
    }

    #[test]
    fn no_latency_is_null_not_zero() {
        // A capture that matched no request reported p95_us 0.0, stored as a real p95.
        let s = Latencies::default().summary();
        assert_eq!((s.requests, s.mean_us, s.p50_us, s.p95_us, s.max_us), (0, None, None, None, None));
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["p95_us"].is_null() && json["mean_us"].is_null(), "{json}");
    }
}
