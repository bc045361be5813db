//! Operation names as `&'static str`: known names without allocation, others interned
//! (at most `MAX_INTERNED` distinct, then "other").

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

const MAX_INTERNED: usize = 1024;
const MAX_LEN: usize = 32;

const KNOWN: &[&str] = &[
    // memcached (ASCII, meta) and Redis commands seen most often
    "get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas", "delete", "incr", "decr",
    "touch", "stats", "version", "verbosity", "flush_all", "quit", "mg", "ms", "md", "ma", "mn", "me", "noop",
    "getq", "getk", "getkq", "setq", "addq", "replaceq", "deleteq", "incrq", "decrq", "quitq", "flushq", "appendq",
    "prependq", "gatq", "gatk", "gatkq", "sasl_list_mechs", "sasl_auth", "sasl_step",
    "ping", "echo", "mget", "mset", "del", "exists", "expire", "ttl", "setex", "setnx", "getset", "incrby", "decrby",
    "lpush", "rpush", "lpop", "rpop", "lrange", "llen", "sadd", "srem", "spop", "smembers", "scard", "hset", "hget",
    "hmset", "hmget", "hgetall", "hdel", "hincrby", "zadd", "zrange", "zrem", "zscore", "zincrby", "zpopmin",
    "zrangebyscore", "multi", "exec", "discard", "watch", "subscribe", "unsubscribe", "psubscribe", "publish",
    "client", "config", "info", "hello", "auth", "select", "flushall", "flushdb", "dbsize", "keys", "scan", "type",
    "command", "xadd", "xread", "xrange", "eval", "evalsha", "script", "blpop", "brpop",
    // HTTP methods (kept as written)
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

fn interned() -> &'static Mutex<HashSet<&'static str>> {
    static SET: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    SET.get_or_init(|| Mutex::new(HashSet::new()))
}

fn lookup(name: &[u8]) -> &'static str {
    if let Some(k) = KNOWN.iter().find(|k| k.as_bytes() == name) {
        return k;
    }
    let Ok(s) = std::str::from_utf8(name) else { return "other" };
    if !s.bytes().all(|b| b.is_ascii_graphic()) {
        return "other";
    }
    let Ok(mut set) = interned().lock() else { return "other" };
    if let Some(k) = set.get(s) {
        return k;
    }
    if set.len() >= MAX_INTERNED {
        return "other";
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// A command name, lower-cased (memcached, Redis).
pub fn command(raw: &[u8]) -> &'static str {
    if raw.is_empty() || raw.len() > MAX_LEN {
        return "other";
    }
    let mut buf = [0u8; MAX_LEN];
    for (d, s) in buf.iter_mut().zip(raw) {
        *d = s.to_ascii_lowercase();
    }
    lookup(&buf[..raw.len()])
}

/// A name kept as written (HTTP methods are case-sensitive).
pub fn exact(raw: &[u8]) -> &'static str {
    if raw.is_empty() || raw.len() > MAX_LEN {
        return "other";
    }
    lookup(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_unknown_and_bounded() {
        assert_eq!(command(b"GET"), "get");
        assert_eq!(exact(b"GET"), "GET");
        let a = command(b"xinfo_zz");
        assert_eq!(a, "xinfo_zz");
        assert!(std::ptr::eq(a, command(b"XINFO_ZZ")));
        assert_eq!(command(&[0xff, 0x00]), "other");
        assert_eq!(command(&[b'a'; 40]), "other");
    }
}
