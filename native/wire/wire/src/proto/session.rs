//! Matching requests with responses on one connection.

use std::collections::VecDeque;

use super::generic::GenericSession;
use super::stream::{Chunk, Desync, Framer, Meta, Stream};
use super::{http, mc_ascii, mc_binary, resp, Protocol, ReqMsg, RespMsg};
use crate::record::{Counters, Exchange};
use crate::tcp::seq_lt;
use crate::Ts;

/// Response framers that need to know what was asked (HTTP HEAD has no body).
pub trait Expect {
    fn expect(&mut self, _req: &ReqMsg) {}
    fn forget(&mut self) {}
}

impl Expect for mc_binary::ResponseFramer {}
impl Expect for mc_ascii::ResponseFramer {}
impl Expect for resp::ResponseFramer {}

/// Bytes of one segment, in order, for one direction.
#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    pub bytes: &'a [u8],
    /// Bytes on the wire after `bytes` that the capture did not keep.
    pub missing: u64,
    pub chunk: Chunk,
}

struct Pending {
    req: ReqMsg,
    meta: Meta,
    replies_left: u32,
    resp_start: Ts,
    resp_bytes: u64,
}

/// Requests answered in order (text protocols) or by tag (memcached binary opaque).
pub struct FifoSession<C: Framer<Msg = ReqMsg>, S: Framer<Msg = RespMsg> + Expect> {
    client: Stream<C>,
    server: Stream<S>,
    queue: VecDeque<Pending>,
    tagged: bool,
    proto: Protocol,
}

/// Quiet requests one reply may pass over (memcached getkq batches).
const MAX_QUIET_SKIP: usize = 4096;
/// Answered requests one reply may pass over (their replies were lost).
const MAX_LOST_SKIP: usize = 8;

/// Where the request a tagged reply answers sits in the queue. Replies come in request
/// order, so only quiet requests (and a few whose replies were lost) may lie before it;
/// a reply to a request never seen is found absent after a few steps, not a full scan.
fn find_tag(queue: &VecDeque<Pending>, tag: u32) -> Option<usize> {
    let (mut quiet, mut lost) = (0, 0);
    for (i, p) in queue.iter().enumerate() {
        if p.req.tag == tag {
            return Some(i);
        }
        if p.req.quiet {
            quiet += 1;
            if quiet > MAX_QUIET_SKIP {
                return None;
            }
        } else {
            lost += 1;
            if lost > MAX_LOST_SKIP {
                return None;
            }
        }
    }
    None
}

impl<C: Framer<Msg = ReqMsg>, S: Framer<Msg = RespMsg> + Expect> FifoSession<C, S> {
    pub fn new(proto: Protocol, client: C, server: S, tagged: bool) -> Self {
        FifoSession {
            proto,
            client: Stream::new(client),
            server: Stream::new(server),
            queue: VecDeque::new(),
            tagged,
        }
    }

    fn client_data(&mut self, d: Data<'_>, c: &mut Counters) -> Result<(), Desync> {
        let FifoSession { client, server, queue, .. } = self;
        client.feed(d.bytes, d.missing, d.chunk, &mut |req: ReqMsg, meta: Meta| {
            c.requests += 1;
            if req.replies == 0 {
                c.no_reply += 1;
                return;
            }
            server.framer.expect(&req);
            queue.push_back(Pending { req, meta, replies_left: req.replies, resp_start: 0, resp_bytes: 0 });
        })
    }

    fn server_data(&mut self, d: Data<'_>, c: &mut Counters, out: &mut Vec<Exchange>) -> Result<(), Desync> {
        let FifoSession { server, queue, tagged, proto, .. } = self;
        let (tagged, proto) = (*tagged, *proto);
        server.feed(d.bytes, d.missing, d.chunk, &mut |resp: RespMsg, meta: Meta| {
            c.responses += 1;
            if resp.push {
                c.pushes += 1;
                return;
            }
            if resp.interim {
                c.interim_responses += 1;
                return;
            }
            if tagged {
                let Some(i) = find_tag(queue, resp.tag) else {
                    c.unmatched_responses += 1;
                    return;
                };
                for p in queue.drain(..i) {
                    if p.req.quiet {
                        c.no_reply += 1;
                    } else {
                        c.unanswered += 1;
                    }
                }
            }
            let Some(front) = queue.front_mut() else {
                c.unmatched_responses += 1;
                return;
            };
            // A response sent before the request's last byte was received cannot answer it.
            if let Some(ack) = meta.ack_start {
                if seq_lt(ack, front.meta.seq_end) {
                    c.unmatched_responses += 1;
                    return;
                }
            }
            if front.resp_bytes == 0 {
                front.resp_start = meta.t_start;
            }
            front.resp_bytes += meta.bytes;
            front.replies_left = front.replies_left.saturating_sub(1);
            if front.replies_left == 0 {
                if let Some(p) = queue.pop_front() {
                    c.exchanges += 1;
                    out.push(Exchange {
                        proto,
                        op: p.req.op,
                        key_len: p.req.key_len,
                        keys: p.req.keys,
                        req_bytes: p.meta.bytes,
                        resp_bytes: p.resp_bytes,
                        t_req_start: p.meta.t_start,
                        t_req: p.meta.t_end,
                        t_resp_start: p.resp_start,
                        t_resp: meta.t_end,
                        error: resp.error,
                        status: resp.status,
                    });
                }
            }
        })
    }

    fn close(&mut self, chunk: Chunk, c: &mut Counters, out: &mut Vec<Exchange>) {
        // A body delimited by the close completes now.
        let mut done = None;
        self.server.close(chunk, &mut |resp: RespMsg, meta: Meta| done = Some((resp, meta)));
        if let Some((resp, meta)) = done {
            c.responses += 1;
            if let Some(p) = self.queue.pop_front() {
                c.exchanges += 1;
                out.push(Exchange {
                    proto: self.proto,
                    op: p.req.op,
                    key_len: p.req.key_len,
                    keys: p.req.keys,
                    req_bytes: p.meta.bytes,
                    resp_bytes: meta.bytes,
                    t_req_start: p.meta.t_start,
                    t_req: p.meta.t_end,
                    t_resp_start: meta.t_start,
                    t_resp: meta.t_end,
                    error: resp.error,
                    status: resp.status,
                });
            }
        }
    }

    fn evict(&mut self, cutoff: Ts) -> u64 {
        // The queue is in request order, so the oldest are in front.
        let mut n = 0;
        while self.queue.front().is_some_and(|p| p.meta.t_end < cutoff) {
            if self.queue.pop_front().is_some() {
                n += 1;
            }
        }
        if n > 0 {
            // What the response side remembers no longer lines up.
            self.server.framer.forget();
        }
        n
    }

    fn reset(&mut self) -> u64 {
        let n = self.queue.len() as u64;
        self.queue.clear();
        self.client.reset();
        self.server.reset();
        n
    }
}

pub enum Session {
    McBinary(FifoSession<mc_binary::RequestFramer, mc_binary::ResponseFramer>),
    McAscii(FifoSession<mc_ascii::RequestFramer, mc_ascii::ResponseFramer>),
    Redis(FifoSession<resp::RequestFramer, resp::ResponseFramer>),
    Http(FifoSession<http::RequestFramer, http::ResponseFramer>),
    Generic(GenericSession),
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr, $g:ident => $ge:expr) => {
        match $self {
            Session::McBinary($s) => $e,
            Session::McAscii($s) => $e,
            Session::Redis($s) => $e,
            Session::Http($s) => $e,
            Session::Generic($g) => $ge,
        }
    };
}

impl Session {
    /// A session for a resolved protocol (not Auto/Memcache).
    pub fn new(p: Protocol) -> Session {
        match p {
            Protocol::McBinary => Session::McBinary(FifoSession::new(Protocol::McBinary, Default::default(), Default::default(), true)),
            Protocol::McAscii | Protocol::Memcache => {
                Session::McAscii(FifoSession::new(Protocol::McAscii, Default::default(), Default::default(), false))
            }
            Protocol::Redis => Session::Redis(FifoSession::new(Protocol::Redis, Default::default(), Default::default(), false)),
            Protocol::Http => Session::Http(FifoSession::new(Protocol::Http, Default::default(), Default::default(), false)),
            Protocol::Generic | Protocol::Auto => Session::Generic(GenericSession::default()),
        }
    }

    pub fn protocol(&self) -> Protocol {
        match self {
            Session::McBinary(_) => Protocol::McBinary,
            Session::McAscii(_) => Protocol::McAscii,
            Session::Redis(_) => Protocol::Redis,
            Session::Http(_) => Protocol::Http,
            Session::Generic(_) => Protocol::Generic,
        }
    }

    pub fn client(&mut self, d: Data<'_>, c: &mut Counters, out: &mut Vec<Exchange>) -> Result<(), Desync> {
        each!(self, s => s.client_data(d, c), g => g.client(d, c, out))
    }

    pub fn server(&mut self, d: Data<'_>, c: &mut Counters, out: &mut Vec<Exchange>) -> Result<(), Desync> {
        each!(self, s => s.server_data(d, c, out), g => g.server(d, c))
    }

    pub fn close(&mut self, chunk: Chunk, c: &mut Counters, out: &mut Vec<Exchange>) {
        each!(self, s => s.close(chunk, c, out), g => g.close(c, out))
    }

    pub fn outstanding(&self) -> usize {
        each!(self, s => s.queue.len(), g => g.outstanding())
    }

    /// Drop outstanding requests whose last byte is older than `cutoff`; emit generic
    /// exchanges whose response has been quiet since `quiet_cutoff`.
    pub fn evict(&mut self, cutoff: Ts, quiet_cutoff: Ts, c: &mut Counters, out: &mut Vec<Exchange>) -> u64 {
        each!(self, s => s.evict(cutoff), g => g.evict(cutoff, quiet_cutoff, c, out))
    }

    /// Forget everything in flight; returns how many requests were discarded.
    pub fn reset(&mut self) -> u64 {
        each!(self, s => s.reset(), g => g.reset())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::mc_binary::{request, RESP_MAGIC};

    fn data(bytes: &[u8], seq: u32, ack: u32, ts: Ts) -> Data<'_> {
        Data { bytes, missing: 0, chunk: Chunk { ts, seq, ack: Some(ack) } }
    }

    fn reply(tag: u32) -> Vec<u8> {
        let mut b = Vec::new();
        request(0x00, tag, &[], &[], &[], &mut b);
        b[0] = RESP_MAGIC;
        b
    }

    #[test]
    fn quiet_batch_then_reply_and_unknown_tags() {
        let mut s = Session::new(Protocol::McBinary);
        let (mut c, mut out) = (Counters::default(), Vec::new());
        let mut req = Vec::new();
        for tag in 1..=3 {
            request(0x09, tag, &[], b"k", &[], &mut req); // getq: quiet
        }
        request(0x0a, 4, &[], &[], &[], &mut req); // noop
        s.client(data(&req, 0, 0, 10), &mut c, &mut out).unwrap();
        let end = req.len() as u32;
        s.server(data(&reply(99), 0, end, 20), &mut c, &mut out).unwrap(); // never asked
        s.server(data(&reply(4), 24, end, 30), &mut c, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].op, out[0].latency_ns()), ("noop", 20));
        assert_eq!((c.no_reply, c.unmatched_responses, s.outstanding()), (3, 1, 0));
    }

    #[test]
    fn a_reply_sent_before_its_request_arrived_is_refused() {
        let mut s = Session::new(Protocol::Redis);
        let (mut c, mut out) = (Counters::default(), Vec::new());
        s.client(data(b"*1\r\n$4\r\nPING\r\n", 100, 0, 1), &mut c, &mut out).unwrap();
        // acknowledges only up to 105: cannot answer a request ending at 114
        s.server(data(b"+PONG\r\n", 0, 105, 2), &mut c, &mut out).unwrap();
        assert!(out.is_empty());
        s.server(data(b"+PONG\r\n", 7, 114, 3), &mut c, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(c.unmatched_responses, 1);
    }
}
