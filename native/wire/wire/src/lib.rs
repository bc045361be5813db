//! perflearn-wire: request latency measured from packets, and an open-loop load generator.
//!
//! Pipeline (one module per job, after Heimdall's sniffer): `capture` reads frames from a
//! pcap/pcapng file or a live interface; `decode` strips link, IP and TCP headers; `tcp`
//! keeps per-flow state and reassembles each direction; `proto` frames messages and
//! matches requests to responses; `stats` aggregates latencies per interval; `output`
//! writes records and aggregates. `load` is the open-loop load generator.

// unsafe only at an FFI boundary: mapping a capture file (capture::file::map).
#![deny(unsafe_code)]

pub mod analyzer;
pub mod capture;
pub mod decode;
pub mod error;
pub mod fuzzing;
pub mod load;
pub mod output;
pub mod proto;
pub mod record;
pub mod stats;
pub mod tcp;

pub use error::WireError;

/// Timestamps are nanoseconds since the Unix epoch.
pub type Ts = u64;
