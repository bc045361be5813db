//! Any request-response protocol, by TCP sequence and acknowledgement numbers (Heimdall's
//! `analyze_unknown`): client bytes up to the server's answer form one request; server
//! bytes that acknowledge all of them, up to the next request, form its response.

use super::session::Data;
use super::stream::Desync;
use crate::record::{Counters, Exchange};
use crate::tcp::seq_lt;
use crate::Ts;

struct Current {
    t_req_start: Ts,
    t_req: Ts,
    req_bytes: u64,
    /// Sequence number after the request's last byte.
    seq_end: u32,
    resp: Option<(Ts, Ts, u64)>,
}

#[derive(Default)]
pub struct GenericSession {
    cur: Option<Current>,
}

impl GenericSession {
    fn emit(cur: Current, c: &mut Counters, out: &mut Vec<Exchange>) {
        if let Some((t0, t1, bytes)) = cur.resp {
            c.responses += 1;
            c.exchanges += 1;
            out.push(Exchange {
                proto: super::Protocol::Generic,
                op: "request",
                key_len: None,
                keys: 0,
                req_bytes: cur.req_bytes,
                resp_bytes: bytes,
                t_req_start: cur.t_req_start,
                t_req: cur.t_req,
                t_resp_start: t0,
                t_resp: t1,
                error: false,
                status: 0,
            });
        }
    }

    pub fn client(&mut self, d: Data<'_>, c: &mut Counters, out: &mut Vec<Exchange>) -> Result<(), Desync> {
        let len = d.bytes.len() as u64 + d.missing;
        if len == 0 {
            return Ok(());
        }
        let end = d.chunk.seq.wrapping_add(len as u32);
        if self.cur.as_ref().is_some_and(|cur| cur.resp.is_some()) {
            if let Some(done) = self.cur.take() {
                Self::emit(done, c, out);
            }
        }
        match &mut self.cur {
            Some(cur) => {
                cur.t_req = d.chunk.ts;
                cur.req_bytes += len;
                cur.seq_end = end;
            }
            None => {
                c.requests += 1;
                self.cur = Some(Current { t_req_start: d.chunk.ts, t_req: d.chunk.ts, req_bytes: len, seq_end: end, resp: None });
            }
        }
        Ok(())
    }

    pub fn server(&mut self, d: Data<'_>, _c: &mut Counters) -> Result<(), Desync> {
        let len = d.bytes.len() as u64 + d.missing;
        let Some(cur) = &mut self.cur else { return Ok(()) };
        let Some(ack) = d.chunk.ack else { return Ok(()) };
        if len == 0 || seq_lt(ack, cur.seq_end) {
            return Ok(());
        }
        match &mut cur.resp {
            Some((_, t1, bytes)) => {
                *t1 = d.chunk.ts;
                *bytes += len;
            }
            None => cur.resp = Some((d.chunk.ts, d.chunk.ts, len)),
        }
        Ok(())
    }

    pub fn close(&mut self, c: &mut Counters, out: &mut Vec<Exchange>) {
        if let Some(cur) = self.cur.take() {
            Self::emit(cur, c, out);
        }
    }

    pub fn outstanding(&self) -> usize {
        usize::from(self.cur.as_ref().is_some_and(|c| c.resp.is_none()))
    }

    pub fn evict(&mut self, cutoff: Ts, quiet_cutoff: Ts, c: &mut Counters, out: &mut Vec<Exchange>) -> u64 {
        match &self.cur {
            Some(cur) if cur.resp.is_some_and(|(_, t1, _)| t1 < quiet_cutoff) => {
                if let Some(done) = self.cur.take() {
                    Self::emit(done, c, out);
                }
                0
            }
            Some(cur) if cur.resp.is_none() && cur.t_req < cutoff => {
                self.cur = None;
                1
            }
            _ => 0,
        }
    }

    pub fn reset(&mut self) -> u64 {
        u64::from(self.cur.take().is_some_and(|c| c.resp.is_none()))
    }
}
