//! Target rate over time: constant, steps up and down, or a trace file.

use crate::error::{Result, WireError};

#[derive(Debug, Clone, PartialEq)]
pub enum Profile {
    Constant { rate: f64, duration: f64 },
    /// 0 -> max -> 0 in `step_pct` steps, each held `hold` seconds (Heimdall's load sweep).
    Steps { max_rate: f64, step_pct: f64, hold: f64 },
    /// (start second, rate) pairs, each rate held until the next start; ends at `end`.
    Trace { points: Vec<(f64, f64)>, end: f64 },
}

impl Profile {
    pub fn steps(max_rate: f64, step_pct: f64, hold: f64) -> Profile {
        Profile::Steps { max_rate, step_pct: step_pct.clamp(1.0, 100.0), hold }
    }

    /// Rate levels of a steps profile, in order.
    fn levels(step_pct: f64) -> Vec<f64> {
        let n = (100.0 / step_pct).round().max(1.0) as usize;
        let up: Vec<f64> = (0..=n).map(|i| (i as f64 * 100.0 / n as f64) / 100.0).collect();
        let mut all = up.clone();
        all.extend(up.iter().rev().skip(1));
        all
    }

    /// Read "seconds rate" lines ('#' comments allowed). The last line's second ends it.
    /// A trace that cannot be read or is malformed is a bad argument (WireError::usage).
    pub fn trace(path: &str) -> Result<Profile> {
        let text = std::fs::read_to_string(path).map_err(|e| WireError::usage(path, format!("cannot read trace: {e}")))?;
        let mut points = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split(|c: char| c.is_whitespace() || c == ',').filter(|s| !s.is_empty());
            let parse = |s: Option<&str>| s.and_then(|s| s.parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0);
            let (Some(t), Some(r)) = (parse(it.next()), parse(it.next())) else {
                return Err(WireError::usage(format!("{path}:{}", i + 1), "expected \"seconds rate\" (two non-negative numbers)"));
            };
            if points.last().is_some_and(|&(t0, _)| t <= t0) {
                return Err(WireError::usage(format!("{path}:{}", i + 1), "seconds must increase"));
            }
            points.push((t, r));
        }
        let Some(&(end, _)) = points.last() else {
            return Err(WireError::usage(path, "empty trace"));
        };
        if points.len() < 2 {
            return Err(WireError::usage(path, "a trace needs at least two lines (the last one marks its end)"));
        }
        Ok(Profile::Trace { points, end })
    }

    pub fn duration(&self) -> f64 {
        match self {
            Profile::Constant { duration, .. } => *duration,
            Profile::Steps { step_pct, hold, .. } => Self::levels(*step_pct).len() as f64 * hold,
            Profile::Trace { end, .. } => *end,
        }
    }

    /// Target requests/s at `t` seconds from the start.
    pub fn rate_at(&self, t: f64) -> f64 {
        if t < 0.0 || t >= self.duration() {
            return 0.0;
        }
        match self {
            Profile::Constant { rate, .. } => *rate,
            Profile::Steps { max_rate, step_pct, hold } => {
                let levels = Self::levels(*step_pct);
                let i = ((t / hold) as usize).min(levels.len() - 1);
                levels[i] * max_rate
            }
            Profile::Trace { points, .. } => points.iter().rev().find(|(t0, _)| *t0 <= t).map(|p| p.1).unwrap_or(0.0),
        }
    }

    /// Earliest time >= t with a non-zero rate (None: none before the end).
    pub fn next_active(&self, t: f64) -> Option<f64> {
        let step = match self {
            Profile::Constant { .. } => return if self.rate_at(t) > 0.0 { Some(t) } else { None },
            Profile::Steps { hold, .. } => *hold,
            Profile::Trace { .. } => 0.001,
        };
        let mut x = t;
        while x < self.duration() {
            if self.rate_at(x) > 0.0 {
                return Some(x);
            }
            x = match self {
                Profile::Trace { points, .. } => points.iter().map(|p| p.0).find(|&p| p > x).unwrap_or(self.duration()),
                _ => ((x / step).floor() + 1.0) * step,
            };
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_go_up_and_down() {
        let p = Profile::steps(1000.0, 20.0, 2.0);
        assert_eq!(p.duration(), 22.0);
        let rates: Vec<f64> = (0..11).map(|i| p.rate_at(i as f64 * 2.0 + 1.0)).collect();
        assert_eq!(rates, vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0, 800.0, 600.0, 400.0, 200.0, 0.0]);
        assert_eq!(p.next_active(0.5), Some(2.0));
        assert_eq!(p.next_active(20.5), None);
    }

    #[test]
    fn trace_file() {
        let dir = std::env::temp_dir().join(format!("perflearn-trace-{}", std::process::id()));
        std::fs::write(&dir, "# t rate\n0 100\n1.5 0\n2 300\n3 0\n").unwrap();
        let p = Profile::trace(dir.to_str().unwrap()).unwrap();
        assert_eq!((p.rate_at(1.0), p.rate_at(1.7), p.rate_at(2.5), p.duration()), (100.0, 0.0, 300.0, 3.0));
        assert_eq!(p.next_active(1.6), Some(2.0));
        std::fs::write(&dir, "0 100\n0 5\n").unwrap();
        let e = Profile::trace(dir.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains(":2: seconds must increase"), "{e}");
        let _ = std::fs::remove_file(&dir);
    }
}
