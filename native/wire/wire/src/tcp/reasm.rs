//! One direction of a TCP connection put back in order. Retransmitted bytes are dropped
//! (the first copy's time stands), out-of-order segments wait in a bounded buffer, and a
//! hole that can never fill (lost from the capture) is reported as a gap.

use crate::proto::session::Data;
use crate::proto::stream::Chunk;
use crate::Ts;

use super::seq_lt;

/// Out-of-order segments kept per direction before declaring a gap.
pub const MAX_OOO_SEGMENTS: usize = 64;
pub const MAX_OOO_BYTES: usize = 1 << 20;

/// What reassembly counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TcpCounts {
    pub retransmitted: u64,
    pub out_of_order: u64,
    pub gaps: u64,
}

/// What reassembly hands on, in order.
#[derive(Debug)]
pub enum Delivery<'a> {
    Data(Data<'a>),
    /// Bytes were lost: whatever was partial is gone.
    Gap,
}

struct Held {
    ts: Ts,
    seq: u32,
    ack: Option<u32>,
    bytes: Vec<u8>,
    /// Wire length (>= bytes.len()).
    len: u32,
    fin: bool,
}

#[derive(Default)]
pub struct Direction {
    /// Next expected sequence number; None until the first segment.
    pub next: Option<u32>,
    /// Latest acknowledgement this side sent.
    pub last_ack: Option<u32>,
    pub fin: bool,
    held: Vec<Held>,
    held_bytes: usize,
}

/// Trim `t` bytes off the front of a segment's captured + missing bytes.
fn trim(bytes: &[u8], len: u32, t: u32) -> (&[u8], u64) {
    let cap = bytes.len() as u32;
    let missing = len.saturating_sub(cap) as u64;
    if t <= cap {
        (&bytes[t as usize..], missing)
    } else {
        (&[], missing.saturating_sub((t - cap) as u64))
    }
}

/// A TCP segment's view for reassembly.
#[derive(Debug, Clone, Copy)]
pub struct SegIn<'a> {
    pub ts: Ts,
    pub seq: u32,
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub bytes: &'a [u8],
    pub len: u32,
}

impl Direction {
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Take one segment; call `deliver` for bytes now in order (and gaps).
    pub fn push(&mut self, s: SegIn<'_>, c: &mut TcpCounts, deliver: &mut impl FnMut(Delivery<'_>)) {
        let data_seq = if s.syn { s.seq.wrapping_add(1) } else { s.seq };
        let next = match self.next {
            Some(n) => n,
            None => {
                self.next = Some(data_seq);
                data_seq
            }
        };
        if s.syn && s.len == 0 {
            return;
        }
        if s.len == 0 && !s.fin {
            return;
        }
        let off = data_seq.wrapping_sub(next) as i32;
        if off > 0 {
            c.out_of_order += 1;
            self.hold(s, data_seq);
            if self.held.len() > MAX_OOO_SEGMENTS || self.held_bytes > MAX_OOO_BYTES {
                self.skip_to_held(c, deliver);
            }
            return;
        }
        let t = (-off) as u32;
        if t >= s.len && !(s.fin && t == s.len && !self.fin) {
            if s.len > 0 {
                c.retransmitted += 1;
            }
            return;
        }
        if t > 0 {
            c.retransmitted += 1;
        }
        self.deliver_in_order(s.ts, data_seq, s.ack, s.bytes, s.len, s.fin, t, deliver);
        self.drain(c, deliver);
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver_in_order(
        &mut self,
        ts: Ts,
        seq: u32,
        ack: Option<u32>,
        bytes: &[u8],
        len: u32,
        fin: bool,
        t: u32,
        deliver: &mut impl FnMut(Delivery<'_>),
    ) {
        let start = seq.wrapping_add(t);
        if len > t {
            let (b, missing) = trim(bytes, len, t);
            deliver(Delivery::Data(Data { bytes: b, missing, chunk: Chunk { ts, seq: start, ack } }));
        }
        let mut end = seq.wrapping_add(len);
        if fin {
            self.fin = true;
            end = end.wrapping_add(1);
        }
        self.next = Some(end);
    }

    fn hold(&mut self, s: SegIn<'_>, data_seq: u32) {
        if self.held.iter().any(|h| h.seq == data_seq && h.len >= s.len) {
            return;
        }
        self.held_bytes += s.bytes.len();
        self.held.push(Held { ts: s.ts, seq: data_seq, ack: s.ack, bytes: s.bytes.to_vec(), len: s.len, fin: s.fin });
    }

    /// Deliver held segments that now start at or before `next`.
    fn drain(&mut self, c: &mut TcpCounts, deliver: &mut impl FnMut(Delivery<'_>)) {
        while let Some(next) = self.next {
            let Some(i) = self.held.iter().position(|h| !seq_lt(next, h.seq)) else { return };
            let h = self.held.swap_remove(i);
            self.held_bytes -= h.bytes.len();
            let t = next.wrapping_sub(h.seq);
            if t >= h.len && !(h.fin && t == h.len && !self.fin) {
                c.retransmitted += 1;
                continue;
            }
            self.deliver_in_order(h.ts, h.seq, h.ack, &h.bytes, h.len, h.fin, t, deliver);
        }
    }

    /// Give up on the hole before the earliest held segment.
    fn skip_to_held(&mut self, c: &mut TcpCounts, deliver: &mut impl FnMut(Delivery<'_>)) {
        let Some(first) = self.held.iter().map(|h| h.seq).min_by(|a, b| if seq_lt(*a, *b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater }) else {
            return;
        };
        c.gaps += 1;
        deliver(Delivery::Gap);
        self.next = Some(first);
        self.drain(c, deliver);
    }

    /// The peer acknowledged `ack`: if that is past what we saw, the capture lost bytes.
    pub fn peer_acked(&mut self, ack: u32, c: &mut TcpCounts, deliver: &mut impl FnMut(Delivery<'_>)) {
        let Some(next) = self.next else { return };
        if !seq_lt(next, ack) {
            return;
        }
        // A FIN we saw counts one past the data; anything else is a hole.
        c.gaps += 1;
        deliver(Delivery::Gap);
        self.next = Some(ack);
        self.held.retain(|h| !seq_lt(h.seq.wrapping_add(h.len), ack));
        self.held_bytes = self.held.iter().map(|h| h.bytes.len()).sum();
        self.drain(c, deliver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: u32, bytes: &[u8]) -> SegIn<'_> {
        SegIn { ts: seq as u64, seq, ack: None, syn: false, fin: false, bytes, len: bytes.len() as u32 }
    }

    fn run(d: &mut Direction, s: SegIn<'_>, c: &mut TcpCounts) -> Vec<String> {
        let mut out = Vec::new();
        d.push(s, c, &mut |x| match x {
            Delivery::Data(data) => out.push(String::from_utf8_lossy(data.bytes).into_owned()),
            Delivery::Gap => out.push("GAP".into()),
        });
        out
    }

    #[test]
    fn in_order_retransmit_overlap_and_reorder() {
        let mut d = Direction::default();
        let mut c = TcpCounts::default();
        assert_eq!(run(&mut d, seg(100, b"abc"), &mut c), vec!["abc"]);
        assert!(run(&mut d, seg(100, b"abc"), &mut c).is_empty());
        assert_eq!(run(&mut d, seg(101, b"bcde"), &mut c), vec!["de"]);
        assert!(run(&mut d, seg(108, b"ij"), &mut c).is_empty());
        assert_eq!(run(&mut d, seg(105, b"fgh"), &mut c), vec!["fgh", "ij"]);
        assert_eq!(c.retransmitted, 2);
        assert_eq!(c.out_of_order, 1);
        assert_eq!(d.next, Some(110));
    }

    #[test]
    fn peer_ack_past_next_is_a_gap() {
        let mut d = Direction::default();
        let mut c = TcpCounts::default();
        run(&mut d, seg(0, b"ab"), &mut c);
        run(&mut d, seg(10, b"zz"), &mut c);
        let mut out = Vec::new();
        d.peer_acked(10, &mut c, &mut |x| out.push(matches!(x, Delivery::Gap)));
        assert_eq!(out, vec![true, false]);
        assert_eq!(d.next, Some(12));
    }

    #[test]
    fn too_many_held_segments_skip_the_hole() {
        let mut d = Direction::default();
        let mut c = TcpCounts::default();
        run(&mut d, seg(0, b"a"), &mut c);
        let mut gaps = 0;
        for i in 0..=MAX_OOO_SEGMENTS as u32 {
            let b = [b'x'];
            d.push(seg(10 + i, &b), &mut c, &mut |x| gaps += usize::from(matches!(x, Delivery::Gap)));
        }
        assert_eq!(gaps, 1);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn wraps_around() {
        let mut d = Direction::default();
        let mut c = TcpCounts::default();
        assert_eq!(run(&mut d, seg(u32::MAX - 1, b"ab"), &mut c), vec!["ab"]);
        assert_eq!(run(&mut d, seg(0, b"cd"), &mut c), vec!["cd"]);
    }
}
