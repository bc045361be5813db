//! memcached binary protocol: a 24-byte header (magic, opcode, key length, extras
//! length, status, body length, opaque, cas) then the body, which is skipped.

use super::stream::{Framer, Step};
use super::{ReqMsg, RespMsg};

pub const REQ_MAGIC: u8 = 0x80;
pub const RESP_MAGIC: u8 = 0x81;
pub const HEADER: usize = 24;
/// memcached refuses items above 1 MiB by default; allow generous room.
const MAX_BODY: u64 = 256 << 20;

pub fn opcode_name(op: u8) -> &'static str {
    match op {
        0x00 => "get",
        0x01 => "set",
        0x02 => "add",
        0x03 => "replace",
        0x04 => "delete",
        0x05 => "incr",
        0x06 => "decr",
        0x07 => "quit",
        0x08 => "flush",
        0x09 => "getq",
        0x0a => "noop",
        0x0b => "version",
        0x0c => "getk",
        0x0d => "getkq",
        0x0e => "append",
        0x0f => "prepend",
        0x10 => "stat",
        0x11 => "setq",
        0x12 => "addq",
        0x13 => "replaceq",
        0x14 => "deleteq",
        0x15 => "incrq",
        0x16 => "decrq",
        0x17 => "quitq",
        0x18 => "flushq",
        0x19 => "appendq",
        0x1a => "prependq",
        0x1b => "verbosity",
        0x1c => "touch",
        0x1d => "gat",
        0x1e => "gatq",
        0x20 => "sasl_list_mechs",
        0x21 => "sasl_auth",
        0x22 => "sasl_step",
        0x23 => "gatk",
        0x24 => "gatkq",
        _ => "other",
    }
}

/// Quiet commands: no response on success (or miss, for gets).
pub fn is_quiet(op: u8) -> bool {
    matches!(op, 0x09 | 0x0d | 0x11..=0x1a | 0x1e | 0x24)
}

pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub key_len: u16,
    pub extras_len: u8,
    pub status: u16,
    pub body_len: u32,
    pub opaque: u32,
}

pub fn parse_header(b: &[u8]) -> Option<Header> {
    let h = b.get(..HEADER)?;
    Some(Header {
        magic: h[0],
        opcode: h[1],
        key_len: u16::from_be_bytes([h[2], h[3]]),
        extras_len: h[4],
        status: u16::from_be_bytes([h[6], h[7]]),
        body_len: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
    })
}

fn plausible(h: &Header, magic: u8) -> bool {
    h.magic == magic && (h.key_len as u64 + h.extras_len as u64) <= h.body_len as u64 && (h.body_len as u64) <= MAX_BODY
}

#[derive(Default)]
pub struct RequestFramer;

impl Framer for RequestFramer {
    type Msg = ReqMsg;
    fn step(&mut self, buf: &[u8]) -> Step<ReqMsg> {
        if buf.is_empty() || buf[0] != REQ_MAGIC {
            return Step::Bad;
        }
        let Some(h) = parse_header(buf) else { return Step::Need };
        if !plausible(&h, REQ_MAGIC) {
            return Step::Bad;
        }
        let mut m = ReqMsg::new(opcode_name(h.opcode));
        m.key_len = Some(h.key_len as u32);
        m.keys = u32::from(h.key_len > 0);
        m.tag = h.opaque;
        m.quiet = is_quiet(h.opcode);
        Step::Go { consumed: HEADER, skip: h.body_len as u64, msg: Some(m) }
    }
    fn reset(&mut self) {}
}

#[derive(Default)]
pub struct ResponseFramer;

impl Framer for ResponseFramer {
    type Msg = RespMsg;
    fn step(&mut self, buf: &[u8]) -> Step<RespMsg> {
        if buf.is_empty() || buf[0] != RESP_MAGIC {
            return Step::Bad;
        }
        let Some(h) = parse_header(buf) else { return Step::Need };
        if !plausible(&h, RESP_MAGIC) {
            return Step::Bad;
        }
        // Status 1 (key not found) is a normal miss, not an error.
        let m = RespMsg { tag: h.opaque, status: h.status, error: h.status > 1, ..RespMsg::default() };
        Step::Go { consumed: HEADER, skip: h.body_len as u64, msg: Some(m) }
    }
    fn reset(&mut self) {}
}

/// Build a request header + body (used by the load generator and tests).
pub fn request(opcode: u8, opaque: u32, extras: &[u8], key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let body = extras.len() + key.len() + value.len();
    out.push(REQ_MAGIC);
    out.push(opcode);
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.push(extras.len() as u8);
    out.push(0);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(body as u32).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_request_and_response() {
        let mut b = Vec::new();
        request(0x00, 7, &[], b"key1", &[], &mut b);
        match RequestFramer.step(&b) {
            Step::Go { consumed: 24, skip: 4, msg: Some(m) } => {
                assert_eq!((m.op, m.key_len, m.tag, m.quiet), ("get", Some(4), 7, false))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(RequestFramer.step(&b[..10]), Step::Need);
        b[0] = RESP_MAGIC;
        assert!(matches!(ResponseFramer.step(&b), Step::Go { msg: Some(RespMsg { tag: 7, .. }), .. }));
        assert_eq!(RequestFramer.step(&b), Step::Bad);
    }

    #[test]
    fn implausible_lengths_are_bad() {
        let mut b = Vec::new();
        request(0x01, 1, &[0; 8], b"k", b"v", &mut b);
        b[2] = 0xff; // key length beyond the body
        assert_eq!(RequestFramer.step(&b), Step::Bad);
    }
}
