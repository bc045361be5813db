//! Size and inter-arrival distributions.

use rand::Rng;
use rand_distr::{Distribution, Exp};

/// Key or value sizes, in bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Sizes {
    Fixed(u32),
    Uniform(u32, u32),
    /// Facebook ETC as measured by Atikoglu et al. (SIGMETRICS'12) and used by mutilate:
    /// keys ~ GEV(30.7984, 8.20449, 0.078688), values ~ GPareto(0, 214.476, 0.348238).
    EtcKey,
    EtcValue,
}

/// A memcached key is 1-250 bytes; perflearn-load's keys are memcached keys whatever the
/// protocol (a key size outside was clamped silently: fixed:0 and fixed:300 ran).
pub const KEY_SIZES: (u32, u32) = (1, 250);
/// A value is at most memcached's largest item (`-I 1024m`); a larger one no server stores.
pub const VALUE_SIZES: (u32, u32) = (0, 1 << 30);
/// ETC values are cut at 500 000 bytes (the distribution's tail is unbounded).
const ETC_VALUE_MAX: u32 = 500_000;

impl Sizes {
    /// "fixed:N", "uniform:A-B", or "etc" (keys or values, by `value`); sizes outside
    /// KEY_SIZES or VALUE_SIZES are refused.
    pub fn parse(s: &str, value: bool) -> Result<Sizes, String> {
        let bad = || format!("size distribution {s:?}: use fixed:N, uniform:A-B or etc");
        if s == "etc" {
            return Ok(if value { Sizes::EtcValue } else { Sizes::EtcKey });
        }
        let sizes = if let Some(n) = s.strip_prefix("fixed:") {
            n.parse().map(Sizes::Fixed).map_err(|_| bad())?
        } else if let Some(r) = s.strip_prefix("uniform:") {
            let (a, b) = r.split_once('-').ok_or_else(bad)?;
            let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            Sizes::Uniform(a, b)
        } else {
            s.parse().map(Sizes::Fixed).map_err(|_| bad())?
        };
        let ((lo, hi), what) = if value { (VALUE_SIZES, "a value") } else { (KEY_SIZES, "a key") };
        let (a, b) = sizes.bounds();
        if let Some(n) = [a, b].into_iter().find(|n| !(lo..=hi).contains(n)) {
            let why = if value { "memcached's largest item" } else { "memcached's limit" };
            return Err(format!("{s:?}: {what} is {lo} to {hi} bytes ({why}), not {n}"));
        }
        Ok(sizes)
    }

    /// The smallest and largest size drawn.
    pub fn bounds(&self) -> (u32, u32) {
        match *self {
            Sizes::Fixed(n) => (n, n),
            Sizes::Uniform(a, b) => (a, b),
            Sizes::EtcKey => KEY_SIZES,
            Sizes::EtcValue => (1, ETC_VALUE_MAX),
        }
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u32 {
        match *self {
            Sizes::Fixed(n) => n,
            Sizes::Uniform(a, b) => rng.gen_range(a..=b),
            Sizes::EtcKey => {
                let (mu, sigma, xi) = (30.7984f64, 8.20449f64, 0.078688f64);
                let u: f64 = rng.gen_range(1e-12..1.0);
                let x = mu + sigma * ((-u.ln()).powf(-xi) - 1.0) / xi;
                x.round().clamp(KEY_SIZES.0 as f64, KEY_SIZES.1 as f64) as u32
            }
            Sizes::EtcValue => {
                let (sigma, xi) = (214.476f64, 0.348238f64);
                let u: f64 = rng.gen_range(1e-12..1.0);
                let x = sigma * (u.powf(-xi) - 1.0) / xi;
                x.round().clamp(1.0, ETC_VALUE_MAX as f64) as u32
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    Poisson,
    Uniform,
}

impl Arrivals {
    pub fn parse(s: &str) -> Result<Arrivals, String> {
        match s {
            "poisson" | "exponential" => Ok(Arrivals::Poisson),
            "uniform" | "constant" => Ok(Arrivals::Uniform),
            _ => Err(format!("arrivals {s:?}: use poisson or uniform")),
        }
    }

    /// Seconds to the next request at `rate` requests/s.
    pub fn gap(&self, rate: f64, rng: &mut impl Rng) -> f64 {
        if rate <= 0.0 {
            return f64::INFINITY;
        }
        match self {
            Arrivals::Uniform => 1.0 / rate,
            Arrivals::Poisson => match Exp::new(rate) {
                Ok(e) => e.sample(rng),
                Err(_) => 1.0 / rate,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn parse_and_sample() {
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(Sizes::parse("fixed:32", false), Ok(Sizes::Fixed(32)));
        assert_eq!(Sizes::parse("uniform:5-9", true), Ok(Sizes::Uniform(5, 9)));
        assert!(Sizes::parse("uniform:9-5", true).is_err());
        assert!(Sizes::parse("zipf", true).is_err());
        assert_eq!(Sizes::parse("uniform:0-0", true), Ok(Sizes::Uniform(0, 0)));
        assert_eq!(Sizes::parse("250", false), Ok(Sizes::Fixed(250)));
        let keys: Vec<u32> = (0..10000).map(|_| Sizes::EtcKey.sample(&mut rng)).collect();
        let mean = keys.iter().map(|&k| k as f64).sum::<f64>() / keys.len() as f64;
        assert!((30.0..40.0).contains(&mean), "ETC key mean {mean}");
        let mut vals: Vec<u32> = (0..10000).map(|_| Sizes::EtcValue.sample(&mut rng)).collect();
        vals.sort();
        let median = vals[5000];
        assert!((50..200).contains(&median), "ETC value median {median}");
    }

    #[test]
    fn sizes_no_server_takes_are_refused_not_clamped() {
        // --key-size fixed:0 and fixed:300 ran, clamped silently to 1 and 250 bytes.
        assert_eq!(Sizes::parse("fixed:0", false).unwrap_err(), "\"fixed:0\": a key is 1 to 250 bytes (memcached's limit), not 0");
        assert_eq!(Sizes::parse("fixed:300", false).unwrap_err(), "\"fixed:300\": a key is 1 to 250 bytes (memcached's limit), not 300");
        assert!(Sizes::parse("uniform:0-16", false).unwrap_err().ends_with("not 0"));
        assert!(Sizes::parse("uniform:16-251", false).unwrap_err().ends_with("not 251"));
        assert!(Sizes::parse("300", false).is_err());
        assert_eq!(Sizes::parse("fixed:2000000000", true).unwrap_err(),
                   "\"fixed:2000000000\": a value is 0 to 1073741824 bytes (memcached's largest item), not 2000000000");
        assert!(Sizes::parse("uniform:10-4000000000", true).is_err());
        assert_eq!(Sizes::parse("fixed:1073741824", true), Ok(Sizes::Fixed(1 << 30)));
    }

    #[test]
    fn poisson_mean_gap() {
        let mut rng = SmallRng::seed_from_u64(2);
        let n = 100_000;
        let mean: f64 = (0..n).map(|_| Arrivals::Poisson.gap(1000.0, &mut rng)).sum::<f64>() / n as f64;
        assert!((mean - 0.001).abs() < 0.00003, "{mean}");
        assert_eq!(Arrivals::Uniform.gap(0.0, &mut rng), f64::INFINITY);
    }
}
