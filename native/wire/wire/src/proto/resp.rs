//! Redis RESP2/RESP3: requests are arrays of bulk strings (or inline lines); replies are
//! any RESP value, nested aggregates included. CLIENT REPLY OFF/ON/SKIP is tracked so
//! that commands that get no reply do not shift the matching; RESP3 pushes are out of band.

use super::names;
use super::stream::{line_end, parse_i64, trim_eol, Framer, Step};
use super::{ReqMsg, RespMsg};

const MAX_LINE: usize = 64 * 1024;
const MAX_ELEMENTS: i64 = 1 << 24;
const MAX_BULK: i64 = 512 << 20;
const MAX_DEPTH: usize = 128;
/// Arguments shorter than this are kept (command name, CLIENT REPLY mode).
const ARG_KEEP: usize = 32;

fn next_line(buf: &[u8]) -> Option<Result<(usize, &[u8]), ()>> {
    match line_end(buf) {
        Some(i) => Some(Ok((i + 1, trim_eol(&buf[..=i])))),
        None if buf.len() > MAX_LINE => Some(Err(())),
        None => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyMode {
    On,
    Off,
    SkipNext,
}

pub struct RequestFramer {
    mode: ReplyMode,
    /// Elements left in the current command array (0: at a command boundary).
    remaining: u64,
    elements: u64,
    index: u64,
    args: [([u8; ARG_KEEP], usize); 3],
    key_len: Option<u32>,
}

impl Default for RequestFramer {
    fn default() -> Self {
        RequestFramer { mode: ReplyMode::On, remaining: 0, elements: 0, index: 0, args: [([0; ARG_KEEP], 0); 3], key_len: None }
    }
}

impl RequestFramer {
    fn arg(&self, i: usize) -> &[u8] {
        let (b, n) = &self.args[i];
        &b[..*n]
    }

    fn finish(&mut self, elements: u64) -> ReqMsg {
        let op = names::command(self.arg(0));
        let mut m = ReqMsg::new(op);
        m.key_len = self.key_len;
        m.keys = match op {
            "mget" | "del" | "exists" | "unlink" | "touch" => elements.saturating_sub(1) as u32,
            "mset" | "msetnx" => (elements.saturating_sub(1) / 2) as u32,
            _ => u32::from(elements > 1),
        };
        m.replies = match self.mode {
            ReplyMode::On => 1,
            ReplyMode::Off => 0,
            ReplyMode::SkipNext => {
                self.mode = ReplyMode::On;
                0
            }
        };
        if op == "client" && self.arg(1).eq_ignore_ascii_case(b"reply") {
            let a = self.arg(2);
            if a.eq_ignore_ascii_case(b"on") {
                self.mode = ReplyMode::On;
                m.replies = 1;
            } else if a.eq_ignore_ascii_case(b"off") {
                self.mode = ReplyMode::Off;
                m.replies = 0;
            } else if a.eq_ignore_ascii_case(b"skip") {
                if self.mode == ReplyMode::On {
                    self.mode = ReplyMode::SkipNext;
                }
                m.replies = 0;
            }
        }
        if matches!(op, "subscribe" | "psubscribe" | "ssubscribe") && m.replies == 1 {
            m.replies = elements.saturating_sub(1).max(1) as u32;
        }
        for a in self.args.iter_mut() {
            a.1 = 0;
        }
        self.key_len = None;
        m
    }

    fn keep(&mut self, i: u64, data: &[u8]) {
        if let Some(slot) = self.args.get_mut(i as usize) {
            let n = data.len().min(ARG_KEEP);
            slot.0[..n].copy_from_slice(&data[..n]);
            slot.1 = n;
        }
    }
}

impl Framer for RequestFramer {
    type Msg = ReqMsg;
    fn step(&mut self, buf: &[u8]) -> Step<ReqMsg> {
        let (consumed, line) = match next_line(buf) {
            None => return Step::Need,
            Some(Err(())) => return Step::Bad,
            Some(Ok(x)) => x,
        };
        if self.remaining == 0 {
            if line.first() == Some(&b'*') {
                let Some(n) = parse_i64(&line[1..]) else { return Step::Bad };
                if n > MAX_ELEMENTS {
                    return Step::Bad;
                }
                if n <= 0 {
                    // Redis ignores an empty command array: no reply.
                    let mut m = ReqMsg::new("other");
                    m.replies = 0;
                    return Step::Go { consumed, skip: 0, msg: Some(m) };
                }
                self.remaining = n as u64;
                self.elements = n as u64;
                self.index = 0;
                return Step::Go { consumed, skip: 0, msg: None };
            }
            // Inline command: space-separated words on one line.
            let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
            let Some(cmd) = words.next() else {
                let mut m = ReqMsg::new("other");
                m.replies = 0;
                return Step::Go { consumed, skip: 0, msg: Some(m) };
            };
            if !cmd.iter().all(|b| b.is_ascii_alphabetic() || *b == b'_' || *b == b'-' || *b == b'|') {
                return Step::Bad;
            }
            self.keep(0, cmd);
            let mut n = 1u64;
            for (i, w) in words.enumerate() {
                if i == 0 {
                    self.key_len = Some(w.len() as u32);
                }
                self.keep(i as u64 + 1, w);
                n += 1;
            }
            let m = self.finish(n);
            return Step::Go { consumed, skip: 0, msg: Some(m) };
        }
        // Inside a command array: a bulk string "$<len>".
        if line.first() != Some(&b'$') {
            return Step::Bad;
        }
        let Some(len) = parse_i64(&line[1..]) else { return Step::Bad };
        if !(0..=MAX_BULK).contains(&len) {
            return Step::Bad;
        }
        let len = len as usize;
        let i = self.index;
        if i == 1 {
            self.key_len = Some(len as u32);
        }
        let mut consumed = consumed;
        let mut skip = len as u64 + 2;
        if i < 3 && len <= ARG_KEEP {
            // Keep short leading arguments: wait for the whole element.
            if buf.len() < consumed + len + 2 {
                return Step::Need;
            }
            let data = &buf[consumed..consumed + len];
            if &buf[consumed + len..consumed + len + 2] != b"\r\n" {
                return Step::Bad;
            }
            if i == 0 && !data.iter().all(|b| b.is_ascii_graphic()) {
                return Step::Bad;
            }
            self.keep(i, data);
            consumed += len + 2;
            skip = 0;
        }
        self.index += 1;
        self.remaining -= 1;
        let msg = if self.remaining == 0 { Some(self.finish(self.elements)) } else { None };
        Step::Go { consumed, skip, msg }
    }
    fn reset(&mut self) {
        let mode = self.mode;
        *self = RequestFramer::default();
        self.mode = mode;
    }
}

#[derive(Default)]
pub struct ResponseFramer {
    /// Elements left in each open aggregate, innermost last.
    stack: Vec<u64>,
    push: bool,
    error: bool,
    /// The reply is a null (RESP2 `$-1`, `*-1`; RESP3 `_`): GET's miss.
    null: bool,
    /// The reply began with an attribute map; its last element is the real value.
    attr_top: bool,
}

impl ResponseFramer {
    /// One element finished; true when the whole reply is complete.
    fn complete_one(&mut self) -> bool {
        loop {
            match self.stack.last_mut() {
                None => return true,
                Some(top) => {
                    *top -= 1;
                    if *top == 0 {
                        self.stack.pop();
                    } else {
                        return false;
                    }
                }
            }
        }
    }

    fn done(&mut self, consumed: usize, skip: u64) -> Step<RespMsg> {
        if self.complete_one() {
            let m = RespMsg { push: self.push, error: self.error, status: status(self.error, self.null), ..RespMsg::default() };
            self.push = false;
            self.error = false;
            self.null = false;
            self.attr_top = false;
            Step::Go { consumed, skip, msg: Some(m) }
        } else {
            Step::Go { consumed, skip, msg: None }
        }
    }
}

impl Framer for ResponseFramer {
    type Msg = RespMsg;
    fn step(&mut self, buf: &[u8]) -> Step<RespMsg> {
        let (consumed, line) = match next_line(buf) {
            None => return Step::Need,
            Some(Err(())) => return Step::Bad,
            Some(Ok(x)) => x,
        };
        let Some(&t) = line.first() else { return Step::Bad };
        // The reply itself, not an element inside it (nor an attribute before it).
        let top = self.stack.is_empty() || (self.attr_top && self.stack == [1]);
        if top {
            self.attr_top = self.stack.is_empty() && t == b'|';
            self.push = t == b'>';
            self.error = t == b'-' || t == b'!';
            self.null = t == b'_';
        }
        match t {
            b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => self.done(consumed, 0),
            b'$' | b'!' | b'=' => match parse_i64(&line[1..]) {
                Some(n) if n < 0 => {
                    self.null |= top;
                    self.done(consumed, 0)
                }
                Some(n) if n <= MAX_BULK => self.done(consumed, n as u64 + 2),
                _ => Step::Bad,
            },
            b'*' | b'%' | b'~' | b'>' | b'|' => {
                let Some(n) = parse_i64(&line[1..]) else { return Step::Bad };
                if n > MAX_ELEMENTS {
                    return Step::Bad;
                }
                if n < 0 {
                    self.null |= top;
                    return self.done(consumed, 0);
                }
                let n = n as u64;
                let count = match t {
                    b'%' => 2 * n,
                    // An attribute map is followed by the value it describes.
                    b'|' => 2 * n + 1,
                    _ => n,
                };
                if count == 0 {
                    return self.done(consumed, 0);
                }
                if self.stack.len() >= MAX_DEPTH {
                    return Step::Bad;
                }
                self.stack.push(count);
                Step::Go { consumed, skip: 0, msg: None }
            }
            _ => Step::Bad,
        }
    }
    fn reset(&mut self) {
        self.stack.clear();
        self.push = false;
        self.error = false;
        self.null = false;
        self.attr_top = false;
    }
}

/// A reply's `status` in the records, after memcached binary's (0 no error, 1 key not
/// found: a miss, above 1 an error): 0 a reply, 1 a null reply (GET's miss), 2 an error
/// reply (`-ERR ...`, RESP3 `!`).
pub const STATUS_NULL: u16 = 1;
pub const STATUS_ERROR: u16 = 2;

fn status(error: bool, null: bool) -> u16 {
    if error {
        STATUS_ERROR
    } else if null {
        STATUS_NULL
    } else {
        0
    }
}

/// Encode a command as a RESP array of bulk strings.
pub fn command(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::super::stream::{Chunk, Meta, Stream};
    use super::*;

    fn requests(bytes: &[u8]) -> Vec<(&'static str, u32)> {
        let mut s = Stream::new(RequestFramer::default());
        let mut got = Vec::new();
        s.feed(bytes, 0, Chunk { ts: 0, seq: 0, ack: None }, &mut |m: ReqMsg, _: Meta| got.push((m.op, m.replies)))
            .unwrap();
        got
    }

    fn replies(bytes: &[u8]) -> Vec<RespMsg> {
        let mut s = Stream::new(ResponseFramer::default());
        let mut got = Vec::new();
        s.feed(bytes, 0, Chunk { ts: 0, seq: 0, ack: None }, &mut |m: RespMsg, _: Meta| got.push(m)).unwrap();
        got
    }

    #[test]
    fn pipelined_commands_and_client_reply() {
        let mut b = Vec::new();
        command(&[b"SET", b"k", b"v"], &mut b);
        command(&[b"CLIENT", b"REPLY", b"OFF"], &mut b);
        command(&[b"GET", b"k"], &mut b);
        command(&[b"CLIENT", b"REPLY", b"ON"], &mut b);
        command(&[b"CLIENT", b"REPLY", b"SKIP"], &mut b);
        command(&[b"GET", b"k"], &mut b);
        command(&[b"GET", b"k"], &mut b);
        b.extend_from_slice(b"PING\r\n");
        assert_eq!(
            requests(&b),
            vec![("set", 1), ("client", 0), ("get", 0), ("client", 1), ("client", 0), ("get", 0), ("get", 1), ("ping", 1)]
        );
    }

    #[test]
    fn nested_resp3_values() {
        let r = b"*2\r\n$3\r\nabc\r\n%1\r\n+a\r\n*1\r\n:1\r\n>2\r\n+msg\r\n+x\r\n|1\r\n+k\r\n+v\r\n-ERR no\r\n$-1\r\n";
        let got = replies(r);
        assert_eq!(got.len(), 4);
        assert!(got[1].push);
        assert!(got[2].error && !got[3].error);
    }

    #[test]
    fn status_says_error_and_miss_as_memcached_binary_does() {
        // Every Redis record said "status": 0, an error reply and GET's miss included.
        let got = replies(b"+OK\r\n$1\r\nx\r\n$-1\r\n*-1\r\n_\r\n-ERR unknown command 'X'\r\n!5\r\nERR x\r\n:0\r\n*2\r\n$-1\r\n_\r\n|1\r\n+k\r\n+v\r\n_\r\n|1\r\n+k\r\n_\r\n:1\r\n");
        let status: Vec<u16> = got.iter().map(|m| m.status).collect();
        // nulls inside an array, or inside an attribute, are elements, not the reply
        assert_eq!(status, vec![0, 0, 1, 1, 1, 2, 2, 0, 0, 1, 0]);
        assert!(got.iter().all(|m| m.error == (m.status == STATUS_ERROR)));
    }

    #[test]
    fn bad_bytes() {
        assert_eq!(ResponseFramer::default().step(b"?\r\n"), Step::Bad);
        assert_eq!(RequestFramer::default().step(b"\x80\x01\r\n"), Step::Bad);
    }
}
