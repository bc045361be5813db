//! memcached text protocol: command lines, storage data blocks, multi-line replies
//! (VALUE ... END, STAT ... END) and meta commands (mg/ms/md/ma/mn).

use super::names;
use super::stream::{line_end, parse_u64, trim_eol, Framer, Step};
use super::{ReqMsg, RespMsg};

/// Longest command line accepted (a key is at most 250 bytes; multi-get lines are longer).
const MAX_LINE: usize = 16 * 1024;

fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b' ').filter(|t| !t.is_empty())
}

fn is_command_word(t: &[u8]) -> bool {
    !t.is_empty() && t.iter().all(|b| b.is_ascii_alphabetic() || *b == b'_')
}

/// The line of the next message, or Need / Bad.
fn next_line(buf: &[u8]) -> Result<(usize, &[u8]), Step<()>> {
    match line_end(buf) {
        Some(i) => Ok((i + 1, trim_eol(&buf[..=i]))),
        None if buf.len() > MAX_LINE => Err(Step::Bad),
        None => Err(Step::Need),
    }
}

fn lift<M>(s: Step<()>) -> Step<M> {
    match s {
        Step::Need => Step::Need,
        _ => Step::Bad,
    }
}

#[derive(Default)]
pub struct RequestFramer;

impl Framer for RequestFramer {
    type Msg = ReqMsg;
    fn step(&mut self, buf: &[u8]) -> Step<ReqMsg> {
        let (consumed, line) = match next_line(buf) {
            Ok(x) => x,
            Err(s) => return lift(s),
        };
        let toks: Vec<&[u8]> = tokens(line).take(8).collect();
        let Some(cmd) = toks.first() else {
            // An empty line gets "ERROR".
            return Step::Go { consumed, skip: 0, msg: Some(ReqMsg::new("other")) };
        };
        if !is_command_word(cmd) {
            return Step::Bad;
        }
        let op = names::command(cmd);
        let mut m = ReqMsg::new(op);
        let noreply = toks.last().is_some_and(|t| *t == b"noreply");
        let key = |i: usize| toks.get(i).map(|k| k.len() as u32);
        let mut skip = 0u64;
        match op {
            "get" | "gets" => {
                m.key_len = key(1);
                m.keys = tokens(line).count().saturating_sub(1) as u32;
            }
            "gat" | "gats" => {
                m.key_len = key(2);
                m.keys = tokens(line).count().saturating_sub(2) as u32;
            }
            "set" | "add" | "replace" | "append" | "prepend" | "cas" => {
                let Some(n) = toks.get(4).and_then(|t| parse_u64(t)) else { return Step::Bad };
                m.key_len = key(1);
                m.keys = 1;
                skip = n + 2;
            }
            "delete" | "incr" | "decr" | "touch" => {
                m.key_len = key(1);
                m.keys = 1;
            }
            "mg" | "md" | "ma" | "ms" | "me" => {
                m.key_len = key(1);
                m.keys = 1;
                if op == "ms" {
                    let Some(n) = toks.get(2).and_then(|t| parse_u64(t)) else { return Step::Bad };
                    skip = n + 2;
                }
                // Quiet mode ("q" flag) answers only some requests: order alone cannot
                // match those, so they are not sampled (the stream resynchronises).
                if toks.iter().skip(2).any(|t| *t == b"q") {
                    return Step::Bad;
                }
            }
            "quit" => m.replies = 0,
            _ => {}
        }
        if noreply {
            m.replies = 0;
        }
        Step::Go { consumed, skip, msg: Some(m) }
    }
    fn reset(&mut self) {}
}

#[derive(Default)]
pub struct ResponseFramer {
    /// Inside a VALUE/STAT listing that ends with END.
    listing: bool,
    /// The listing has held a VALUE (or STAT/ITEM) line: its END is no miss.
    listed: bool,
}

/// `status` after memcached binary's and Redis's: 0 a reply, 1 a miss (a get's bare
/// `END`, meta `EN`/`NF`, `NOT_FOUND`), 2 an error (`ERROR`, `CLIENT_ERROR`, `SERVER_ERROR`).
const MISS: u16 = 1;
const ERROR: u16 = 2;

impl Framer for ResponseFramer {
    type Msg = RespMsg;
    fn step(&mut self, buf: &[u8]) -> Step<RespMsg> {
        let (consumed, line) = match next_line(buf) {
            Ok(x) => x,
            Err(s) => return lift(s),
        };
        let mut toks = tokens(line);
        let first = toks.next().unwrap_or(b"");
        if !first.first().is_some_and(|b| b.is_ascii_uppercase() || b.is_ascii_digit()) {
            return Step::Bad;
        }
        let done = |status: u16| {
            let msg = RespMsg { error: status == ERROR, status, ..RespMsg::default() };
            Step::Go { consumed, skip: 0, msg: Some(msg) }
        };
        match first {
            b"VALUE" => {
                let Some(n) = toks.nth(2).and_then(parse_u64) else { return Step::Bad };
                (self.listing, self.listed) = (true, true);
                Step::Go { consumed, skip: n + 2, msg: None }
            }
            b"STAT" | b"ITEM" => {
                (self.listing, self.listed) = (true, true);
                Step::Go { consumed, skip: 0, msg: None }
            }
            b"END" => {
                let listed = std::mem::take(&mut self.listed);
                self.listing = false;
                done(if listed { 0 } else { MISS })
            }
            b"VA" if !self.listing => {
                let Some(n) = toks.next().and_then(parse_u64) else { return Step::Bad };
                Step::Go { consumed, skip: n + 2, msg: Some(RespMsg::default()) }
            }
            _ if self.listing => Step::Bad,
            b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => done(ERROR),
            b"EN" | b"NF" | b"NOT_FOUND" => done(MISS),
            _ => done(0),
        }
    }
    fn reset(&mut self) {
        (self.listing, self.listed) = (false, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(b: &[u8]) -> Step<ReqMsg> {
        RequestFramer.step(b)
    }

    #[test]
    fn requests() {
        match req(b"get a bb ccc\r\n") {
            Step::Go { consumed: 14, skip: 0, msg: Some(m) } => assert_eq!((m.op, m.keys, m.key_len), ("get", 3, Some(1))),
            o => panic!("{o:?}"),
        }
        match req(b"set k 0 0 5 noreply\r\nhello\r\n") {
            Step::Go { consumed: 21, skip: 7, msg: Some(m) } => assert_eq!((m.op, m.replies), ("set", 0)),
            o => panic!("{o:?}"),
        }
        assert_eq!(req(b"get k"), Step::Need);
        assert_eq!(req(b"\x80\x00\r\n"), Step::Bad);
        assert_eq!(req(b"set k 0 0 x\r\n"), Step::Bad);
        assert_eq!(req(b"mg k v q\r\n"), Step::Bad);
    }

    #[test]
    fn multi_value_response() {
        let mut f = ResponseFramer::default();
        let r = b"VALUE a 0 2\r\nxy\r\nVALUE b 0 1\r\nz\r\nEND\r\n";
        assert_eq!(f.step(r), Step::Go { consumed: 13, skip: 4, msg: None });
        assert_eq!(f.step(&r[17..]), Step::Go { consumed: 13, skip: 3, msg: None });
        assert!(matches!(f.step(&r[33..]), Step::Go { consumed: 5, skip: 0, msg: Some(_) }));
        assert!(matches!(f.step(b"SERVER_ERROR out of memory\r\n"), Step::Go { msg: Some(RespMsg { error: true, .. }), .. }));
        assert_eq!(f.step(b"hello\r\n"), Step::Bad);
    }

    fn status(f: &mut ResponseFramer, r: &[u8]) -> (u16, bool) {
        match f.step(r) {
            Step::Go { msg: Some(m), .. } => (m.status, m.error),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn status_says_miss_and_error_as_memcached_binary_does() {
        // Every record said "status": 0; a get's miss could not be told from a hit.
        let mut f = ResponseFramer::default();
        assert_eq!(status(&mut f, b"END\r\n"), (MISS, false)); // get of a missing key
        assert_eq!(f.step(b"VALUE a 0 2\r\n"), Step::Go { consumed: 13, skip: 4, msg: None });
        assert_eq!(status(&mut f, b"END\r\n"), (0, false)); // a hit
        assert_eq!(status(&mut f, b"END\r\n"), (MISS, false)); // the hit is not carried over
        assert_eq!(status(&mut f, b"EN\r\n"), (MISS, false)); // meta get's miss
        assert_eq!(status(&mut f, b"NOT_FOUND\r\n"), (MISS, false));
        assert_eq!(status(&mut f, b"STORED\r\n"), (0, false));
        assert_eq!(status(&mut f, b"HD\r\n"), (0, false));
        assert_eq!(status(&mut f, b"SERVER_ERROR out of memory\r\n"), (ERROR, true));
        assert_eq!(status(&mut f, b"ERROR\r\n"), (ERROR, true));
        f.reset();
        assert_eq!(status(&mut f, b"END\r\n"), (MISS, false));
    }
}
