//! Frames in, exchanges out: decode, find the flow, reassemble, synchronise, match.

use std::collections::HashMap;
use std::sync::Arc;

use crate::capture::Frame;
use crate::decode::{decode, Skip, TcpSeg};
use crate::proto::detect::{detect, role, Role};
use crate::proto::stream::Chunk;
use crate::proto::{Protocol, Session};
use crate::record::{Counters, Exchange};
use crate::tcp::flow::{Flow, FlowKey};
use crate::tcp::reasm::{Delivery, SegIn, TcpCounts};
use crate::Ts;

const SECOND: u64 = 1_000_000_000;

#[derive(Debug, Clone)]
pub struct Config {
    pub protocol: Protocol,
    /// Server ports: when given, only connections to them are analyzed, and they mark
    /// the server side (else well-known ports, else the lower port).
    pub server_ports: Vec<u16>,
    /// Outstanding requests older than this are evicted.
    pub timeout_ns: u64,
    /// Flows with no packet for this long are forgotten.
    pub flow_idle_ns: u64,
    pub max_flows: usize,
    /// Per flow; past it the flow's requests are discarded and it resynchronises.
    pub max_outstanding: usize,
    /// Generic matcher: a response is complete after this much quiet.
    pub quiet_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            protocol: Protocol::Auto,
            server_ports: Vec::new(),
            timeout_ns: 5 * SECOND,
            flow_idle_ns: 60 * SECOND,
            max_flows: 100_000,
            max_outstanding: 10_000,
            quiet_ns: 100_000_000,
        }
    }
}

const WELL_KNOWN: &[u16] = &[11211, 6379, 6380, 80, 8080, 8000, 8008, 8443, 443, 3000, 5000, 9000];

/// Where matched exchanges go.
pub trait Sink {
    /// Records need the flow's "client>server" name; aggregates do not.
    fn wants_flow_names(&self) -> bool {
        false
    }
    fn exchange(&mut self, flow: Option<&str>, ex: &Exchange);
}

/// Collects exchanges (tests, small captures).
#[derive(Default)]
pub struct Collect {
    pub exchanges: Vec<(String, Protocol, Exchange)>,
}

impl Sink for Collect {
    fn wants_flow_names(&self) -> bool {
        true
    }
    fn exchange(&mut self, flow: Option<&str>, ex: &Exchange) {
        self.exchanges.push((flow.unwrap_or("").to_string(), ex.proto, *ex));
    }
}

pub struct Analyzer {
    cfg: Config,
    flows: HashMap<FlowKey, Flow, ahash::RandomState>,
    counters: Counters,
    tcp: TcpCounts,
    out: Vec<Exchange>,
    next_sweep: Ts,
}

/// The other direction as it was before this segment.
#[derive(Clone, Copy)]
struct Peer {
    next: Option<u32>,
    last_ack: Option<u32>,
}

struct Ctx<'a> {
    session: &'a mut Option<Session>,
    synced: &'a mut bool,
    c: &'a mut Counters,
    out: &'a mut Vec<Exchange>,
    protocol: Protocol,
    server_port: u16,
    is_client: bool,
    /// The flow began with a handshake we saw (so its first bytes start a message).
    handshake: &'a mut bool,
    peer: Peer,
}

fn desync(ctx: &mut Ctx<'_>) {
    if let Some(s) = ctx.session.as_mut() {
        ctx.c.discarded += s.reset();
    }
    *ctx.session = None;
    *ctx.synced = false;
    // After a loss the next bytes need not start a message.
    *ctx.handshake = false;
}

fn handle(ctx: &mut Ctx<'_>, d: Delivery<'_>) {
    let data = match d {
        Delivery::Gap => {
            desync(ctx);
            return;
        }
        Delivery::Data(data) => data,
    };
    if !ctx.is_client {
        if *ctx.synced {
            if let Some(s) = ctx.session.as_mut() {
                if s.server(data, ctx.c, ctx.out).is_err() {
                    ctx.c.desyncs += 1;
                    desync(ctx);
                }
            }
        }
        return;
    }
    if !*ctx.synced {
        // Mid-connection: start only where nothing is in flight either way.
        let quiet = ctx.peer.last_ack == Some(data.chunk.seq) && data.chunk.ack.is_some() && data.chunk.ack == ctx.peer.next;
        if !quiet {
            return;
        }
        *ctx.synced = true;
        *ctx.session = None;
    }
    if ctx.session.is_none() {
        match detect(ctx.protocol, ctx.server_port, data.bytes) {
            // Mid-connection, an unrecognised payload may be the middle of a message.
            Some(Protocol::Generic) if !*ctx.handshake && ctx.protocol != Protocol::Generic => {
                *ctx.synced = false;
                return;
            }
            Some(p) => *ctx.session = Some(Session::new(p)),
            None => {
                *ctx.synced = false;
                return;
            }
        }
    }
    if let Some(s) = ctx.session.as_mut() {
        if s.client(data, ctx.c, ctx.out).is_err() {
            ctx.c.desyncs += 1;
            desync(ctx);
        }
    }
}

impl Analyzer {
    pub fn new(cfg: Config) -> Analyzer {
        Analyzer { cfg, flows: HashMap::default(), counters: Counters::default(), tcp: TcpCounts::default(), out: Vec::new(), next_sweep: 0 }
    }

    /// Everything counted so far.
    pub fn counters(&self) -> Counters {
        Counters {
            retransmitted: self.tcp.retransmitted,
            out_of_order: self.tcp.out_of_order,
            gaps: self.tcp.gaps,
            ..self.counters
        }
    }

    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    pub fn outstanding(&self) -> usize {
        self.flows.values().filter_map(|f| f.session.as_ref()).map(|s| s.outstanding()).sum()
    }

    pub fn frame(&mut self, frame: Frame<'_>, sink: &mut dyn Sink) {
        self.counters.frames += 1;
        match decode(frame) {
            Ok(seg) => self.segment(seg, sink),
            Err(Skip::NotIp) => self.counters.skipped_not_ip += 1,
            Err(Skip::NotTcp) => self.counters.skipped_not_tcp += 1,
            Err(Skip::Fragment) => self.counters.skipped_fragments += 1,
            Err(Skip::Malformed) => self.counters.malformed += 1,
        }
        if frame.ts >= self.next_sweep {
            self.sweep(frame.ts, sink);
        }
    }

    fn segment(&mut self, seg: TcpSeg<'_>, sink: &mut dyn Sink) {
        self.counters.tcp_segments += 1;
        if !self.cfg.server_ports.is_empty()
            && !self.cfg.server_ports.contains(&seg.sport)
            && !self.cfg.server_ports.contains(&seg.dport)
        {
            return;
        }
        let (key, a_to_b) = FlowKey::of(&seg);
        let new_connection = seg.syn && seg.ack.is_none();
        let restarted = new_connection
            && self.flows.get(&key).is_some_and(|f| f.dirs[if a_to_b { 0 } else { 1 }].next != Some(seg.seq.wrapping_add(1)));
        if restarted {
            // A new connection on the same address pair: the old one is over.
            self.close_flow(&key, seg.ts, sink);
        }
        let wants_names = sink.wants_flow_names();
        let Analyzer { cfg, flows, counters: c, tcp, out, .. } = self;
        let full = flows.len() >= cfg.max_flows;
        // One hash lookup per segment on the common path.
        let flow = match flows.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                if seg.rst || (seg.payload_len == 0 && !seg.syn) {
                    return;
                }
                if full {
                    c.flows_dropped += 1;
                    return;
                }
                let (client_is_a, known) = client_side(cfg, &key, &seg, a_to_b);
                c.flows += 1;
                v.insert(Flow::new(client_is_a, known, seg.syn, seg.ts))
            }
        };
        flow.last_ts = seg.ts;
        if !flow.side_known && !flow.synced && !seg.payload.is_empty() {
            match role(seg.payload) {
                Some(Role::Request) => (flow.client_is_a, flow.side_known) = (a_to_b, true),
                Some(Role::Response) => (flow.client_is_a, flow.side_known) = (!a_to_b, true),
                None => {}
            }
        }
        let dir = if a_to_b { 0 } else { 1 };
        let other = 1 - dir;
        let cdir = flow.client_dir();
        let server_port = key.server_port(flow.client_is_a);
        let Flow { dirs, session, synced, saw_handshake: handshake, .. } = flow;
        let (d0, d1) = dirs.split_at_mut(1);
        let (this, that) = if dir == 0 { (&mut d0[0], &mut d1[0]) } else { (&mut d1[0], &mut d0[0]) };
        if let Some(ack) = seg.ack {
            let peer = Peer { next: this.next, last_ack: this.last_ack };
            let mut ctx = Ctx { session, synced, c, out, protocol: cfg.protocol, server_port, is_client: other == cdir, handshake, peer };
            that.peer_acked(ack, tcp, &mut |d| handle(&mut ctx, d));
            this.last_ack = Some(ack);
        }
        let peer = Peer { next: that.next, last_ack: that.last_ack };
        let mut ctx = Ctx { session, synced, c, out, protocol: cfg.protocol, server_port, is_client: dir == cdir, handshake, peer };
        let s = SegIn { ts: seg.ts, seq: seg.seq, ack: seg.ack, syn: seg.syn, fin: seg.fin, bytes: seg.payload, len: seg.payload_len };
        this.push(s, tcp, &mut |d| handle(&mut ctx, d));
        let server_fin = dir != cdir && this.fin;
        if let Some(s) = session.as_mut() {
            if server_fin || seg.rst {
                s.close(Chunk { ts: seg.ts, seq: seg.seq, ack: seg.ack }, c, out);
            }
            if s.outstanding() > cfg.max_outstanding {
                c.discarded += s.reset();
                *session = None;
                *synced = false;
            }
        }
        let both_fin = d0[0].fin && d1[0].fin;
        emit(flow, &key, wants_names, out, sink);
        if seg.rst || both_fin {
            self.close_flow(&key, seg.ts, sink);
        }
    }

    fn close_flow(&mut self, key: &FlowKey, ts: Ts, sink: &mut dyn Sink) {
        let wants_names = sink.wants_flow_names();
        if let Some(mut flow) = self.flows.remove(key) {
            if let Some(s) = flow.session.as_mut() {
                s.close(Chunk { ts, seq: 0, ack: None }, &mut self.counters, &mut self.out);
                self.counters.discarded += s.reset();
            }
            emit(&mut flow, key, wants_names, &mut self.out, sink);
        }
    }

    /// Evict old outstanding requests and idle flows (runs once a second of capture time).
    fn sweep(&mut self, now: Ts, sink: &mut dyn Sink) {
        self.next_sweep = now + SECOND;
        let cutoff = now.saturating_sub(self.cfg.timeout_ns);
        let quiet = now.saturating_sub(self.cfg.quiet_ns);
        let idle = now.saturating_sub(self.cfg.flow_idle_ns);
        let wants_names = sink.wants_flow_names();
        let mut gone = Vec::new();
        for (key, flow) in self.flows.iter_mut() {
            if let Some(s) = flow.session.as_mut() {
                self.counters.evicted += s.evict(cutoff, quiet, &mut self.counters, &mut self.out);
            }
            emit(flow, key, wants_names, &mut self.out, sink);
            if flow.last_ts < idle {
                gone.push(*key);
            }
        }
        for key in gone {
            if let Some(mut flow) = self.flows.remove(&key) {
                if let Some(s) = flow.session.as_mut() {
                    self.counters.evicted += s.reset();
                }
            }
        }
    }

    /// End of input: complete what can be, discard the rest.
    pub fn finish(&mut self, now: Ts, sink: &mut dyn Sink) {
        let keys: Vec<FlowKey> = self.flows.keys().copied().collect();
        for key in keys {
            let wants_names = sink.wants_flow_names();
            if let Some(flow) = self.flows.get_mut(&key) {
                if let Some(s) = flow.session.as_mut() {
                    // Only the generic matcher completes on close; others keep their queue.
                    if s.protocol() == Protocol::Generic {
                        s.close(Chunk { ts: now, seq: 0, ack: None }, &mut self.counters, &mut self.out);
                    }
                    self.counters.discarded += s.reset();
                }
                emit(flow, &key, wants_names, &mut self.out, sink);
            }
        }
        self.flows.clear();
    }
}

/// Which endpoint is the client, and whether that is known rather than guessed.
fn client_side(cfg: &Config, key: &FlowKey, seg: &TcpSeg<'_>, a_to_b: bool) -> (bool, bool) {
    if seg.syn {
        // SYN comes from the client, SYN-ACK from the server.
        return (a_to_b != seg.ack.is_some(), true);
    }
    let server = |p: u16| cfg.server_ports.contains(&p) || (cfg.server_ports.is_empty() && WELL_KNOWN.contains(&p));
    match (server(key.pa), server(key.pb)) {
        (true, false) => (false, true),
        (false, true) => (true, true),
        _ => match role(seg.payload) {
            Some(Role::Request) => (a_to_b, true),
            Some(Role::Response) => (!a_to_b, true),
            None => (key.pa > key.pb, false),
        },
    }
}


fn emit(flow: &mut Flow, key: &FlowKey, wants_names: bool, out: &mut Vec<Exchange>, sink: &mut dyn Sink) {
    if out.is_empty() {
        return;
    }
    let name: Option<Arc<str>> = if wants_names {
        Some(flow.name.get_or_insert_with(|| Arc::from(key.describe(flow.client_is_a))).clone())
    } else {
        None
    };
    for ex in out.drain(..) {
        sink.exchange(name.as_deref(), &ex);
    }
}
