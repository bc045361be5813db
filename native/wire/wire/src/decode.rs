//! Frame -> TCP segment: link header, IPv4/IPv6 and TCP via etherparse's lax slicer
//! (which keeps the headers of frames cut short by a snap length).

use etherparse::{EtherType, Ethernet2Slice, LaxIpPayloadSlice, LaxIpSlice, LaxNetSlice, LaxSlicedPacket, TcpSlice};

use crate::capture::link::{self, Network};
use crate::capture::Frame;
use crate::Ts;

/// An IPv4 address is stored as an IPv4-mapped IPv6 address.
pub type Addr = [u8; 16];

/// Built as one 128-bit value: byte-by-byte stores read back as words right after (the
/// flow key) stalled store forwarding, ~10 % of the time per packet.
#[inline]
pub fn v4_mapped(a: [u8; 4]) -> Addr {
    ((0xffffu128 << 32) | u32::from_be_bytes(a) as u128).to_be_bytes()
}

pub fn format_addr(a: &Addr, port: u16) -> String {
    if a[..10].iter().all(|&b| b == 0) && a[10] == 0xff && a[11] == 0xff {
        format!("{}.{}.{}.{}:{}", a[12], a[13], a[14], a[15], port)
    } else {
        format!("[{}]:{}", std::net::Ipv6Addr::from(*a), port)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSeg<'a> {
    pub ts: Ts,
    pub src: Addr,
    pub dst: Addr,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    /// The payload bytes captured.
    pub payload: &'a [u8],
    /// Payload length on the wire (>= payload.len() when the snap length cut it).
    pub payload_len: u32,
}

/// Why a frame yields no TCP segment (counted, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    NotIp,
    NotTcp,
    Fragment,
    Malformed,
}

/// IP source, destination, wire length of the IP payload, its protocol, the captured payload.
type IpParts<'a> = (Addr, Addr, usize, etherparse::IpNumber, &'a [u8]);

fn parts<'a>(src: Addr, dst: Addr, logical: usize, p: &LaxIpPayloadSlice<'a>) -> IpParts<'a> {
    (src, dst, logical, p.ip_number, p.payload)
}

fn ip_parts<'a>(ip: &LaxIpSlice<'a>) -> Result<IpParts<'a>, Skip> {
    match ip {
        LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            let p = v4.payload();
            if p.fragmented {
                return Err(Skip::Fragment);
            }
            let logical = if p.incomplete { (h.total_len() as usize).saturating_sub(h.slice().len()) } else { p.payload.len() };
            Ok(parts(v4_mapped(h.source()), v4_mapped(h.destination()), logical, p))
        }
        LaxIpSlice::Ipv6(v6) => {
            let h = v6.header();
            let p = v6.payload();
            if p.fragmented {
                return Err(Skip::Fragment);
            }
            let logical = if p.incomplete {
                (h.payload_length() as usize).saturating_sub(v6.extensions().slice().len())
            } else {
                p.payload.len()
            };
            Ok(parts(h.source(), h.destination(), logical, p))
        }
    }
}

/// The IP packet in a frame: Ethernet and IP through etherparse's per-layer slices (the
/// fast path), VLAN-tagged Ethernet through its whole-packet lax slicer.
fn ip_bytes<'a>(frame: &Frame<'a>) -> Result<&'a [u8], Skip> {
    match link::network(frame.linktype, frame.data) {
        Network::Ethernet => {
            let eth = Ethernet2Slice::from_slice_without_fcs(frame.data).map_err(|_| Skip::Malformed)?;
            match eth.ether_type() {
                EtherType::IPV4 | EtherType::IPV6 => Ok(eth.payload_slice()),
                _ => {
                    let sliced = LaxSlicedPacket::from_ethernet(frame.data).map_err(|_| Skip::Malformed)?;
                    match sliced.net {
                        Some(LaxNetSlice::Ipv4(v4)) => Ok(&frame.data[frame.data.len() - slice_rest(v4.header().slice(), frame.data)..]),
                        Some(LaxNetSlice::Ipv6(v6)) => Ok(&frame.data[frame.data.len() - slice_rest(v6.header().slice(), frame.data)..]),
                        _ => Err(Skip::NotIp),
                    }
                }
            }
        }
        Network::Ip(off) => frame.data.get(off..).ok_or(Skip::Malformed),
        Network::Other => Err(Skip::NotIp),
    }
}

/// Bytes from the start of `sub` (a sub-slice of `whole`) to the end of `whole`.
fn slice_rest(sub: &[u8], whole: &[u8]) -> usize {
    let start = (sub.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    whole.len().saturating_sub(start)
}

pub fn decode(frame: Frame<'_>) -> Result<TcpSeg<'_>, Skip> {
    let bytes = ip_bytes(&frame)?;
    match plain_v4_tcp(frame.ts, bytes) {
        Some(seg) => Ok(seg),
        None => decode_ip(frame.ts, bytes),
    }
}

/// The common case read directly: an unfragmented IPv4 packet carrying TCP, both headers
/// whole in the capture. Anything else (IPv6, fragments, a cut or odd header) gives None
/// and goes through etherparse (`decode_ip`), whose result this equals (tested): the
/// general slicer and the large result it returns were a fifth of the time per packet.
#[inline]
fn plain_v4_tcp(ts: Ts, ip: &[u8]) -> Option<TcpSeg<'_>> {
    let h = ip.get(..20)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl + 20 || total > ip.len() || fragment || h[9] != 6 {
        return None;
    }
    let tcp = &ip[ihl..total];
    let off = usize::from(tcp[12] >> 4) * 4;
    if off < 20 || off > tcp.len() {
        return None;
    }
    let flags = tcp[13];
    let word = |i: usize| u32::from_be_bytes([tcp[i], tcp[i + 1], tcp[i + 2], tcp[i + 3]]);
    Some(TcpSeg {
        ts,
        src: v4_mapped([h[12], h[13], h[14], h[15]]),
        dst: v4_mapped([h[16], h[17], h[18], h[19]]),
        sport: u16::from_be_bytes([tcp[0], tcp[1]]),
        dport: u16::from_be_bytes([tcp[2], tcp[3]]),
        seq: word(4),
        ack: if flags & 0x10 != 0 { Some(word(8)) } else { None },
        syn: flags & 0x02 != 0,
        fin: flags & 0x01 != 0,
        rst: flags & 0x04 != 0,
        payload: &tcp[off..],
        payload_len: (tcp.len() - off) as u32,
    })
}

/// Any IP packet through etherparse's lax slicer.
pub fn decode_ip(ts: Ts, bytes: &[u8]) -> Result<TcpSeg<'_>, Skip> {
    let (ip, _) = LaxIpSlice::from_slice(bytes).map_err(|_| Skip::Malformed)?;
    let (src, dst, logical_ip_payload, ip_number, ip_payload) = ip_parts(&ip)?;
    if ip_number != etherparse::IpNumber::TCP {
        return Err(Skip::NotTcp);
    }
    let tcp = TcpSlice::from_slice(ip_payload).map_err(|_| Skip::Malformed)?;
    let header_len = tcp.slice().len() - tcp.payload().len();
    let payload_len = logical_ip_payload.saturating_sub(header_len).max(tcp.payload().len());
    Ok(TcpSeg {
        ts,
        src,
        dst,
        sport: tcp.source_port(),
        dport: tcp.destination_port(),
        seq: tcp.sequence_number(),
        ack: if tcp.ack() { Some(tcp.acknowledgment_number()) } else { None },
        syn: tcp.syn(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        payload: tcp.payload(),
        payload_len: payload_len.min(u32::MAX as usize) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn frame(bytes: &[u8], linktype: u32) -> Frame<'_> {
        Frame { ts: 1, linktype, data: bytes, orig_len: bytes.len() as u32 }
    }

    #[test]
    fn ethernet_ipv4_tcp() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6]).ipv4([127, 0, 0, 1], [127, 0, 0, 2], 64).tcp(40000, 11211, 1000, 512);
        let mut out = Vec::new();
        b.write(&mut out, b"get k\r\n").unwrap();
        let s = decode(frame(&out, link::ETHERNET)).unwrap();
        assert_eq!((s.sport, s.dport, s.seq), (40000, 11211, 1000));
        assert_eq!(s.payload, b"get k\r\n");
        assert_eq!(s.payload_len, 7);
        assert_eq!(format_addr(&s.src, s.sport), "127.0.0.1:40000");
    }

    #[test]
    fn truncated_payload_keeps_wire_length() {
        let b = PacketBuilder::ipv6([0; 16], [1; 16], 64).tcp(1, 2, 3, 4);
        let mut out = Vec::new();
        b.write(&mut out, &[7u8; 100]).unwrap();
        let cut = &out[..out.len() - 60];
        let s = decode(frame(cut, link::RAW)).unwrap();
        assert_eq!(s.payload.len(), 40);
        assert_eq!(s.payload_len, 100);
    }

    #[test]
    fn vlan_tagged_ethernet() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .single_vlan(etherparse::VlanId::try_new(7).unwrap())
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(5, 6379, 9, 512);
        let mut out = Vec::new();
        b.write(&mut out, b"PING\r\n").unwrap();
        let s = decode(frame(&out, link::ETHERNET)).unwrap();
        assert_eq!((s.dport, s.payload), (6379, &b"PING\r\n"[..]));
    }

    /// The direct IPv4/TCP reader agrees with etherparse on real, odd and corrupted packets.
    #[test]
    fn plain_path_equals_etherparse() {
        use proptest::prelude::*;
        let base = |opts: bool, payload: usize| {
            let b = PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).tcp(40000, 11211, 0xfffffff0, 512).ack(77).psh();
            let mut out = Vec::new();
            b.write(&mut out, &vec![0x80u8; payload]).unwrap();
            if opts {
                // IHL 6: one word of IP options (NOPs).
                out.splice(20..20, [1u8, 1, 1, 1]);
                out[0] = 0x46;
                let total = (out.len() as u16).to_be_bytes();
                out[2..4].copy_from_slice(&total);
            }
            out
        };
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 4000, ..ProptestConfig::default() });
        let strategy = (any::<bool>(), 0usize..64, proptest::collection::vec((0usize..80, any::<u8>()), 0..4), 0usize..200, 0usize..8);
        runner
            .run(&strategy, |(opts, payload, flips, cut, pad)| {
                let mut p = base(opts, payload);
                for (at, b) in flips {
                    if let Some(x) = p.get_mut(at) {
                        *x = b;
                    }
                }
                p.truncate(cut.max(1));
                p.extend(std::iter::repeat_n(0u8, pad)); // Ethernet padding past the IP length
                if let Some(fast) = plain_v4_tcp(9, &p) {
                    prop_assert_eq!(Ok(fast), decode_ip(9, &p));
                }
                Ok(())
            })
            .unwrap();
        // The direct path is taken for the common case.
        assert!(plain_v4_tcp(1, &base(false, 10)).is_some());
        assert!(plain_v4_tcp(1, &base(true, 10)).is_some());
    }

    #[test]
    fn garbage_is_skipped() {
        assert!(decode(frame(&[0x45, 0, 0], link::RAW)).is_err());
        assert_eq!(decode(frame(&[], link::LINUX_SLL)).unwrap_err(), Skip::NotIp);
    }
}
