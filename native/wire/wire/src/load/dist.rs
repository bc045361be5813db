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

impl Sizes {
    /// "fixed:N", "uniform:A-B", or "etc" (keys or values, by `value`).
    pub fn parse(s: &str, value: bool) -> Result<Sizes, String> {
        let bad = || format!("size distribution {s:?}: use fixed:N, uniform:A-B or etc");
        if s == "etc" {
            return Ok(if value { Sizes::EtcValue } else { Sizes::EtcKey });
        }
        if let Some(n) = s.strip_prefix("fixed:") {
            return n.parse().map(Sizes::Fixed).map_err(|_| bad());
        }
        if let Some(r) = s.strip_prefix("uniform:") {
            let (a, b) = r.split_once('-').ok_or_else(bad)?;
            let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            return Ok(Sizes::Uniform(a, b));
        }
        if let Ok(n) = s.parse() {
            return Ok(Sizes::Fixed(n));
        }
        Err(bad())
    }

    pub fn sample(&self, rng: &mut impl Rng) -> u32 {
        match *self {
            Sizes::Fixed(n) => n,
            Sizes::Uniform(a, b) => rng.gen_range(a..=b),
            Sizes::EtcKey => {
                let (mu, sigma, xi) = (30.7984f64, 8.20449f64, 0.078688f64);
                let u: f64 = rng.gen_range(1e-12..1.0);
                let x = mu + sigma * ((-u.ln()).powf(-xi) - 1.0) / xi;
                x.round().clamp(1.0, 250.0) as u32
            }
            Sizes::EtcValue => {
                let (sigma, xi) = (214.476f64, 0.348238f64);
                let u: f64 = rng.gen_range(1e-12..1.0);
                let x = sigma * (u.powf(-xi) - 1.0) / xi;
                x.round().clamp(1.0, 500_000.0) as u32
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
        let keys: Vec<u32> = (0..10000).map(|_| Sizes::EtcKey.sample(&mut rng)).collect();
        let mean = keys.iter().map(|&k| k as f64).sum::<f64>() / keys.len() as f64;
        assert!((30.0..40.0).contains(&mean), "ETC key mean {mean}");
        let mut vals: Vec<u32> = (0..10000).map(|_| Sizes::EtcValue.sample(&mut rng)).collect();
        vals.sort();
        let median = vals[5000];
        assert!((50..200).contains(&median), "ETC value median {median}");
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
