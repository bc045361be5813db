//! HTTP/1.1 with httparse: keep-alive and pipelining (one message after another),
//! Content-Length and chunked bodies, 1xx interim responses (100-continue) that answer
//! no request, HEAD/204/304 responses without a body, bodies delimited by close.

use std::collections::VecDeque;

use super::names;
use super::session::Expect;
use super::stream::{line_end, trim_eol, Framer, Step, UNTIL_CLOSE};
use super::{ReqMsg, RespMsg};

const MAX_HEADERS: usize = 128;
const MAX_CHUNK_LINE: usize = 4096;
/// Requests whose HEAD-ness is remembered for the response side.
const MAX_PENDING: usize = 65536;

pub const METHODS: &[&[u8]] = &[b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Headers,
    ChunkSize,
    Trailers,
}

struct BodyInfo {
    chunked: bool,
    length: Option<u64>,
}

fn body_info(headers: &[httparse::Header<'_>]) -> Result<BodyInfo, ()> {
    let mut info = BodyInfo { chunked: false, length: None };
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let v = std::str::from_utf8(h.value).map_err(|_| ())?;
            if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("chunked")) {
                info.chunked = true;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| ())?;
            info.length = Some(v.trim().parse::<u64>().map_err(|_| ())?);
        }
    }
    Ok(info)
}

/// Chunk-size lines and trailers, shared by both directions.
fn chunk_step<M>(state: &mut Body, cur: &mut Option<M>, buf: &[u8]) -> Step<M> {
    let Some(i) = line_end(buf) else {
        return if buf.len() > MAX_CHUNK_LINE { Step::Bad } else { Step::Need };
    };
    let line = trim_eol(&buf[..=i]);
    match *state {
        Body::ChunkSize => {
            let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
            let hex = std::str::from_utf8(hex).unwrap_or("").trim();
            let Ok(size) = u64::from_str_radix(hex, 16) else { return Step::Bad };
            if size == 0 {
                *state = Body::Trailers;
                Step::Go { consumed: i + 1, skip: 0, msg: None }
            } else {
                Step::Go { consumed: i + 1, skip: size.saturating_add(2), msg: None }
            }
        }
        Body::Trailers => {
            if line.is_empty() {
                *state = Body::Headers;
                Step::Go { consumed: i + 1, skip: 0, msg: cur.take() }
            } else {
                Step::Go { consumed: i + 1, skip: 0, msg: None }
            }
        }
        Body::Headers => Step::Bad,
    }
}

pub struct RequestFramer {
    state: Body,
    cur: Option<ReqMsg>,
}

impl Default for RequestFramer {
    fn default() -> Self {
        RequestFramer { state: Body::Headers, cur: None }
    }
}

impl Framer for RequestFramer {
    type Msg = ReqMsg;
    fn step(&mut self, buf: &[u8]) -> Step<ReqMsg> {
        if self.state != Body::Headers {
            return chunk_step(&mut self.state, &mut self.cur, buf);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Step::Need,
            Err(_) => return Step::Bad,
        };
        let method = req.method.unwrap_or("");
        let mut m = ReqMsg::new(names::exact(method.as_bytes()));
        m.head = method == "HEAD";
        m.key_len = req.path.map(|p| p.len() as u32);
        m.keys = 1;
        let Ok(info) = body_info(req.headers) else { return Step::Bad };
        if info.chunked {
            self.state = Body::ChunkSize;
            self.cur = Some(m);
            Step::Go { consumed: n, skip: 0, msg: None }
        } else {
            Step::Go { consumed: n, skip: info.length.unwrap_or(0), msg: Some(m) }
        }
    }
    fn reset(&mut self) {
        self.state = Body::Headers;
        self.cur = None;
    }
}

pub struct ResponseFramer {
    state: Body,
    cur: Option<RespMsg>,
    /// For each request not yet answered: was it HEAD?
    heads: VecDeque<bool>,
}

impl Default for ResponseFramer {
    fn default() -> Self {
        ResponseFramer { state: Body::Headers, cur: None, heads: VecDeque::new() }
    }
}

impl Expect for ResponseFramer {
    fn expect(&mut self, req: &ReqMsg) {
        if self.heads.len() >= MAX_PENDING {
            self.heads.pop_front();
        }
        self.heads.push_back(req.head);
    }
    fn forget(&mut self) {
        self.heads.clear();
    }
}

impl Framer for ResponseFramer {
    type Msg = RespMsg;
    fn step(&mut self, buf: &[u8]) -> Step<RespMsg> {
        if self.state != Body::Headers {
            return chunk_step(&mut self.state, &mut self.cur, buf);
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Step::Need,
            Err(_) => return Step::Bad,
        };
        let status = resp.code.unwrap_or(0);
        let interim = (100..200).contains(&status) && status != 101;
        let m = RespMsg { interim, status, error: status >= 500, ..RespMsg::default() };
        if interim {
            return Step::Go { consumed: n, skip: 0, msg: Some(m) };
        }
        let head = self.heads.pop_front().unwrap_or(false);
        if status == 101 {
            // Switching protocols: the rest of the connection is not HTTP/1.1.
            return Step::Go { consumed: n, skip: UNTIL_CLOSE, msg: Some(m) };
        }
        if head || status == 204 || status == 304 {
            return Step::Go { consumed: n, skip: 0, msg: Some(m) };
        }
        let Ok(info) = body_info(resp.headers) else { return Step::Bad };
        if info.chunked {
            self.state = Body::ChunkSize;
            self.cur = Some(m);
            Step::Go { consumed: n, skip: 0, msg: None }
        } else {
            Step::Go { consumed: n, skip: info.length.unwrap_or(UNTIL_CLOSE), msg: Some(m) }
        }
    }
    fn reset(&mut self) {
        self.state = Body::Headers;
        self.cur = None;
        self.heads.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::stream::{Chunk, Meta, Stream};
    use super::*;

    #[test]
    fn chunked_request_and_pipelined_responses() {
        let mut s = Stream::new(RequestFramer::default());
        let mut got = Vec::new();
        let c = Chunk { ts: 0, seq: 0, ack: None };
        let body = b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
        s.feed(&body[..50], 0, c, &mut |m: ReqMsg, meta: Meta| got.push((m.op, meta.bytes))).unwrap();
        s.feed(&body[50..], 0, c, &mut |m: ReqMsg, meta: Meta| got.push((m.op, meta.bytes))).unwrap();
        assert_eq!(got, vec![("POST", 71), ("GET", 28)]);

        let mut r = ResponseFramer::default();
        r.expect(&ReqMsg { head: true, ..ReqMsg::new("HEAD") });
        r.expect(&ReqMsg::new("GET"));
        let mut s = Stream::new(r);
        let mut got = Vec::new();
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        s.feed(bytes, 0, c, &mut |m: RespMsg, meta: Meta| got.push((m.interim, meta.bytes))).unwrap();
        assert_eq!(got, vec![(true, 25), (false, 38), (false, 41)]);
    }

    #[test]
    fn not_http() {
        assert_eq!(RequestFramer::default().step(b"\x80\x00\x00"), Step::Bad);
        assert_eq!(ResponseFramer::default().step(b"+OK\r\n"), Step::Bad);
    }
}
