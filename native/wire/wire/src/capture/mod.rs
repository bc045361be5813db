//! Frames in: pcap/pcapng files (`file`) and live interfaces (`live`); `link` finds the
//! network layer under each link type; `clock` keeps a live capture's time off the wall clock.

pub mod clock;
pub mod file;
pub mod link;
pub mod live;

use crate::Ts;

/// One captured frame, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub ts: Ts,
    /// pcap LINKTYPE_* value.
    pub linktype: u32,
    pub data: &'a [u8],
    /// Length on the wire (may exceed `data.len()` under a snap length).
    pub orig_len: u32,
}
