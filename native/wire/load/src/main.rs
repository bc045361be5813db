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

use perflearn_wire::load::sched::{check_cpus, parse_cpus, Sched};
use perflearn_wire::load::{run, Options, SPIN_MARGIN};
use perflearn_wire::WireError;

#[derive(Parser, Debug)]
// Negative numbers are values ("-r -5" is a bad rate, not an unknown flag "-5").
#[command(name = "perflearn-load", version, about = "Open-loop load generator (latency from the intended send time)", allow_negative_numbers = true)]
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
    /// Key sizes: fixed:N, uniform:A-B, etc (a key is 1-250 bytes).
    #[arg(long, default_value = "fixed:16")]
    key_size: String,
    /// Value sizes: fixed:N, uniform:A-B, etc (a value is 0-1073741824 bytes).
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
    /// Random seed of the arrivals, keys, operations and sizes (the same seed, the same requests).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin the send threads to these CPUs (thread i on the i-th, cycling): "1", "0,2-3".
    #[arg(long)]
    cpus: Option<String>,
    /// Run the send threads SCHED_FIFO at this priority (1-99, 10 when omitted; needs root or CAP_SYS_NICE).
    #[arg(long, num_args = 0..=1, default_missing_value = "10", value_name = "PRIO")]
    realtime: Option<u8>,
    /// Hold CPU wake-up latency at 0 during the run (/dev/cpu_dma_latency; needs root):
    /// idle CPUs poll instead of halting, so timers fire on time (as cyclictest does).
    #[arg(long)]
    pm_qos: bool,
    /// Microseconds before a send that a thread stops sleeping and spins.
    #[arg(long, default_value_t = SPIN_MARGIN.as_secs_f64() * 1e6)]
    spin_us: f64,
    /// Start the profile this many seconds after the start line, which gives its time on the
    /// monotonic clock: a reader has that long to act on it first (perflearn manage marks the
    /// capture's intervals at it).
    #[arg(long, default_value_t = 0.0)]
    start_in: f64,
}

/// A send thread issues each request with a write(2) of its own, a microsecond at the
/// least: a rate above this per thread can never be met, only fallen behind on.
const MAX_RATE_PER_THREAD: f64 = 1e6;

fn resolve(s: &str) -> Result<SocketAddr, WireError> {
    s.to_socket_addrs()
        .map_err(|e| {
            // Not host:port is a bad value; a failed name lookup may be the resolver's.
            let what = if e.kind() == io::ErrorKind::InvalidInput { WireError::usage } else { WireError::new };
            what("--server", format!("{s:?}: {e}"))
        })?
        .next()
        .ok_or_else(|| WireError::usage("--server", format!("{s:?} resolves to no address")))
}

fn run_main(a: Args) -> Result<(), WireError> {
    let proto = LoadProto::parse(&a.protocol).map_err(|e| WireError::usage("--protocol", e))?;
    if !(a.rate.is_finite() && a.rate > 0.0) {
        return Err(WireError::usage("--rate", format!("must be a positive number, got {}", a.rate)));
    }
    // Checked whatever the profile: a bad value is a mistake even where it is unused.
    positive_secs(a.duration, "--duration")?;
    positive_secs(a.step_seconds, "--step-seconds")?;
    if !(a.interval.is_finite() && a.interval >= 0.001) {  // one line per interval: 1e-9 floods the output
        return Err(WireError::usage("--interval", format!("must be at least 0.001 s, got {}", a.interval)));
    }
    if !(a.step_pct >= 1.0 && a.step_pct <= 100.0) {  // below 1 the steps profile used 1, silently
        return Err(WireError::usage("--step-pct", format!("must be between 1 and 100, got {}", a.step_pct)));
    }
    if !(0.0..=1.0).contains(&a.set_ratio) {
        return Err(WireError::usage("--set-ratio", format!("must be between 0 and 1, got {}", a.set_ratio)));
    }
    if !(a.drain.is_finite() && a.drain >= 0.0) {
        return Err(WireError::usage("--drain", format!("must be a non-negative number of seconds, got {}", a.drain)));
    }
    let profile = match a.profile.as_str() {
        "constant" => Profile::Constant { rate: a.rate, duration: a.duration },
        "steps" => Profile::steps(a.rate, a.step_pct, a.step_seconds),
        "trace" => Profile::trace(a.trace.as_deref().ok_or_else(|| WireError::usage("--trace", "the trace profile needs --trace FILE"))?)?,
        p => return Err(WireError::usage("--profile", format!("{p:?}: use constant, steps or trace"))),
    };
    check_thread_rate(&profile, a.connections, a.threads)?;
    if a.keys == 0 {  // was made 1, silently
        return Err(WireError::usage("--keys", "must be at least 1, got 0"));
    }
    let key_sizes = Sizes::parse(&a.key_size, false).map_err(|e| WireError::usage("--key-size", e))?;
    check_key_names(&key_sizes, &a.key_size, a.keys)?;
    // A space or a line break would end the request line early (or add header lines).
    if !a.path.starts_with('/') || a.path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(WireError::usage("--path", format!("{:?}: must start with / and hold no space or control character", a.path)));
    }
    let workload = Workload {
        proto,
        keys: a.keys,
        key_sizes,
        value_sizes: Sizes::parse(&a.value_size, true).map_err(|e| WireError::usage("--value-size", e))?,
        set_ratio: a.set_ratio,
        path: a.path.clone(),
        host: a.server.clone(),
    };
    let arrivals = Arrivals::parse(&a.arrivals).map_err(|e| WireError::usage("--arrivals", e))?;
    if a.realtime.is_some_and(|p| !(1..=99).contains(&p)) {
        return Err(WireError::usage("--realtime", "priority must be 1-99"));
    }
    if !(a.spin_us.is_finite() && (0.0..=1e6).contains(&a.spin_us)) {
        return Err(WireError::usage("--spin-us", "must be between 0 and 1000000"));
    }
    if !(a.start_in.is_finite() && (0.0..=60.0).contains(&a.start_in)) {
        return Err(WireError::usage("--start-in", "must be between 0 and 60 seconds"));
    }
    let cpus = match a.cpus.as_deref() {
        Some(c) => {
            let cpus = parse_cpus(c).map_err(|e| WireError::usage("--cpus", e))?;
            check_cpus(&cpus).map_err(|e| WireError::usage("--cpus", e))?;
            cpus
        }
        None => Vec::new(),
    };
    // Last: the options above are refused the same way whether the server is up or not.
    let addr = resolve(&a.server)?;
    let opts = Options {
        addr,
        workload,
        profile,
        arrivals,
        connections: a.connections,
        threads: a.threads,
        interval: a.interval,
        drain: a.drain,
        seed: a.seed,
        preload: a.preload,
        sched: Sched { cpus, realtime: a.realtime, pm_qos: a.pm_qos },
        spin: Duration::from_secs_f64(a.spin_us / 1e6),
        start_in: Duration::from_secs_f64(a.start_in),
    };
    let stdout = io::stdout();
    let mut on_line = |l: &str| {
        let mut o = stdout.lock();
        if let Err(e) = writeln!(o, "{l}").and_then(|_| o.flush()) {
            if e.kind() == io::ErrorKind::BrokenPipe {
                // Nobody reads the results (`| head`): stop loading the server, quietly.
                std::process::exit(0);
            }
        }
    };
    let report = run(opts, &mut on_line)?;
    let text = serde_json::to_string(&report).map_err(|e| WireError::new("output", e.to_string()))?;
    on_line(&text);
    // The summary is out; a run whose connections broke or that got no answer still fails.
    match report.failure(a.connections) {
        Some(why) => Err(WireError::new(&a.server, why)),
        None => Ok(()),
    }
}

fn positive_secs(s: f64, what: &str) -> Result<(), WireError> {
    if s.is_finite() && s > 0.0 {
        Ok(())
    } else {
        Err(WireError::usage(what, format!("must be a positive number of seconds, got {s}")))
    }
}

/// Keys are named k0, k1, ... and padded to their size: a size shorter than the longest
/// name (k9999 for --keys 10000) would give longer keys than asked for.
fn check_key_names(sizes: &Sizes, spec: &str, keys: u64) -> Result<(), WireError> {
    let longest = format!("k{}", keys - 1);
    let (smallest, _) = sizes.bounds();
    if matches!(sizes, Sizes::Fixed(_) | Sizes::Uniform(..)) && (smallest as usize) < longest.len() {
        return Err(WireError::usage(
            "--key-size",
            format!("{spec:?}: the keys of --keys {keys} are named k0 ... {longest}, up to {} bytes; give sizes of at least {} or fewer --keys",
                    longest.len(), longest.len()),
        ));
    }
    Ok(())
}

/// Refuse a peak rate no send thread could issue (see MAX_RATE_PER_THREAD): the run
/// would only build a backlog.
fn check_thread_rate(profile: &Profile, connections: usize, threads: usize) -> Result<(), WireError> {
    let peak = match profile {
        Profile::Constant { rate, .. } => *rate,
        Profile::Steps { max_rate, .. } => *max_rate,
        Profile::Trace { points, .. } => points.iter().map(|p| p.1).fold(0.0, f64::max),
    };
    if connections == 0 || threads == 0 {
        return Ok(()); // refused by the engine, naming both options
    }
    // As the engine spreads them: connections over threads, the rate by connections.
    let threads = threads.min(connections);
    let share = connections.div_ceil(threads) as f64 / connections as f64;
    if peak * share > MAX_RATE_PER_THREAD {
        let need = (peak / MAX_RATE_PER_THREAD).ceil();
        return Err(WireError::usage(
            "--rate",
            format!("{peak} requests/s is more than {threads} send thread(s) can issue ({MAX_RATE_PER_THREAD} per thread, one write(2) per request); use at least {need} --threads and --connections"),
        ));
    }
    Ok(())
}

/// clap's error as one line (perflearn_wire::error::one_line).
fn clap_line(e: &clap::Error) -> String {
    perflearn_wire::error::one_line(&e.to_string())
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            eprintln!("perflearn-load: {}", clap_line(&e));
            return ExitCode::from(2);
        }
    };
    match run_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perflearn-load: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(args: &[&str]) -> String {
        let base = ["perflearn-load", "-s", "127.0.0.1:1", "-p", "memcache-binary"];
        let a = Args::try_parse_from(base.iter().chain(args)).map_err(|e| clap_line(&e)).unwrap();
        run_main(a).unwrap_err().to_string()
    }

    #[test]
    fn negative_numbers_are_values_not_flags() {
        assert_eq!(refused(&["-r", "-5"]), "--rate: must be a positive number, got -5");
        assert!(refused(&["-d", "-1"]).starts_with("--duration: must be a positive number of seconds, got -1"));
        let e = Args::try_parse_from(["perflearn-load", "-s", "x", "-p", "redis", "-c", "-1"]).unwrap_err();
        assert_eq!(clap_line(&e), "invalid value '-1' for '--connections <CONNECTIONS>': invalid digit found in string");
    }

    #[test]
    fn clap_errors_are_one_line() {
        let e = Args::try_parse_from(["perflearn-load"]).unwrap_err();
        let line = clap_line(&e);
        assert!(!line.contains('\n') && line.contains("--server <SERVER>") && line.contains("--protocol <PROTOCOL>"), "{line}");
    }

    #[test]
    fn values_that_run_nothing_or_make_no_sense_are_refused() {
        assert!(refused(&["--set-ratio", "2"]).starts_with("--set-ratio: must be between 0 and 1"));
        assert!(refused(&["--interval", "1e-9"]).starts_with("--interval: must be at least 0.001 s"));
        assert!(refused(&["--interval", "nan"]).starts_with("--interval: must be at least 0.001 s"));
        assert!(refused(&["--set-ratio", "-0.5"]).starts_with("--set-ratio:"));
        assert!(refused(&["--set-ratio", "nan"]).starts_with("--set-ratio:"));
        assert!(refused(&["-d", "0"]).starts_with("--duration:"));
        assert!(refused(&["-d", "inf"]).starts_with("--duration:"));
        assert!(refused(&["--profile", "steps", "--step-seconds", "0"]).starts_with("--step-seconds:"));
        assert!(refused(&["--step-pct", "0"]).starts_with("--step-pct:"));
        assert!(refused(&["--drain", "nan"]).starts_with("--drain:"));
    }

    #[test]
    fn key_and_value_sizes_out_of_range_are_refused_not_clamped() {
        // fixed:0 and fixed:300 ran, clamped silently to 1 and 250 bytes.
        assert_eq!(refused(&["--key-size", "fixed:0"]), "--key-size: \"fixed:0\": a key is 1 to 250 bytes (memcached's limit), not 0");
        assert_eq!(refused(&["--key-size", "fixed:300"]), "--key-size: \"fixed:300\": a key is 1 to 250 bytes (memcached's limit), not 300");
        assert!(refused(&["--key-size", "uniform:10-251"]).starts_with("--key-size: \"uniform:10-251\": a key is 1 to 250 bytes"));
        assert!(refused(&["--value-size", "fixed:2000000000"]).starts_with("--value-size: \"fixed:2000000000\": a value is 0 to 1073741824 bytes"));
        // k9999 is 5 bytes: fixed:3 gave keys of 2 to 5 bytes
        assert_eq!(refused(&["--key-size", "fixed:3"]),
                   "--key-size: \"fixed:3\": the keys of --keys 10000 are named k0 ... k9999, up to 5 bytes; give sizes of at least 5 or fewer --keys");
        assert!(!refused(&["--key-size", "fixed:3", "--keys", "100", "-d", "0.1"]).starts_with("--key-size"), "k99 fits in 3 bytes");
        assert_eq!(refused(&["--keys", "0"]), "--keys: must be at least 1, got 0");
        assert!(refused(&["--path", "/a b"]).starts_with("--path: \"/a b\": must start with /"));
        assert!(refused(&["--path", "x"]).starts_with("--path:"));
        assert!(refused(&["--step-pct", "0.5"]).starts_with("--step-pct: must be between 1 and 100"));
    }

    #[test]
    fn bad_values_exit_2_failures_exit_1() {
        let bad = |args: &[&str]| {
            let base = ["perflearn-load", "-s", "127.0.0.1:1", "-p", "memcache-binary"];
            run_main(Args::try_parse_from(base.iter().chain(args)).unwrap()).unwrap_err()
        };
        for args in [&["--key-size", "fixed:0"][..], &["-r", "-5"], &["--keys", "0"], &["--profile", "x"], &["--trace", "/nonexistent", "--profile", "trace"]] {
            assert_eq!(bad(args).exit_code(), 2, "{args:?}");
        }
        let e = run_main(Args::try_parse_from(["perflearn-load", "-s", "localhost", "-p", "redis"]).unwrap()).unwrap_err();
        assert_eq!((e.exit_code(), e.where_.as_str()), (2, "--server"), "no port: {e}");
        // nothing listens on port 1: a failure of the run, not of its arguments
        let e = bad(&["-d", "0.1"]);
        assert_eq!(e.exit_code(), 1, "{e}");
    }

    #[test]
    fn a_rate_no_send_thread_can_issue_is_refused() {
        // Fuzzing: -r 1e12 -d 0.5 caught up for ever; -r 1e7 -d 0.5 ran 10.8 s in 590 MB.
        for r in ["1e12", "1e7"] {
            let e = refused(&["-r", r, "-d", "0.5"]);
            assert!(e.starts_with("--rate:") && e.contains("--threads"), "{e}");
        }
        // Spread over enough threads it is the engine's to try.
        let ok = Profile::Constant { rate: 4e6, duration: 1.0 };
        assert!(check_thread_rate(&ok, 4, 4).is_ok());
        assert!(check_thread_rate(&ok, 3, 4).is_err(), "3 connections: 3 threads");
        let steps = Profile::steps(2e6, 20.0, 1.0);
        assert!(check_thread_rate(&steps, 8, 1).is_err());
    }
}
