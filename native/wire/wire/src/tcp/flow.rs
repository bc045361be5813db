//! Connection identity and state: who is the client, both directions, the session.

use std::hash::{Hash, Hasher};

use crate::decode::{format_addr, Addr, TcpSeg};
use crate::proto::Session;
use crate::Ts;

use super::reasm::Direction;

/// Both directions of a connection map to one key: the lower endpoint is `a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    pub a: Addr,
    pub b: Addr,
    pub pa: u16,
    pub pb: u16,
}

/// Hashed as three words rather than field by field (36 bytes with length prefixes):
/// the flow lookup is on every packet's path.
impl Hash for FlowKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let word = |a: &Addr| u64::from_ne_bytes(a[..8].try_into().unwrap_or_default()) ^ u64::from_ne_bytes(a[8..].try_into().unwrap_or_default());
        h.write_u64(word(&self.a));
        h.write_u64(word(&self.b));
        h.write_u32(((self.pa as u32) << 16) | self.pb as u32);
    }
}

impl FlowKey {
    /// The key and whether the segment goes from `a` to `b`.
    pub fn of(s: &TcpSeg<'_>) -> (FlowKey, bool) {
        // Addresses compared as big-endian integers: the same order as the bytes', in
        // two word compares rather than a byte loop.
        let (src, dst) = (u128::from_be_bytes(s.src), u128::from_be_bytes(s.dst));
        if (src, s.sport) <= (dst, s.dport) {
            (FlowKey { a: s.src, b: s.dst, pa: s.sport, pb: s.dport }, true)
        } else {
            (FlowKey { a: s.dst, b: s.src, pa: s.dport, pb: s.sport }, false)
        }
    }

    /// "client>server".
    pub fn describe(&self, client_is_a: bool) -> String {
        let (a, b) = (format_addr(&self.a, self.pa), format_addr(&self.b, self.pb));
        if client_is_a {
            format!("{a}>{b}")
        } else {
            format!("{b}>{a}")
        }
    }

    pub fn server_port(&self, client_is_a: bool) -> u16 {
        if client_is_a {
            self.pb
        } else {
            self.pa
        }
    }
}

pub struct Flow {
    /// Index 0: a->b, 1: b->a.
    pub dirs: [Direction; 2],
    pub client_is_a: bool,
    /// The client side is known (handshake, server port, or a payload's role), not guessed.
    pub side_known: bool,
    pub session: Option<Session>,
    /// Matching may run: the flow began with a handshake we saw, or found a quiet point.
    pub synced: bool,
    pub saw_handshake: bool,
    pub last_ts: Ts,
    /// Description cached for records.
    pub name: Option<std::sync::Arc<str>>,
}

impl Flow {
    pub fn new(client_is_a: bool, side_known: bool, saw_handshake: bool, ts: Ts) -> Flow {
        Flow {
            dirs: [Direction::default(), Direction::default()],
            client_is_a,
            side_known,
            session: None,
            synced: saw_handshake,
            saw_handshake,
            last_ts: ts,
            name: None,
        }
    }

    /// Index of the client->server direction.
    pub fn client_dir(&self) -> usize {
        if self.client_is_a {
            0
        } else {
            1
        }
    }
}
