//! Requests the load generator sends and the framing of the replies it reads, one per
//! protocol (the reply framers are the analyzer's own).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::dist::Sizes;
use crate::proto::stream::{Chunk, Desync, Meta, Stream};
use crate::proto::{http, mc_ascii, mc_binary, resp, RespMsg};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadProto {
    McBinary,
    McAscii,
    Redis,
    Http,
}

impl LoadProto {
    pub fn parse(s: &str) -> Result<LoadProto, String> {
        match s {
            "memcache-binary" | "memcached-binary" => Ok(LoadProto::McBinary),
            "memcache-ascii" | "memcached-ascii" | "memcache" | "memcached" => Ok(LoadProto::McAscii),
            "redis" => Ok(LoadProto::Redis),
            "http" => Ok(LoadProto::Http),
            _ => Err(format!("protocol {s:?}: use memcache-binary, memcache-ascii, redis or http")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub proto: LoadProto,
    /// Number of distinct keys.
    pub keys: u64,
    pub key_sizes: Sizes,
    pub value_sizes: Sizes,
    /// Fraction of requests that are sets (the rest are gets).
    pub set_ratio: f64,
    /// HTTP: path requested, Host header.
    pub path: String,
    pub host: String,
}

const SEED: u64 = 0x5eed_f00d;

impl Workload {
    /// Key length of key `i`: drawn once per key so a key keeps its length.
    pub fn key_len(&self, i: u64) -> usize {
        let mut rng = SmallRng::seed_from_u64(i ^ SEED);
        self.key_sizes.sample(&mut rng).max(1) as usize
    }

    pub fn key(&self, i: u64, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(format!("k{i}").as_bytes());
        let want = self.key_len(i).min(250);
        while out.len() - start < want {
            out.push(b'-');
        }
    }

    /// Append one request; returns its operation name.
    pub fn request(&self, rng: &mut SmallRng, opaque: u32, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) -> &'static str {
        if self.proto == LoadProto::Http {
            out.extend_from_slice(format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", self.path, self.host).as_bytes());
            return "GET";
        }
        let i = rng.gen_range(0..self.keys.max(1));
        let set = rng.gen_bool(self.set_ratio.clamp(0.0, 1.0));
        let vlen = if set { self.value_sizes.sample(rng) as usize } else { 0 };
        key_buf.clear();
        self.key(i, key_buf);
        self.encode(set, key_buf, vlen, opaque, out)
    }

    /// A set of key `i` (preloading).
    pub fn set_request(&self, i: u64, rng: &mut SmallRng, key_buf: &mut Vec<u8>, out: &mut Vec<u8>) {
        let vlen = self.value_sizes.sample(rng) as usize;
        key_buf.clear();
        self.key(i, key_buf);
        self.encode(true, key_buf, vlen, i as u32, out);
    }

    fn encode(&self, set: bool, key: &[u8], vlen: usize, opaque: u32, out: &mut Vec<u8>) -> &'static str {
        let value = vec![b'v'; vlen];
        match (self.proto, set) {
            (LoadProto::McBinary, false) => mc_binary::request(0x00, opaque, &[], key, &[], out),
            (LoadProto::McBinary, true) => mc_binary::request(0x01, opaque, &[0; 8], key, &value, out),
            (LoadProto::McAscii, false) => {
                out.extend_from_slice(b"get ");
                out.extend_from_slice(key);
                out.extend_from_slice(b"\r\n");
            }
            (LoadProto::McAscii, true) => {
                out.extend_from_slice(b"set ");
                out.extend_from_slice(key);
                out.extend_from_slice(format!(" 0 0 {vlen}\r\n").as_bytes());
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
            }
            (LoadProto::Redis, false) => resp::command(&[b"GET", key], out),
            (LoadProto::Redis, true) => resp::command(&[b"SET", key, &value], out),
            (LoadProto::Http, _) => {}
        }
        if set {
            "set"
        } else {
            "get"
        }
    }
}

/// Reply framing on one connection.
pub enum Replies {
    McBinary(Stream<mc_binary::ResponseFramer>),
    McAscii(Stream<mc_ascii::ResponseFramer>),
    Redis(Stream<resp::ResponseFramer>),
    Http(Stream<http::ResponseFramer>),
}

impl Replies {
    pub fn new(p: LoadProto) -> Replies {
        match p {
            LoadProto::McBinary => Replies::McBinary(Stream::new(Default::default())),
            LoadProto::McAscii => Replies::McAscii(Stream::new(Default::default())),
            LoadProto::Redis => Replies::Redis(Stream::new(Default::default())),
            LoadProto::Http => Replies::Http(Stream::new(Default::default())),
        }
    }

    /// Feed received bytes; `on_reply(error)` per complete final reply.
    pub fn feed(&mut self, data: &[u8], on_reply: &mut impl FnMut(bool)) -> Result<(), Desync> {
        let c = Chunk { ts: 0, seq: 0, ack: None };
        let mut f = |m: RespMsg, _: Meta| {
            if !m.interim && !m.push {
                on_reply(m.error)
            }
        };
        match self {
            Replies::McBinary(s) => s.feed(data, 0, c, &mut f),
            Replies::McAscii(s) => s.feed(data, 0, c, &mut f),
            Replies::Redis(s) => s.feed(data, 0, c, &mut f),
            Replies::Http(s) => s.feed(data, 0, c, &mut f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(p: LoadProto, set_ratio: f64) -> Workload {
        Workload {
            proto: p,
            keys: 100,
            key_sizes: Sizes::Fixed(12),
            value_sizes: Sizes::Fixed(5),
            set_ratio,
            path: "/".into(),
            host: "h".into(),
        }
    }

    #[test]
    fn requests_frame_as_the_analyzer_reads_them() {
        use crate::proto::stream::Framer;
        let mut rng = SmallRng::seed_from_u64(3);
        let mut kb = Vec::new();
        let mut out = Vec::new();
        assert_eq!(w(LoadProto::McAscii, 1.0).request(&mut rng, 0, &mut kb, &mut out), "set");
        assert_eq!(kb.len(), 12);
        assert!(matches!(mc_ascii::RequestFramer.step(&out), crate::proto::stream::Step::Go { skip: 7, .. }));
        out.clear();
        w(LoadProto::Redis, 0.0).request(&mut rng, 0, &mut kb, &mut out);
        assert!(out.starts_with(b"*2\r\n$3\r\nGET\r\n$12\r\n"));
        let mut n = 0;
        Replies::new(LoadProto::Redis).feed(b"$1\r\nx\r\n+OK\r\n", &mut |_| n += 1).unwrap();
        assert_eq!(n, 2);
    }
}
