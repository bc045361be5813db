//! The golden loopback capture (tests/data/wire, recorded by record.sh) read as is and
//! mangled: every mangling may lose samples but must never invent one.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use perflearn_wire::analyzer::{Analyzer, Collect, Config};
use perflearn_wire::capture::file::read_file;
use perflearn_wire::capture::{link, Frame};
use perflearn_wire::proto::Protocol;
use perflearn_wire::record::Exchange;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/data/wire").join(name)
}

struct Owned {
    ts: u64,
    linktype: u32,
    data: Vec<u8>,
}

fn frames(name: &str) -> Vec<Owned> {
    let mut v = Vec::new();
    read_file(&data(name), |f| v.push(Owned { ts: f.ts, linktype: f.linktype, data: f.data.to_vec() })).unwrap();
    v
}

fn analyze<'a>(frames: impl Iterator<Item = &'a Owned>) -> (Vec<(String, Protocol, Exchange)>, Analyzer) {
    let mut a = Analyzer::new(Config::default());
    let mut sink = Collect::default();
    let mut last = 0;
    for f in frames {
        a.frame(Frame { ts: f.ts, linktype: f.linktype, data: &f.data, orig_len: f.data.len() as u32 }, &mut sink);
        last = f.ts;
    }
    a.finish(last, &mut sink);
    (sink.exchanges, a)
}

fn per_proto(ex: &[(String, Protocol, Exchange)]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (_, p, _) in ex {
        *m.entry(p.name().to_string()).or_insert(0) += 1;
    }
    m
}

fn expected_counts() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(data("golden.expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["responses"].as_object().unwrap().iter().map(|(k, n)| (k.clone(), n.as_u64().unwrap())).collect()
}

type Key = (String, &'static str, u64, u64);

fn keys(ex: &[(String, Protocol, Exchange)]) -> HashSet<Key> {
    ex.iter().map(|(f, _, e)| (f.clone(), e.op, e.t_req, e.t_resp)).collect()
}

/// Every sample of `part` is one of `full`'s.
fn assert_no_false_samples(part: &[(String, Protocol, Exchange)], full: &[(String, Protocol, Exchange)]) {
    let full = keys(full);
    for k in keys(part) {
        assert!(full.contains(&k), "false sample {k:?}");
    }
}

#[test]
fn counts_match_the_clients_exactly() {
    let f = frames("golden.pcap");
    let (ex, a) = analyze(f.iter());
    assert_eq!(per_proto(&ex), expected_counts());
    let c = a.counters();
    assert_eq!((c.desyncs, c.gaps, c.unmatched_responses), (0, 0, 0));
}

#[test]
fn pcapng_gives_the_same_exchanges() {
    let (a, _) = analyze(frames("golden.pcap").iter());
    let (b, _) = analyze(frames("golden.pcapng").iter());
    assert_eq!(a, b);
}

#[test]
fn retransmissions_create_no_samples() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    // Every third frame sent twice (the copy 1 µs later).
    let mut dup = Vec::new();
    for (i, fr) in f.iter().enumerate() {
        dup.push(Owned { ts: fr.ts, linktype: fr.linktype, data: fr.data.clone() });
        if i % 3 == 0 {
            dup.push(Owned { ts: fr.ts + 1000, linktype: fr.linktype, data: fr.data.clone() });
        }
    }
    let (got, a) = analyze(dup.iter());
    assert_eq!(keys(&got), keys(&full));
    assert!(a.counters().retransmitted > 20);
}

#[test]
fn reordered_segments_are_put_back() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    // Swap neighbours within the same direction of a connection: the later segment arrives first.
    let mut order: Vec<usize> = (0..f.len()).collect();
    let mut i = 0;
    while i + 1 < order.len() {
        if f[i].data.len() > 100 && f[i + 1].data.len() > 100 && f[i].data[26..38] == f[i + 1].data[26..38] {
            order.swap(i, i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    let (got, a) = analyze(order.iter().map(|&j| &f[j]));
    assert!(a.counters().out_of_order > 0);
    assert_no_false_samples(&got, &full);
    assert_eq!(got.len(), full.len());
}

#[test]
fn starting_mid_connection_recovers_without_false_samples() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    for skip in [5, 23, 57, 101, 150, 222] {
        let (got, _) = analyze(f.iter().skip(skip));
        assert_no_false_samples(&got, &full);
        assert!(!got.is_empty(), "nothing recovered after skipping {skip} frames");
    }
}

#[test]
fn lost_frames_create_no_false_samples() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    for modulo in [7, 13, 29] {
        let (got, a) = analyze(f.iter().enumerate().filter(|(i, _)| i % modulo != 3).map(|(_, x)| x));
        assert_no_false_samples(&got, &full);
        assert!(a.counters().gaps > 0);
    }
}

#[test]
fn snap_length_keeps_memcached_binary_whole() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    // 14 Ethernet + 20 IP + 32 TCP + 24 memcached header = 90 bytes.
    let cut: Vec<Owned> =
        f.iter().map(|x| Owned { ts: x.ts, linktype: x.linktype, data: x.data[..x.data.len().min(90)].to_vec() }).collect();
    let (got, _) = analyze(cut.iter());
    assert_no_false_samples(&got, &full);
    // All but the 13 answers to requests that shared a segment with an earlier request
    // (10 pipelined gets, a quiet-get batch answered twice plus its noop): a cut header
    // cannot be read, so those are lost, never guessed.
    assert_eq!(per_proto(&got)["memcache-binary"], expected_counts()["memcache-binary"] - 13);
}

#[test]
fn every_link_type_gives_the_same_exchanges() {
    let f = frames("golden.pcap");
    let (full, _) = analyze(f.iter());
    let convert = |linktype: u32, header: &dyn Fn(&[u8]) -> Vec<u8>| -> Vec<Owned> {
        f.iter()
            .map(|x| {
                let mut d = header(&x.data[..14]);
                d.extend_from_slice(&x.data[14..]);
                Owned { ts: x.ts, linktype, data: d }
            })
            .collect()
    };
    let variants: Vec<(u32, Box<dyn Fn(&[u8]) -> Vec<u8>>)> = vec![
        (link::RAW, Box::new(|_| Vec::new())),
        (link::IPV4, Box::new(|_| Vec::new())),
        (link::NULL, Box::new(|_| 2u32.to_le_bytes().to_vec())),
        (link::LOOP, Box::new(|_| 2u32.to_be_bytes().to_vec())),
        (
            link::LINUX_SLL,
            Box::new(|eth| {
                let mut h = vec![0u8; 14];
                h.extend_from_slice(&eth[12..14]);
                h
            }),
        ),
        (
            link::LINUX_SLL2,
            Box::new(|eth| {
                let mut h = eth[12..14].to_vec();
                h.extend_from_slice(&[0u8; 18]);
                h
            }),
        ),
    ];
    for (lt, hdr) in variants {
        let (got, _) = analyze(convert(lt, &*hdr).iter());
        assert_eq!(keys(&got), keys(&full), "link type {lt}");
    }
}

#[test]
fn flow_cap_drops_are_counted() {
    let f = frames("golden.pcap");
    let mut a = Analyzer::new(Config { max_flows: 1, ..Config::default() });
    let mut sink = Collect::default();
    for x in &f {
        a.frame(Frame { ts: x.ts, linktype: x.linktype, data: &x.data, orig_len: x.data.len() as u32 }, &mut sink);
    }
    assert!(a.counters().flows_dropped > 0);
    assert!(a.flows() <= 1);
}
