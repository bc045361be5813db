//! perflearn-load: open-loop load for memcached (binary, text), Redis and HTTP/1.1.
//! Output: one JSON line per interval on stdout, then a summary line.

use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use clap::Parser;
use perflearn_wire::load::dist::{Arrivals, Sizes};
use perflearn_wire::load::profile::Profile;
use perflearn_wire::load::request::{LoadProto, Workload};
use std::time::Duration;

use perflearn_wire::load::sched::{parse_cpus, Sched};
use perflearn_wire::load::{run, Options, SPIN_MARGIN};
use perflearn_wire::WireError;

#[derive(Parser, Debug)]
#[command(name = "perflearn-load", version, about = "Open-loop load generator (latency from the intended send time)")]
struct Args {
    /// Server address, host:port.
    #[arg(short = 's', long)]
    server: String,
    /// memcache-binary, memcache-ascii, redis, http.
    #[arg(short = 'p', long)]
    protocol: String,
    /// Target requests/s (constant profile; the peak of a steps profile).
    #[arg(short = 'r', long, default_value_t = 1000.0)]
    rate: f64,
    /// Seconds (constant profile).
    #[arg(short = 'd', long, default_value_t = 10.0)]
    duration: f64,
    /// constant, steps, or trace.
    #[arg(long, default_value = "constant")]
    profile: String,
    /// Steps profile: step size in percent of --rate (0 -> 100 -> 0).
    #[arg(long, default_value_t = 20.0)]
    step_pct: f64,
    /// Steps profile: seconds each step is held.
    #[arg(long, default_value_t = 10.0)]
    step_seconds: f64,
    /// Trace profile: file of "seconds rate" lines.
    #[arg(long)]
    trace: Option<String>,
    /// poisson or uniform inter-arrival times.
    #[arg(long, default_value = "poisson")]
    arrivals: String,
    #[arg(short = 'c', long, default_value_t = 8)]
    connections: usize,
    #[arg(short = 't', long, default_value_t = 1)]
    threads: usize,
    /// Distinct keys.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Key sizes: fixed:N, uniform:A-B, etc.
    #[arg(long, default_value = "fixed:16")]
    key_size: String,
    /// Value sizes: fixed:N, uniform:A-B, etc.
    #[arg(long, default_value = "fixed:32")]
    value_size: String,
    /// Fraction of sets (the rest are gets).
    #[arg(long, default_value_t = 0.1)]
    set_ratio: f64,
    /// HTTP path.
    #[arg(long, default_value = "/")]
    path: String,
    /// Set every key once before the run.
    #[arg(long)]
    preload: bool,
    /// Seconds per interval line.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Seconds to wait for replies after the last request.
    #[arg(long, default_value_t = 2.0)]
    drain: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin the send threads to these CPUs (thread i on the i-th, cycling): "1", "0,2-3".
    #[arg(long)]
    cpus: Option<String>,
    /// Run the send threads SCHED_FIFO at this priority (1-99; needs root or CAP_SYS_NICE).
    #[arg(long, num_args = 0..=1, default_missing_value = "10")]
    realtime: Option<u8>,
    /// Hold CPU wake-up latency at 0 during the run (/dev/cpu_dma_latency; needs root):
    /// idle CPUs poll instead of halting, so timers fire on time (as cyclictest does).
    #[arg(long)]
    pm_qos: bool,
    /// Microseconds before a send that a thread stops sleeping and spins.
    #[arg(long, default_value_t = SPIN_MARGIN.as_secs_f64() * 1e6)]
    spin_us: f64,
}

fn resolve(s: &str) -> Result<SocketAddr, WireError> {
    s.to_socket_addrs()
        .map_err(|e| WireError::new("--server", format!("{s:?}: {e}")))?
        .next()
        .ok_or_else(|| WireError::new("--server", format!("{s:?} resolves to no address")))
}

fn run_main(a: Args) -> Result<(), WireError> {
    let addr = resolve(&a.server)?;
    let proto = LoadProto::parse(&a.protocol).map_err(|e| WireError::new("--protocol", e))?;
    if !(a.rate.is_finite() && a.rate > 0.0) {
        return Err(WireError::new("--rate", "must be a positive number"));
    }
    let profile = match a.profile.as_str() {
        "constant" => Profile::Constant { rate: a.rate, duration: a.duration },
        "steps" => Profile::steps(a.rate, a.step_pct, a.step_seconds),
        "trace" => Profile::trace(a.trace.as_deref().ok_or_else(|| WireError::new("--trace", "the trace profile needs --trace FILE"))?)?,
        p => return Err(WireError::new("--profile", format!("{p:?}: use constant, steps or trace"))),
    };
    let workload = Workload {
        proto,
        keys: a.keys.max(1),
        key_sizes: Sizes::parse(&a.key_size, false).map_err(|e| WireError::new("--key-size", e))?,
        value_sizes: Sizes::parse(&a.value_size, true).map_err(|e| WireError::new("--value-size", e))?,
        set_ratio: a.set_ratio,
        path: a.path.clone(),
        host: a.server.clone(),
    };
    if a.realtime.is_some_and(|p| !(1..=99).contains(&p)) {
        return Err(WireError::new("--realtime", "priority must be 1-99"));
    }
    if !(a.spin_us.is_finite() && (0.0..=1e6).contains(&a.spin_us)) {
        return Err(WireError::new("--spin-us", "must be between 0 and 1000000"));
    }
    let cpus = match a.cpus.as_deref() {
        Some(c) => parse_cpus(c).map_err(|e| WireError::new("--cpus", e))?,
        None => Vec::new(),
    };
    let opts = Options {
        addr,
        workload,
        profile,
        arrivals: Arrivals::parse(&a.arrivals).map_err(|e| WireError::new("--arrivals", e))?,
        connections: a.connections,
        threads: a.threads,
        interval: a.interval,
        drain: a.drain,
        seed: a.seed,
        preload: a.preload,
        sched: Sched { cpus, realtime: a.realtime, pm_qos: a.pm_qos },
        spin: Duration::from_secs_f64(a.spin_us / 1e6),
    };
    let stdout = io::stdout();
    let mut on_line = |l: &str| {
        let mut o = stdout.lock();
        let _ = writeln!(o, "{l}");
        let _ = o.flush();
    };
    let report = run(opts, &mut on_line)?;
    let text = serde_json::to_string(&report).map_err(|e| WireError::new("output", e.to_string()))?;
    on_line(&text);
    Ok(())
}

fn main() -> ExitCode {
    match run_main(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perflearn-load: {e}");
            ExitCode::from(1)
        }
    }
}
