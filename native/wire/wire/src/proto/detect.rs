//! Which protocol a connection speaks: by flag, else from its first request bytes and
//! the server port.

use super::http::METHODS;
use super::mc_binary;
use super::Protocol;

const MEMCACHE_WORDS: &[&[u8]] = &[
    b"get", b"gets", b"gat", b"gats", b"set", b"add", b"replace", b"append", b"prepend", b"cas", b"delete",
    b"incr", b"decr", b"touch", b"stats", b"version", b"verbosity", b"flush_all", b"quit", b"mg", b"ms", b"md",
    b"ma", b"mn", b"me",
];

const REDIS_PORTS: &[u16] = &[6379, 6380, 26379];
const MEMCACHE_PORTS: &[u16] = &[11211];

/// Which way a payload goes, judged from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Request,
    Response,
}

const RESPONSE_WORDS: &[&[u8]] = &[
    b"VALUE ", b"STORED\r", b"NOT_STORED\r", b"EXISTS\r", b"NOT_FOUND\r", b"DELETED\r", b"TOUCHED\r", b"END\r",
    b"ERROR\r", b"CLIENT_ERROR ", b"SERVER_ERROR ", b"STAT ", b"VERSION ", b"HTTP/1.",
];

/// Whether a payload looks like a request or a response of a known protocol.
pub fn role(first: &[u8]) -> Option<Role> {
    let b0 = *first.first()?;
    match b0 {
        mc_binary::REQ_MAGIC => return Some(Role::Request),
        mc_binary::RESP_MAGIC => return Some(Role::Response),
        b'+' | b'-' | b':' | b'$' | b'%' | b'_' => return Some(Role::Response),
        _ => {}
    }
    if RESPONSE_WORDS.iter().any(|w| first.starts_with(w)) {
        return Some(Role::Response);
    }
    let word_end = first.iter().position(|&b| b == b' ' || b == b'\r' || b == b'\n')?;
    let word = &first[..word_end];
    if METHODS.contains(&word) || MEMCACHE_WORDS.contains(&word) {
        return Some(Role::Request);
    }
    None
}

/// None: not enough bytes to tell yet.
pub fn detect(forced: Protocol, server_port: u16, first: &[u8]) -> Option<Protocol> {
    match forced {
        Protocol::Auto => {}
        Protocol::Memcache => {
            return first.first().map(|&b| if b == mc_binary::REQ_MAGIC { Protocol::McBinary } else { Protocol::McAscii })
        }
        p => return Some(p),
    }
    let b0 = *first.first()?;
    if b0 == mc_binary::REQ_MAGIC {
        return Some(Protocol::McBinary);
    }
    if b0 == b'*' {
        return Some(Protocol::Redis);
    }
    let word_end = first.iter().position(|&b| b == b' ' || b == b'\r' || b == b'\n');
    let Some(word_end) = word_end else {
        return if first.len() > 32 { Some(Protocol::Generic) } else { None };
    };
    let word = &first[..word_end];
    if METHODS.contains(&word) && first.get(word_end) == Some(&b' ') {
        return Some(Protocol::Http);
    }
    if REDIS_PORTS.contains(&server_port) && word.iter().all(|b| b.is_ascii_alphabetic()) {
        return Some(Protocol::Redis);
    }
    let lower: Vec<u8> = word.to_ascii_lowercase();
    if MEMCACHE_WORDS.contains(&lower.as_slice()) || MEMCACHE_PORTS.contains(&server_port) {
        return Some(Protocol::McAscii);
    }
    Some(Protocol::Generic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects() {
        assert_eq!(detect(Protocol::Auto, 1, b"\x80\x00"), Some(Protocol::McBinary));
        assert_eq!(detect(Protocol::Auto, 1, b"*2\r\n"), Some(Protocol::Redis));
        assert_eq!(detect(Protocol::Auto, 1, b"GET / HTTP/1.1\r\n"), Some(Protocol::Http));
        assert_eq!(detect(Protocol::Auto, 1, b"get foo\r\n"), Some(Protocol::McAscii));
        assert_eq!(detect(Protocol::Auto, 6379, b"get foo\r\n"), Some(Protocol::Redis));
        assert_eq!(detect(Protocol::Auto, 1, b"HELO x\r\n"), Some(Protocol::Generic));
        assert_eq!(detect(Protocol::Auto, 1, b"GE"), None);
        assert_eq!(detect(Protocol::Memcache, 1, b"get"), Some(Protocol::McAscii));
        assert_eq!(detect(Protocol::Redis, 1, b"zz"), Some(Protocol::Redis));
        assert_eq!(role(b"\x81\x00"), Some(Role::Response));
        assert_eq!(role(b"HTTP/1.1 200 OK\r\n"), Some(Role::Response));
        assert_eq!(role(b"GET / HTTP/1.1\r\n"), Some(Role::Request));
        assert_eq!(role(b"*1\r\n"), None);
    }
}
