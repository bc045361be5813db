//! How the generator's threads are scheduled: CPU pinning, SCHED_FIFO, timer slack.
//! Every send thread asks for a 1 ns timer slack (the default 50 µs lets the kernel
//! fire a timer that much late, more than the spin margin); pinning and real-time
//! priority are the user's choice, and the report says which were in force.

use std::num::NonZeroU64;

use serde::Serialize;

/// Requested scheduling for the generator's send threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sched {
    /// CPUs to pin to: thread i runs on `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
    /// SCHED_FIFO priority (1-99); None: the normal time-sharing policy.
    pub realtime: Option<u8>,
    /// Hold the CPU-idle latency at 0 for the run (PM QoS, /dev/cpu_dma_latency).
    pub pm_qos: bool,
}

/// What was applied, as recorded in the report.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Applied {
    pub cpus: Vec<usize>,
    pub realtime_priority: Option<u8>,
    pub timer_slack_ns: u64,
}

/// Parse a CPU list: "1", "0,2", "2-3", "0,2-3".
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let max = rustix::thread::CpuSet::MAX_CPU;
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
            return Err(format!("{s:?}: use CPU numbers and ranges, e.g. 1 or 0,2-3"));
        };
        if a > b || b >= max {
            return Err(format!("{s:?}: bad range {part:?}"));
        }
        out.extend(a..=b);
    }
    out.dedup();
    Ok(out)
}

/// Refuse, before the run starts, a CPU this process may not run on: a send thread
/// failing to pin to it ended the run after its start line had been written.
pub fn check_cpus(cpus: &[usize]) -> Result<(), String> {
    let Ok(allowed) = rustix::thread::sched_getaffinity(None) else { return Ok(()) }; // the threads will say
    let max = rustix::thread::CpuSet::MAX_CPU;
    let ok: Vec<usize> = (0..max).filter(|&c| allowed.is_set(c)).collect();
    match cpus.iter().find(|&&c| c >= max || !allowed.is_set(c)) {
        None => Ok(()),
        Some(c) => Err(format!("cannot pin to CPU {c}: not one this process may use ({})", cpu_list(&ok))),
    }
}

/// CPUs as ranges, "0-3,6".
fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// Apply `sched` to the calling thread (the `index`-th send thread).
pub fn apply(sched: &Sched, index: usize) -> Result<Applied, String> {
    let slack_ok = rustix::thread::set_current_timer_slack(NonZeroU64::new(1)).is_ok();
    let mut cpus = Vec::new();
    if !sched.cpus.is_empty() {
        let cpu = sched.cpus[index % sched.cpus.len()];
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
        cpus.push(cpu);
    }
    if let Some(prio) = sched.realtime {
        set_fifo(prio).map_err(|e| format!("cannot use SCHED_FIFO priority {prio}: {e} (needs root or CAP_SYS_NICE)"))?;
    }
    let timer_slack_ns = rustix::thread::current_timer_slack().ok().filter(|_| slack_ok).unwrap_or(50_000);
    Ok(Applied { cpus, realtime_priority: sched.realtime, timer_slack_ns })
}

/// Ask the kernel for zero CPU wake-up latency (PM QoS) until the returned file is
/// closed, as cyclictest does: idle CPUs then poll instead of halting. On a VM a halted
/// vCPU takes tens of µs, sometimes hundreds, to wake for a timer, which is most of the
/// late sends of an otherwise idle generator.
pub fn hold_pm_qos() -> Result<std::fs::File, String> {
    use std::io::Write;
    let path = "/dev/cpu_dma_latency";
    let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    f.write_all(&0i32.to_ne_bytes()).map_err(|e| format!("cannot write {path}: {e}"))?;
    Ok(f)
}

/// SCHED_FIFO for the calling thread (rustix has no sched_setscheduler).
#[allow(unsafe_code)]
fn set_fifo(prio: u8) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: i32::from(prio) };
    // SAFETY: FFI boundary; pid 0 is the calling thread and `param` outlives the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("1").unwrap(), vec![1]);
        assert_eq!(parse_cpus("0, 2-3").unwrap(), vec![0, 2, 3]);
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("").is_err());
    }

    #[test]
    fn a_cpu_this_process_may_not_use_is_refused_up_front() {
        assert!(check_cpus(&[0]).is_ok());
        let e = check_cpus(&[0, 1000]).unwrap_err();
        assert!(e.starts_with("cannot pin to CPU 1000: not one this process may use (0"), "{e}");
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn pm_qos_holds_zero_wake_up_latency_while_open() {
        use std::io::Read;
        let read = || -> Option<i32> {
            let mut b = [0u8; 4];
            std::fs::File::open("/dev/cpu_dma_latency").ok()?.read_exact(&mut b).ok()?;
            Some(i32::from_ne_bytes(b))
        };
        match hold_pm_qos() {
            Ok(held) => {
                assert_eq!(read(), Some(0)); // the kernel's current target while we hold it
                drop(held);
            }
            Err(e) => assert!(e.contains("/dev/cpu_dma_latency"), "{e}"), // no root, or no PM QoS
        }
    }

    #[test]
    fn slack_and_pinning_apply_to_this_thread() {
        let got = std::thread::spawn(|| apply(&Sched { cpus: vec![0], realtime: None, pm_qos: false }, 3)).join().unwrap().unwrap();
        assert_eq!(got.cpus, vec![0]);
        assert_eq!(got.timer_slack_ns, 1);
        assert_eq!(got.realtime_priority, None);
    }
}
