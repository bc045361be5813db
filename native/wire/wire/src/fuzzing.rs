//! Entry points shared by the cargo-fuzz targets (native/wire/fuzz) and the bounded
//! property tests that run on stable in `cargo test`. Each must return, never panic,
//! whatever the bytes.

use crate::analyzer::{Analyzer, Collect, Config};
use crate::capture::file::{read_bytes, read_capture};
use crate::capture::{link, Frame};
use crate::proto::session::Data;
use crate::proto::stream::Chunk;
use crate::proto::{Protocol, Session};
use crate::record::Counters;

const LINKTYPES: [u32; 10] = [
    link::ETHERNET,
    link::RAW,
    link::NULL,
    link::LOOP,
    link::LINUX_SLL,
    link::LINUX_SLL2,
    link::IPV4,
    link::IPV6,
    link::RAW_OPENBSD,
    999,
];

/// Bytes as a capture file, through both readers (streamed and in memory, as a mapped
/// file is read): where both accept the whole file, they must yield the same frames.
pub fn capture_file(data: &[u8]) {
    let mut a = Analyzer::new(Config { max_flows: 64, max_outstanding: 64, ..Config::default() });
    let mut sink = Collect::default();
    let mut last = 0;
    let mut streamed = Vec::new();
    let s = read_capture(data, "fuzz", |f| {
        last = f.ts;
        streamed.push((f.ts, f.linktype, f.data.len()));
        a.frame(f, &mut sink);
    });
    a.finish(last, &mut sink);
    let mut in_memory = Vec::new();
    let m = read_bytes(data, "fuzz", |f| in_memory.push((f.ts, f.linktype, f.data.len())));
    if let (Ok(s), Ok(m)) = (s, m) {
        if !s.truncated && !m.truncated {
            assert_eq!(streamed, in_memory, "the two capture readers disagree");
        }
    }
}

/// Bytes as a sequence of frames: [len_hi, len_lo, linktype selector, ts step, frame...]*.
pub fn frames(mut data: &[u8]) {
    let mut a = Analyzer::new(Config { max_flows: 64, max_outstanding: 64, ..Config::default() });
    let mut sink = Collect::default();
    let mut ts = 1_000_000_000u64;
    while data.len() >= 4 {
        let len = (u16::from_be_bytes([data[0], data[1]]) as usize).min(data.len() - 4);
        let linktype = LINKTYPES[data[2] as usize % LINKTYPES.len()];
        ts += data[3] as u64 * 1_000_000;
        let frame = &data[4..4 + len];
        a.frame(Frame { ts, linktype, data: frame, orig_len: frame.len() as u32 + data[3] as u32 }, &mut sink);
        data = &data[4 + len..];
    }
    a.finish(ts, &mut sink);
}

/// Bytes split into client and server chunks for each protocol's session.
pub fn protocols(data: &[u8]) {
    for p in [Protocol::McBinary, Protocol::McAscii, Protocol::Redis, Protocol::Http, Protocol::Generic] {
        let mut s = Session::new(p);
        let mut c = Counters::default();
        let mut out = Vec::new();
        let mut rest = data;
        let mut seq = [0u32; 2];
        let mut i = 0u64;
        while let Some((&ctl, tail)) = rest.split_first() {
            let n = (ctl as usize & 0x3f).min(tail.len());
            let (chunk, tail) = tail.split_at(n);
            let dir = (ctl >> 7) as usize;
            let missing = if ctl & 0x40 != 0 { (ctl & 0x7) as u64 } else { 0 };
            i += 1;
            let d = Data { bytes: chunk, missing, chunk: Chunk { ts: i, seq: seq[dir], ack: Some(seq[1 - dir]) } };
            seq[dir] = seq[dir].wrapping_add(n as u32 + missing as u32);
            let r = if dir == 0 { s.client(d, &mut c, &mut out) } else { s.server(d, &mut c, &mut out) };
            if r.is_err() {
                s.reset();
            }
            rest = tail;
        }
        s.close(Chunk { ts: i + 1, seq: 0, ack: None }, &mut c, &mut out);
        s.evict(u64::MAX, u64::MAX, &mut c, &mut out);
        for e in &out {
            let _ = e.latency_ns();
        }
    }
}
