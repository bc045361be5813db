//! perflearn-sniff: request latency from packets, from a pcap/pcapng file or an interface.
//! Output: JSON Lines on stdout ("ready", "interval", "tick", "clock_step", "summary", and "record" lines).

use std::fs::File;
use std::cell::RefCell;
use std::io::{self, BufWriter, Write};
use std::rc::Rc;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use perflearn_wire::analyzer::{Analyzer, Config};
use perflearn_wire::capture::clock::CaptureClock;
use perflearn_wire::capture::file::read_file;
use perflearn_wire::capture::Frame;
use perflearn_wire::capture::link;
use perflearn_wire::capture::live::{KernelStats, LiveCapture, LiveOptions};
use perflearn_wire::output::{Gauges, RecordFormat, Reporter};
use perflearn_wire::proto::Protocol;
use perflearn_wire::WireError;

#[derive(Parser, Debug)]
// Negative numbers are values ("--timeout -1" is a bad timeout, not an unknown flag "-1").
#[command(name = "perflearn-sniff", version, about = "Request latency measured from packets (pcap/pcapng files or live capture)", allow_negative_numbers = true)]
struct Args {
    /// Read a pcap or pcapng file.
    #[arg(short = 'r', long = "read", conflicts_with = "interface")]
    read: Option<PathBuf>,
    /// Capture live on this interface (needs root or CAP_NET_RAW).
    #[arg(short = 'i', long)]
    interface: Option<String>,
    /// BPF filter for live capture (tcpdump syntax).
    #[arg(short = 'f', long)]
    filter: Option<String>,
    /// Bytes kept per packet in live capture.
    #[arg(short = 's', long, default_value_t = 262144)]
    snaplen: i32,
    /// Kernel capture buffer, MiB.
    #[arg(long, default_value_t = 64)]
    buffer_mb: i32,
    /// auto, memcache, memcache-binary, memcache-ascii, redis, http, generic.
    #[arg(short = 'p', long, default_value = "auto")]
    protocol: Protocol,
    /// Server port (repeatable): only connections to these ports are analyzed.
    // Port 0 is no server's port: it selected nothing and the capture reported nothing.
    #[arg(long = "port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    ports: Vec<u16>,
    /// Aggregation interval, seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Also write a "tick" line (requests arrived, rate) every this many seconds, on the
    /// interval stream: a controller can react between intervals.
    #[arg(long)]
    tick: Option<f64>,
    /// Per-request records to this file ("-" for stdout).
    #[arg(long)]
    records: Option<String>,
    /// Format of the records file (default: csv if the file name ends in .csv).
    #[arg(long, value_parser = ["jsonl", "csv"])]
    format: Option<String>,
    /// Interval aggregates to this file ("-" for stdout, "none" to skip).
    #[arg(long, default_value = "-")]
    intervals: String,
    /// Outstanding requests with no response after this many seconds are evicted.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Most connections tracked at once; segments of further ones are dropped and counted.
    #[arg(long, default_value_t = 100_000)]
    max_flows: usize,
    /// Most outstanding requests per connection.
    #[arg(long, default_value_t = 10_000)]
    max_outstanding: usize,
    /// Live capture: stop after this many seconds. (SIGUSR1 marks the start of the measured
    /// phase: the summary then covers only what follows.)
    #[arg(long)]
    duration: Option<f64>,
    /// Live capture: at SIGUSR1, the mark's time is read from this file (seconds on the capture's
    /// clock, as interval lines carry them). One still ahead is kept until a packet or the clock
    /// reaches it, so the intervals start with a load that announced its start ahead, not
    /// when the signal arrived; one past, or none, marks at once.
    #[arg(long)]
    mark_file: Option<PathBuf>,
}

/// One buffered stdout shared by records, intervals and the summary, so lines never mix.
#[derive(Clone)]
struct SharedStdout(Rc<RefCell<BufWriter<io::Stdout>>>);

impl Write for SharedStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

thread_local! {
    static STDOUT: SharedStdout = SharedStdout(Rc::new(RefCell::new(BufWriter::with_capacity(1 << 16, io::stdout()))));
}

fn stdout() -> SharedStdout {
    STDOUT.with(|s| s.clone())
}

fn open_out(path: &str) -> Result<Box<dyn Write>, WireError> {
    if path == "-" {
        Ok(Box::new(stdout()))
    } else {
        let f = File::create(path).map_err(|e| WireError::usage(path, format!("cannot create: {e}")))?;
        Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
    }
}

fn secs_ns(s: f64, what: &str) -> Result<u64, WireError> {
    if !(s.is_finite() && s > 0.0) {
        return Err(WireError::usage(what, format!("must be a positive number of seconds, got {s}")));
    }
    Ok((s * 1e9) as u64)
}

/// A reporting period (--interval, --tick): at least MIN_REPORT_S, or one line per
/// nanosecond of capture floods the output (1e-9 was accepted).
const MIN_REPORT_S: f64 = 0.001;

fn report_ns(s: f64, what: &str) -> Result<u64, WireError> {
    if s.is_finite() && s > 0.0 && s < MIN_REPORT_S {
        return Err(WireError::usage(what, format!("must be at least {MIN_REPORT_S} s, got {s}")));
    }
    secs_ns(s, what)
}

fn run(args: Args) -> Result<(), WireError> {
    let interval_ns = report_ns(args.interval, "--interval")?;
    if args.snaplen <= 0 {
        return Err(WireError::usage("--snaplen", format!("must be a positive number of bytes, got {}", args.snaplen)));
    }
    if args.buffer_mb <= 0 {
        return Err(WireError::usage("--buffer-mb", format!("must be a positive number of MiB, got {}", args.buffer_mb)));
    }
    // Checked before capture starts; Duration would panic on NaN, infinity or overflow.
    let deadline = match args.duration {
        Some(d) => {
            secs_ns(d, "--duration")?;
            Some(Duration::try_from_secs_f64(d).map_err(|_| WireError::usage("--duration", format!("{d:e} seconds is too long")))?)
        }
        None => None,
    };
    let cfg = Config {
        protocol: args.protocol,
        server_ports: args.ports.clone(),
        timeout_ns: secs_ns(args.timeout, "--timeout")?,
        max_flows: args.max_flows.max(1),
        max_outstanding: args.max_outstanding.max(1),
        ..Config::default()
    };
    let records = match &args.records {
        None => None,
        Some(p) => {
            let csv = match args.format.as_deref() {
                Some("csv") => true,
                Some(_) => false,
                None => p.ends_with(".csv"),
            };
            Some((open_out(p)?, if csv { RecordFormat::Csv } else { RecordFormat::Jsonl }))
        }
    };
    let intervals = if args.intervals == "none" { None } else { Some(open_out(&args.intervals)?) };
    // The summary line always goes to stdout, last.
    let summary: Option<Box<dyn Write>> = Some(Box::new(stdout()));
    let mut reporter = Reporter::new(records, intervals, summary, interval_ns).map_err(|e| WireError::new("output", e.to_string()))?;
    let tick_ns = args.tick.map(|t| report_ns(t, "--tick")).transpose()?;
    if let Some(t) = tick_ns {
        reporter = reporter.with_ticks(t);
    }
    let mut analyzer = Analyzer::new(cfg);

    if let Some(path) = &args.read {
        if path.is_dir() {
            return Err(WireError::usage(path.display().to_string(), "is a directory, not a capture file"));
        }
        let mut last = 0u64;
        let stats = read_file(path, |frame| {
            // Output closed (`| head`): nobody reads the rest, skip the work.
            if !link::is_supported(frame.linktype) || reporter.failed() {
                return;
            }
            advance(&mut reporter, &analyzer, frame.ts, None);
            analyzer.frame(frame, &mut reporter);
            last = last.max(frame.ts);
        })?;
        analyzer.finish(last, &mut reporter);
        let matched = reporter.finish(&analyzer.counters(), gauges(&analyzer), None, Some(stats.truncated));
        if let Some(e) = reporter.take_error() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(()); // a closed stdout ends quietly, as for any filter
            }
            return Err(WireError::new("output", e.to_string()));
        }
        let where_ = path.display().to_string();
        if matched == 0 {
            warn(&where_, &no_match(&analyzer.counters(), stats.frames, "read"));
        }
        if stats.truncated {
            warn(&where_, "capture ends with a truncated packet (read up to the cut)");
        }
        return Ok(());
    }

    let Some(interface) = args.interface.clone() else {
        return Err(WireError::usage("arguments", "give --read FILE or --interface NAME"));
    };
    let opts = LiveOptions {
        interface: interface.clone(),
        filter: args.filter.clone(),
        snaplen: args.snaplen,
        buffer_bytes: args.buffer_mb.saturating_mul(1 << 20),
        timeout_ms: 10,
    };
    let mut cap = LiveCapture::open(&opts)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| WireError::new("signals", e.to_string()))?;
    }
    // Registered before the ready line: a mark sent after it is never the default action (exit).
    let mark = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&mark))
        .map_err(|e| WireError::new("signals", e.to_string()))?;
    // Times on the wall clock as it read now, moved on by the monotonic clock (clock.rs).
    let mut clock = CaptureClock::system();
    {
        let mut out = stdout();
        let ready = format!(
            "{{\"type\":\"ready\",\"interface\":{},\"linktype\":\"{}\",\"filter\":{},\"clock_offset\":{:.9}}}\n",
            serde_json_string(&interface),
            link::name(cap.linktype()),
            args.filter.as_deref().map(serde_json_string).unwrap_or_else(|| "null".into()),
            clock.offset_secs()
        );
        match out.write_all(ready.as_bytes()).and_then(|_| out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            r => r.map_err(|e| WireError::new("stdout", e.to_string()))?,
        }
    }
    let started = Instant::now();
    let mut kernel = KernelStats::default();
    let mut last_stats = Instant::now();
    // Close intervals (and ticks) on a timer too when packets pause.
    let timer = Duration::from_nanos(tick_ns.map_or(100_000_000, |t| (t / 2).clamp(1_000_000, 100_000_000)));
    // Packets reach us a little after their timestamp: close intervals that much later.
    let lag_ns = 20_000_000u64;
    reporter.clock(clock.now(), &analyzer.counters(), gauges(&analyzer), Some(&kernel));
    let mut scheduled: Option<u64> = None; // a mark's time still ahead (--mark-file)
    while !stop.load(Ordering::Relaxed) {
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        let mut frame_ts = None;
        let got = cap.next(&mut |frame| {
            let frame = Frame { ts: clock.place(frame.ts), ..frame };
            if let Some(at) = scheduled.filter(|&at| frame.ts >= at) {
                // the first packet at or past the mark: every one before it is counted
                reporter.mark(at, &analyzer.counters(), gauges(&analyzer), Some(&kernel));
                scheduled = None;
            }
            advance(&mut reporter, &analyzer, frame.ts, Some(&kernel));
            analyzer.frame(frame, &mut reporter);
            frame_ts = Some(frame.ts);
        })?;
        // the clocks compared after an empty wait and on the timer below, not per packet (a next() is one
        // packet, a comparison 124 ns); place() compares them itself on a stamp past now or behind the last
        if !got {
            clock.check();
        }
        if mark.swap(false, Ordering::Relaxed) {
            // now, or the time --mark-file gives when still ahead: the first packet stamped at or past it
            // marks it (above), or the clock does
            let now = clock.now();
            scheduled = Some(args.mark_file.as_deref().and_then(mark_time).filter(|&at| at > now).unwrap_or(now));
        }
        if let Some(at) = scheduled.filter(|&at| clock.now().saturating_sub(lag_ns) >= at) {
            // no packet reached it, the clock did, by as much as packets arrive late; packets stamped
            // before the mark may still wait in the kernel buffer: take them first
            drain(&mut cap, &mut clock, &mut analyzer, &mut reporter, &kernel, at, Duration::from_millis(50))?;
            reporter.mark(at, &analyzer.counters(), gauges(&analyzer), Some(&kernel));
            scheduled = None;
        }
        if last_stats.elapsed() >= timer {
            last_stats = Instant::now();
            clock.check();
            if let Ok(k) = cap.stats() {
                kernel = k;
            }
            let closed_by = clock.now().saturating_sub(lag_ns);
            // Behind the kernel's buffer (the frame just read is older than that), frames still
            // waiting belong to the intervals the wall clock would close: they close them
            // themselves. A capture stopped or starved for a while put its backlog in the
            // interval it resumed in (8 000 requests of a 6-s SIGSTOP in one 1-s interval).
            if frame_ts.is_none_or(|ts| ts >= closed_by) {
                reporter.clock(closed_by, &analyzer.counters(), gauges(&analyzer), Some(&kernel));
            }
        }
        say_steps(&mut clock, &mut reporter);
        if let Some(e) = reporter.take_error() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(WireError::new("output", e.to_string()));
        }
    }
    // Let packets already in the kernel buffer arrive.
    // Three empty waits (30 ms), not one: a TPACKET_V3 block is handed over when full or when the
    // kernel's block timer retires it, which a loaded host can run late; stopping at the first empty
    // wait lost the last 256 of 3 008 pipelined GETs once in a full test run.
    drain_patiently(&mut cap, &mut clock, &mut analyzer, &mut reporter, &kernel, u64::MAX, Duration::from_millis(100), 3)?;
    say_steps(&mut clock, &mut reporter);
    if let Ok(k) = cap.stats() {
        kernel = k;
    }
    let now = clock.now();
    analyzer.finish(now, &mut reporter);
    let matched = reporter.finish(&analyzer.counters(), gauges(&analyzer), Some(&kernel), None);
    if let Some(e) = reporter.take_error() {
        if e.kind() != io::ErrorKind::BrokenPipe {
            return Err(WireError::new("output", e.to_string()));
        }
        return Ok(());
    }
    if matched == 0 {
        let c = analyzer.counters();
        warn(&format!("interface {interface}"), &no_match(&c, c.frames, "captured"));
    }
    Ok(())
}

/// A mark's time from `--mark-file` (seconds on the capture's clock), in ns; None when the
/// file is missing or holds no positive number (the mark is then made at once).
fn mark_time(path: &Path) -> Option<u64> {
    let secs: f64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0).then(|| (secs * 1e9) as u64)
}

/// Each step of the wall clock seen: a warning, and a line on the interval stream.
fn say_steps(clock: &mut CaptureClock, reporter: &mut Reporter) {
    for step in clock.take_steps() {
        let at = clock.now();
        reporter.clock_step(at, step);
        let way = if step < 0 { "back" } else { "forward" };
        warn("clock", &format!("the wall clock stepped {way} {:.3} s; the capture's times keep to the monotonic clock",
                               step.unsigned_abs() as f64 / 1e9));
    }
}

/// A warning on stderr, one line; the run still succeeds (its summary says the same).
fn warn(where_: &str, what: &str) {
    eprintln!("perflearn-sniff: warning: {where_}: {what}");
}

/// Why the summary has no latency: nothing matched, or requests but no response to them.
fn no_match(c: &perflearn_wire::record::Counters, frames: u64, how: &str) -> String {
    if c.requests == 0 {
        format!("no request matched ({frames} frames {how})")
    } else {
        format!("no request matched a response ({frames} frames {how}, {} requests seen)", c.requests)
    }
}

/// What the interval lines report besides latencies: requests awaiting their response and
/// open connections, at the moment an interval closes.
fn gauges(analyzer: &Analyzer) -> Gauges {
    Gauges { outstanding: analyzer.outstanding() as u64, flows: analyzer.flows() as u64 }
}

/// A packet's capture time reached the reporter. The gauges walk every connection, so they
/// are read only when a tick or an interval closes (until then the time is only noted);
/// without them an interval closed by a packet said 0 requests outstanding, however many were.
fn advance(reporter: &mut Reporter, analyzer: &Analyzer, ts: u64, kernel: Option<&KernelStats>) {
    if reporter.due(ts) {
        reporter.clock(ts, &analyzer.counters(), gauges(analyzer), kernel);
    } else {
        reporter.observe(ts);
    }
}

/// Take the packets waiting in the kernel buffer, up to the first stamped at or after
/// `before`, for at most `budget`.
fn drain(cap: &mut LiveCapture, clock: &mut CaptureClock, analyzer: &mut Analyzer, reporter: &mut Reporter,
         kernel: &KernelStats, before: u64, budget: Duration) -> Result<(), WireError> {
    drain_patiently(cap, clock, analyzer, reporter, kernel, before, budget, 1)
}

/// As `drain`, giving up after `patience` waits in a row that brought no frame.
#[allow(clippy::too_many_arguments)]
fn drain_patiently(cap: &mut LiveCapture, clock: &mut CaptureClock, analyzer: &mut Analyzer, reporter: &mut Reporter,
                   kernel: &KernelStats, before: u64, budget: Duration, patience: u32) -> Result<(), WireError> {
    let until = Instant::now() + budget;
    let mut newest = 0u64;
    let mut empty = 0;
    while newest < before && Instant::now() < until {
        let got = cap.next(&mut |frame| {
            let frame = Frame { ts: clock.place(frame.ts), ..frame };
            advance(&mut *reporter, &*analyzer, frame.ts, Some(kernel));
            analyzer.frame(frame, &mut *reporter);
            newest = frame.ts;
        })?;
        empty = if got { 0 } else { empty + 1 };
        if empty >= patience {
            break;
        }
    }
    Ok(())
}

fn serde_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
            eprintln!("perflearn-sniff: {}", clap_line(&e));
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perflearn-sniff: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(args: &[&str]) -> String {
        // Never opened: every case is refused before the file is read.
        let base = ["perflearn-sniff", "-r", "capture.pcap"];
        match Args::try_parse_from(base.iter().chain(args)) {
            Ok(a) => run(a).unwrap_err().to_string(),
            Err(e) => clap_line(&e),
        }
    }

    #[test]
    fn out_of_range_numbers_are_one_line_naming_the_option() {
        assert!(refused(&["--interval", "-1"]).starts_with("--interval: must be a positive number of seconds"));
        assert!(refused(&["--interval", "1e-9"]).starts_with("--interval: must be at least 0.001 s"));
        assert!(refused(&["--tick", "0.0001"]).starts_with("--tick: must be at least 0.001 s"));
        assert!(refused(&["--timeout", "-1"]).starts_with("--timeout: must be a positive number of seconds"));
        assert!(refused(&["--snaplen", "-5"]).starts_with("--snaplen: must be a positive number of bytes"));
        assert!(refused(&["--buffer-mb", "0"]).starts_with("--buffer-mb:"));
        assert_eq!(refused(&["--port", "70000"]), "invalid value '70000' for '--port <PORT>': 70000 is not in 1..=65535");
        assert_eq!(refused(&["--port", "-1"]), "invalid value '-1' for '--port <PORT>': -1 is not in 1..=65535");
        // Port 0 selected no connection: the run reported nothing, exit 0.
        assert_eq!(refused(&["--port", "0"]), "invalid value '0' for '--port <PORT>': 0 is not in 1..=65535");
    }

    #[test]
    fn a_duration_that_would_panic_is_refused() {
        // Fuzzing: --duration inf panicked converting to a Duration once capture had started.
        for d in ["-1", "0", "nan", "inf"] {
            assert!(refused(&["--duration", d]).starts_with("--duration: must be a positive number of seconds"), "{d}");
        }
        assert_eq!(refused(&["--duration", "1e300"]), "--duration: 1e300 seconds is too long");
    }

    #[test]
    fn bad_values_exit_2() {
        // They exited 1, as a run that failed does; perflearn's bad usage is exit 2.
        let base = ["perflearn-sniff", "-r", "capture.pcap"];
        for args in [&["--interval", "-1"][..], &["--tick", "0.0001"], &["--timeout", "0"], &["--snaplen", "-5"],
                     &["--duration", "nan"], &["--records", "/nonexistent/dir/r.csv"]] {
            let e = run(Args::try_parse_from(base.iter().chain(args)).unwrap()).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        let e = run(Args::try_parse_from(["perflearn-sniff", "-r", "/nonexistent.pcap"]).unwrap()).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        let e = run(Args::try_parse_from(["perflearn-sniff"]).unwrap()).unwrap_err();
        assert_eq!((e.exit_code(), e.to_string().as_str()), (2, "arguments: give --read FILE or --interface NAME"));
    }

    #[test]
    fn a_directory_is_named_as_one() {
        let dir = std::env::temp_dir();
        let e = run(Args::try_parse_from(["perflearn-sniff", "-r", dir.to_str().unwrap()]).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: is a directory, not a capture file", dir.display()));
    }
}
