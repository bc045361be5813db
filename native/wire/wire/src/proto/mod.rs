//! Application protocols: framers split each direction into messages; sessions match
//! requests with responses.
//!
//! | protocol          | request/response matching                          |
//! |-------------------|----------------------------------------------------|
//! | memcache-binary   | opaque, in order per connection (quiet ops skipped) |
//! | memcache-ascii    | first in, first out; noreply gets none             |
//! | redis (RESP2/3)   | first in, first out; CLIENT REPLY OFF/SKIP, pushes |
//! | http (HTTP/1.1)   | first in, first out; 1xx interim skipped, HEAD     |
//! | generic           | TCP sequence/acknowledgement numbers (one request, one response at a time) |

pub mod detect;
pub mod generic;
pub mod http;
pub mod mc_ascii;
pub mod mc_binary;
pub mod names;
pub mod resp;
pub mod session;
pub mod stream;

use std::fmt;
use std::str::FromStr;

pub use session::Session;

/// A request as framed from the client's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqMsg {
    pub op: &'static str,
    pub key_len: Option<u32>,
    pub keys: u32,
    /// Responses expected: 0 (noreply), 1, or more (Redis SUBSCRIBE a b).
    pub replies: u32,
    /// Opaque (memcached binary); 0 otherwise.
    pub tag: u32,
    /// Answered only on a hit or an error (memcached binary quiet ops).
    pub quiet: bool,
    /// HTTP HEAD: the response has no body.
    pub head: bool,
}

impl ReqMsg {
    pub fn new(op: &'static str) -> Self {
        ReqMsg { op, key_len: None, keys: 0, replies: 1, tag: 0, quiet: false, head: false }
    }
}

/// A response as framed from the server's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RespMsg {
    /// HTTP 1xx: not the final response.
    pub interim: bool,
    /// RESP3 push: out of band, answers no request.
    pub push: bool,
    pub tag: u32,
    pub error: bool,
    pub status: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Auto,
    McBinary,
    McAscii,
    /// Either memcached protocol, chosen from the first request byte.
    Memcache,
    Redis,
    Http,
    Generic,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto",
            Protocol::McBinary => "memcache-binary",
            Protocol::McAscii => "memcache-ascii",
            Protocol::Memcache => "memcache",
            Protocol::Redis => "redis",
            Protocol::Http => "http",
            Protocol::Generic => "generic",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Protocol::Auto,
            "memcache-binary" | "memcached-binary" => Protocol::McBinary,
            "memcache-ascii" | "memcached-ascii" => Protocol::McAscii,
            "memcache" | "memcached" => Protocol::Memcache,
            "redis" | "resp" => Protocol::Redis,
            "http" | "http1" => Protocol::Http,
            "generic" | "seqack" => Protocol::Generic,
            _ => {
                return Err(format!(
                    "unknown protocol {s:?} (auto, memcache, memcache-binary, memcache-ascii, redis, http, generic)"
                ))
            }
        })
    }
}
