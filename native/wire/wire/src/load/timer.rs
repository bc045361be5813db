//! Sleeping until just before a send: epoll's timeout has millisecond resolution, so
//! without a timer the generator spins through the last millisecond before every send
//! (half a CPU at 1 000 requests/s per thread), competing with the server it measures.
//! A timerfd in the same epoll set wakes it `SPIN_MARGIN` before the send instead.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustix::time::{timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};

/// How long before a send the generator wakes and starts to spin, by default: above a
/// timer wake-up's usual lateness on a virtual machine (`--spin-us` changes it).
pub const SPIN_MARGIN: Duration = Duration::from_micros(100);

pub struct Wakeup {
    fd: OwnedFd,
    pub token: Token,
}

impl Wakeup {
    /// None if the kernel has no timerfd (then epoll's millisecond timeout is used).
    pub fn new(registry: &Registry, token: Token) -> Option<Wakeup> {
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC).ok()?;
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE).ok()?;
        Some(Wakeup { fd, token })
    }

    /// Fire once, `after` from now (zero disarms).
    pub fn arm(&self, after: Duration) -> bool {
        let value = Timespec { tv_sec: after.as_secs() as _, tv_nsec: after.subsec_nanos() as _ };
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        let spec = Itimerspec { it_interval: zero, it_value: value };
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec).is_ok()
    }

    /// Consume the expiry so the descriptor stops being readable.
    pub fn clear(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut b);
    }
}
