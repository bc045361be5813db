//! Live capture on an interface through libpcap (the `pcap` crate is the FFI boundary).

use super::Frame;
use crate::error::{Result, WireError};

#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub interface: String,
    pub filter: Option<String>,
    pub snaplen: i32,
    /// Kernel ring buffer, bytes.
    pub buffer_bytes: i32,
    /// How long a read waits before returning with no packet, ms.
    pub timeout_ms: i32,
}

/// Kernel counters since the capture started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelStats {
    pub received: u64,
    pub dropped: u64,
    pub if_dropped: u64,
}

pub struct LiveCapture {
    cap: pcap::Capture<pcap::Active>,
    linktype: u32,
    where_: String,
    /// The capture is non-blocking and waits on its descriptor here, so a quiet
    /// interface never blocks the interval clock.
    poll: mio::Poll,
    events: mio::Events,
    wait: std::time::Duration,
}

/// Why a capture did not start, in the user's terms: a name that is no interface (libpcap
/// says "No such device exists", which read as a permissions problem under the old
/// "needs root" prefix; a bad argument, exit 2), missing rights, or libpcap's own words.
fn why_not_open(where_: &str, interface: &str, e: pcap::Error) -> WireError {
    if let Ok(devices) = pcap::Device::list() {
        if !devices.iter().any(|d| d.name == interface) {
            let mut names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).take(8).collect();
            if devices.len() > names.len() {
                names.push("...");
            }
            return WireError::usage(where_, format!("no such interface (there are: {})", names.join(", ")));
        }
    }
    let text = e.to_string();
    if text.contains("ermission") || text.contains("not permitted") {
        WireError::new(where_, format!("cannot start capture (needs root or CAP_NET_RAW): {text}"))
    } else {
        WireError::new(where_, format!("cannot start capture: {text}"))
    }
}

impl LiveCapture {
    pub fn open(opts: &LiveOptions) -> Result<Self> {
        let where_ = format!("interface {}", opts.interface);
        let err = |what: &str, e: pcap::Error| WireError::new(&where_, format!("{what}: {e}"));
        let cap = pcap::Capture::from_device(opts.interface.as_str())
            .map_err(|e| err("cannot open", e))?
            .snaplen(opts.snaplen)
            .timeout(opts.timeout_ms)
            // Not immediate: TPACKET_V3 blocks hold variable-size frames (a 64 MiB ring
            // holds hundreds of thousands of small packets) and are handed over when
            // full or after `timeout_ms`.
            .immediate_mode(false)
            .buffer_size(opts.buffer_bytes)
            .precision(pcap::Precision::Nano)
            .promisc(false)
            .open()
            .map_err(|e| why_not_open(&where_, &opts.interface, e))?;
        let mut cap = cap.setnonblock().map_err(|e| err("cannot make the capture non-blocking", e))?;
        if let Some(f) = &opts.filter {
            cap.filter(f, true).map_err(|e| WireError::usage(format!("filter {f:?}"), e.to_string()))?;
        }
        let linktype = cap.get_datalink().0 as u32;
        if !super::link::is_supported(linktype) {
            return Err(WireError::usage(&where_, format!("unsupported link type {linktype}")));
        }
        let poll = mio::Poll::new().map_err(|e| WireError::new(&where_, format!("epoll: {e}")))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&cap);
        poll.registry()
            .register(&mut mio::unix::SourceFd(&fd), mio::Token(0), mio::Interest::READABLE)
            .map_err(|e| WireError::new(&where_, format!("cannot wait on the capture: {e}")))?;
        let wait = std::time::Duration::from_millis(opts.timeout_ms.max(1) as u64);
        Ok(LiveCapture { cap, linktype, where_, poll, events: mio::Events::with_capacity(4), wait })
    }

    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Wait for one frame (up to the timeout). Ok(false) when none came.
    pub fn next(&mut self, on_frame: &mut impl FnMut(Frame<'_>)) -> Result<bool> {
        if self.try_next(on_frame)? {
            return Ok(true);
        }
        if let Err(e) = self.poll.poll(&mut self.events, Some(self.wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(WireError::new(&self.where_, format!("waiting for packets: {e}")));
            }
        }
        self.try_next(on_frame)
    }

    fn try_next(&mut self, on_frame: &mut impl FnMut(Frame<'_>)) -> Result<bool> {
        match self.cap.next_packet() {
            Ok(p) => {
                let ts = (p.header.ts.tv_sec.max(0) as u64) * 1_000_000_000 + p.header.ts.tv_usec.max(0) as u64;
                on_frame(Frame { ts, linktype: self.linktype, data: p.data, orig_len: p.header.len });
                Ok(true)
            }
            Err(pcap::Error::TimeoutExpired) => Ok(false),
            Err(e) => Err(WireError::new(&self.where_, format!("capture failed: {e}"))),
        }
    }

    pub fn stats(&mut self) -> Result<KernelStats> {
        let s = self.cap.stats().map_err(|e| WireError::new(&self.where_, format!("no kernel statistics: {e}")))?;
        Ok(KernelStats { received: s.received as u64, dropped: s.dropped as u64, if_dropped: s.if_dropped as u64 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interface_is_named_as_one() {
        // As root, "nosuchif0" said "cannot start capture (needs root or CAP_NET_RAW): ... No such device exists".
        let opts = LiveOptions { interface: "nosuchif0".into(), filter: None, snaplen: 100, buffer_bytes: 1 << 20, timeout_ms: 10 };
        let e = LiveCapture::open(&opts).err().expect("nosuchif0 opened");
        assert_eq!(e.exit_code(), 2, "a bad argument: {e}");
        let e = e.to_string();
        assert!(e.starts_with("interface nosuchif0: no such interface (there are: "), "{e}");
        assert!(!e.contains("root"), "{e}");
    }
}
