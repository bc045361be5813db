//! One direction of a connection turned into messages: buffers partial headers, skips
//! bodies without storing them, and stamps each message with its first and last bytes.

use crate::Ts;

/// Largest header a framer may ask to buffer; past it the stream is not this protocol.
pub const MAX_HEADER: usize = 64 * 1024;
/// A body that lasts until the connection closes (HTTP without length).
pub const UNTIL_CLOSE: u64 = u64::MAX;

/// What a framer made of the bytes at the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<M> {
    /// The header is incomplete: wait for more bytes.
    Need,
    /// `consumed` header bytes read, then `skip` body bytes to pass over; `msg` completes
    /// once they are skipped (None: the message continues, e.g. more chunks).
    Go { consumed: usize, skip: u64, msg: Option<M> },
    /// These bytes are not a message of this protocol.
    Bad,
}

/// Splits one direction into messages. Must consume at least one byte per `Go`.
pub trait Framer {
    type Msg;
    fn step(&mut self, buf: &[u8]) -> Step<Self::Msg>;
    /// Forget any partial message (after a gap).
    fn reset(&mut self);
}

/// Where and when a message lay on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    pub t_start: Ts,
    pub t_end: Ts,
    pub bytes: u64,
    /// TCP sequence number just after the message.
    pub seq_end: u32,
    /// Acknowledgement number of the segment carrying the first byte.
    pub ack_start: Option<u32>,
}

/// The stream lost its footing (bytes that do not parse, or a hole in a header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desync;

pub struct Stream<F: Framer> {
    pub framer: F,
    buf: Vec<u8>,
    skip: u64,
    pending: Option<F::Msg>,
    in_msg: bool,
    meta: Meta,
}

/// The segment being fed.
#[derive(Debug, Clone, Copy)]
pub struct Chunk {
    pub ts: Ts,
    pub seq: u32,
    pub ack: Option<u32>,
}

impl<F: Framer> Stream<F> {
    pub fn new(framer: F) -> Self {
        Stream { framer, buf: Vec::new(), skip: 0, pending: None, in_msg: false, meta: Meta::default() }
    }

    pub fn reset(&mut self) {
        self.framer.reset();
        self.buf.clear();
        self.buf.shrink_to(4096);
        self.skip = 0;
        self.pending = None;
        self.in_msg = false;
    }

    /// At a message boundary with nothing buffered.
    pub fn idle(&self) -> bool {
        !self.in_msg && self.buf.is_empty() && self.skip == 0
    }

    /// Feed captured bytes; `missing` more bytes were on the wire but not captured.
    pub fn feed(
        &mut self,
        data: &[u8],
        missing: u64,
        chunk: Chunk,
        emit: &mut impl FnMut(F::Msg, Meta),
    ) -> Result<(), Desync> {
        // A partial header is completed from the new bytes a little at a time, so a
        // large segment is not copied just to finish a few bytes of header.
        let mut off = 0usize;
        while !self.buf.is_empty() && off < data.len() {
            let old_len = self.buf.len();
            let take = (data.len() - off).min(old_len.max(256));
            self.buf.extend_from_slice(&data[off..off + take]);
            let base_seq = chunk.seq.wrapping_add(off as u32).wrapping_sub(old_len as u32);
            let mut buf = std::mem::take(&mut self.buf);
            let used = self.run(&buf, Chunk { seq: base_seq, ..chunk }, base_seq, emit)?;
            off += take;
            if used >= buf.len() {
                buf.clear();
            } else {
                buf.drain(..used);
            }
            self.buf = buf;
            if self.buf.len() > MAX_HEADER {
                return Err(Desync);
            }
        }
        if self.buf.is_empty() && off < data.len() {
            let rest = &data[off..];
            let seq = chunk.seq.wrapping_add(off as u32);
            let used = self.run(rest, Chunk { seq, ..chunk }, seq, emit)?;
            if used < rest.len() {
                self.buf.extend_from_slice(&rest[used..]);
            }
        }
        if self.buf.len() > MAX_HEADER {
            return Err(Desync);
        }
        if missing > 0 {
            // Bytes not captured can only fall inside a body being skipped.
            if !self.buf.is_empty() || self.skip < missing {
                return Err(Desync);
            }
            self.skip -= missing;
            let seq_end = chunk.seq.wrapping_add(data.len() as u32).wrapping_add(missing as u32);
            self.meta.bytes += missing;
            if self.skip == 0 {
                self.complete(chunk, seq_end, emit);
            }
        }
        Ok(())
    }

    fn complete(&mut self, chunk: Chunk, seq_end: u32, emit: &mut impl FnMut(F::Msg, Meta)) {
        if let Some(m) = self.pending.take() {
            self.meta.t_end = chunk.ts;
            self.meta.seq_end = seq_end;
            emit(m, self.meta);
            self.in_msg = false;
        }
    }

    /// The connection closed: a body that lasts until close is complete.
    pub fn close(&mut self, chunk: Chunk, emit: &mut impl FnMut(F::Msg, Meta)) {
        if self.skip == UNTIL_CLOSE && self.pending.is_some() {
            self.skip = 0;
            self.complete(chunk, chunk.seq, emit);
        }
    }

    fn run(&mut self, d: &[u8], chunk: Chunk, base_seq: u32, emit: &mut impl FnMut(F::Msg, Meta)) -> Result<usize, Desync> {
        let mut pos = 0usize;
        loop {
            if self.skip > 0 {
                let avail = (d.len() - pos) as u64;
                let k = self.skip.min(avail);
                if self.skip != UNTIL_CLOSE {
                    self.skip -= k;
                }
                pos += k as usize;
                self.meta.bytes += k;
                if self.skip > 0 {
                    return Ok(pos);
                }
            }
            if self.pending.is_some() {
                self.complete(chunk, base_seq.wrapping_add(pos as u32), emit);
            }
            if pos >= d.len() {
                return Ok(pos);
            }
            if !self.in_msg {
                self.in_msg = true;
                self.meta = Meta { t_start: chunk.ts, t_end: chunk.ts, bytes: 0, seq_end: 0, ack_start: chunk.ack };
            }
            match self.framer.step(&d[pos..]) {
                Step::Need => {
                    if d.len() - pos > MAX_HEADER {
                        return Err(Desync);
                    }
                    return Ok(pos);
                }
                Step::Go { consumed, skip, msg } => {
                    if consumed == 0 && skip == 0 && msg.is_none() || consumed > d.len() - pos {
                        return Err(Desync);
                    }
                    pos += consumed;
                    self.meta.bytes += consumed as u64;
                    self.skip = skip;
                    if msg.is_some() {
                        self.pending = msg;
                    }
                }
                Step::Bad => return Err(Desync),
            }
        }
    }
}

/// Position of the end of the first line ("\n") in `buf`, if complete.
#[inline]
pub fn line_end(buf: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', buf)
}

/// The line without its "\r\n" or "\n".
#[inline]
pub fn trim_eol(line: &[u8]) -> &[u8] {
    let l = line.strip_suffix(b"\n").unwrap_or(line);
    l.strip_suffix(b"\r").unwrap_or(l)
}

pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    Some(v)
}

pub fn parse_i64(b: &[u8]) -> Option<i64> {
    match b.first() {
        Some(b'-') => parse_u64(&b[1..]).map(|v| -(v.min(i64::MAX as u64) as i64)),
        _ => parse_u64(b).map(|v| v.min(i64::MAX as u64) as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages are "<n>:" followed by n body bytes.
    struct LenPrefixed;
    impl Framer for LenPrefixed {
        type Msg = u64;
        fn step(&mut self, buf: &[u8]) -> Step<u64> {
            match memchr::memchr(b':', buf) {
                None if buf.len() > 5 => Step::Bad,
                None => Step::Need,
                Some(i) => match parse_u64(&buf[..i]) {
                    Some(n) => Step::Go { consumed: i + 1, skip: n, msg: Some(n) },
                    None => Step::Bad,
                },
            }
        }
        fn reset(&mut self) {}
    }

    fn chunk(ts: Ts, seq: u32) -> Chunk {
        Chunk { ts, seq, ack: Some(9) }
    }

    #[test]
    fn messages_across_and_within_segments() {
        let mut s = Stream::new(LenPrefixed);
        let mut got = Vec::new();
        let mut emit = |m: u64, meta: Meta| got.push((m, meta.t_start, meta.t_end, meta.bytes, meta.seq_end));
        s.feed(b"3:abc2", 0, chunk(1, 100), &mut emit).unwrap();
        s.feed(b":x", 0, chunk(2, 106), &mut emit).unwrap();
        s.feed(b"y", 0, chunk(3, 108), &mut emit).unwrap();
        assert_eq!(got, vec![(3, 1, 1, 5, 105), (2, 1, 3, 4, 109)]);
        assert!(s.idle());
    }

    #[test]
    fn missing_bytes_inside_a_body_are_skipped() {
        let mut s = Stream::new(LenPrefixed);
        let mut got = Vec::new();
        let mut emit = |m: u64, meta: Meta| got.push((m, meta.bytes));
        s.feed(b"10:ab", 0, chunk(1, 0), &mut emit).unwrap();
        s.feed(b"cd", 6, chunk(2, 5), &mut emit).unwrap();
        // missing bytes in a header: desync
        assert_eq!(s.feed(b"1", 3, chunk(3, 13), &mut emit), Err(Desync));
        assert_eq!(got, vec![(10, 13)]);
    }

    #[test]
    fn garbage_desyncs() {
        let mut s = Stream::new(LenPrefixed);
        let mut emit = |_: u64, _: Meta| {};
        assert_eq!(s.feed(b"zz:", 0, chunk(1, 0), &mut emit), Err(Desync));
    }
}
