//! What the analyzer produces: one exchange per matched request, and counters for
//! everything it saw but could not turn into a sample.

use serde::Serialize;

use crate::proto::Protocol;
use crate::Ts;

/// A request matched with its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub proto: Protocol,
    pub op: &'static str,
    /// Length of the (first) key, where the protocol has one.
    pub key_len: Option<u32>,
    /// Number of keys (multi-key get), 1 otherwise.
    pub keys: u32,
    pub req_bytes: u64,
    pub resp_bytes: u64,
    pub t_req_start: Ts,
    /// Last byte of the request.
    pub t_req: Ts,
    /// First byte of the response.
    pub t_resp_start: Ts,
    /// Last byte of the response.
    pub t_resp: Ts,
    /// The response was an error (memcached binary status > 1, memcached text ERROR,
    /// Redis error reply, HTTP >= 500).
    pub error: bool,
    /// HTTP status; memcached binary status (1: key not found); Redis and memcached text
    /// 1 for a miss and 2 for an error reply (proto::resp, proto::mc_ascii); 0 when none.
    pub status: u16,
}

impl Exchange {
    /// Latency: last byte of the request to last byte of the response (tshark's http.time).
    pub fn latency_ns(&self) -> u64 {
        self.t_resp.saturating_sub(self.t_req)
    }
    pub fn ttfb_ns(&self) -> u64 {
        self.t_resp_start.saturating_sub(self.t_req)
    }
}

/// Everything counted along the way (cumulative).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    pub frames: u64,
    pub tcp_segments: u64,
    pub skipped_not_ip: u64,
    pub skipped_not_tcp: u64,
    pub skipped_fragments: u64,
    pub malformed: u64,
    pub flows: u64,
    pub flows_dropped: u64,
    pub retransmitted: u64,
    pub out_of_order: u64,
    pub gaps: u64,
    pub desyncs: u64,
    pub requests: u64,
    pub responses: u64,
    pub exchanges: u64,
    /// Requests that get no reply by design (noreply, quiet, CLIENT REPLY OFF/SKIP).
    pub no_reply: u64,
    /// Requests passed over by a later response (their response never came).
    pub unanswered: u64,
    pub unmatched_responses: u64,
    pub interim_responses: u64,
    pub pushes: u64,
    /// Outstanding requests older than the timeout, dropped.
    pub evicted: u64,
    /// Outstanding requests discarded when their flow closed, reset or went past its cap.
    pub discarded: u64,
}
