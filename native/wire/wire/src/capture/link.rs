//! Where the network layer starts under each supported link type.

/// LINKTYPE_* values (https://www.tcpdump.org/linktypes.html).
pub const NULL: u32 = 0;
pub const ETHERNET: u32 = 1;
pub const RAW_OPENBSD: u32 = 12;
pub const RAW_DLT14: u32 = 14;
pub const RAW: u32 = 101;
pub const LOOP: u32 = 108;
pub const LINUX_SLL: u32 = 113;
pub const IPV4: u32 = 228;
pub const IPV6: u32 = 229;
pub const LINUX_SLL2: u32 = 276;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;

/// What the bytes after the link header are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// An Ethernet frame (VLAN tags are left to the decoder).
    Ethernet,
    /// An IP packet (version read from its first nibble) at this offset.
    Ip(usize),
    /// Not an IP packet, or a header too short to tell.
    Other,
}

pub fn is_supported(linktype: u32) -> bool {
    matches!(linktype, NULL | ETHERNET | RAW_OPENBSD | RAW_DLT14 | RAW | LOOP | LINUX_SLL | IPV4 | IPV6 | LINUX_SLL2)
}

pub fn name(linktype: u32) -> &'static str {
    match linktype {
        NULL => "null",
        ETHERNET => "ethernet",
        RAW_OPENBSD | RAW_DLT14 | RAW => "raw",
        LOOP => "loop",
        LINUX_SLL => "linux_sll",
        IPV4 => "ipv4",
        IPV6 => "ipv6",
        LINUX_SLL2 => "linux_sll2",
        _ => "unsupported",
    }
}

fn ip_by_ethertype(proto: u16, offset: usize) -> Network {
    match proto {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Network::Ip(offset),
        _ => Network::Other,
    }
}

/// BSD address families seen in NULL/LOOP headers for IPv4 and IPv6.
fn ip_by_family(family: u32) -> Network {
    match family {
        2 | 24 | 28 | 30 => Network::Ip(4),
        _ => Network::Other,
    }
}

pub fn network(linktype: u32, data: &[u8]) -> Network {
    match linktype {
        ETHERNET => Network::Ethernet,
        RAW_OPENBSD | RAW_DLT14 | RAW | IPV4 | IPV6 => Network::Ip(0),
        NULL => match data.get(..4) {
            // Host byte order of the capturing machine: accept either.
            Some(b) => {
                let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                if le < 256 { ip_by_family(le) } else { ip_by_family(be) }
            }
            None => Network::Other,
        },
        LOOP => match data.get(..4) {
            Some(b) => ip_by_family(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            None => Network::Other,
        },
        LINUX_SLL => match data.get(14..16) {
            Some(b) => ip_by_ethertype(u16::from_be_bytes([b[0], b[1]]), 16),
            None => Network::Other,
        },
        LINUX_SLL2 => match data.get(0..2) {
            Some(b) if data.len() >= 20 => ip_by_ethertype(u16::from_be_bytes([b[0], b[1]]), 20),
            _ => Network::Other,
        },
        _ => Network::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sll_and_sll2_offsets() {
        let mut sll = vec![0u8; 16];
        sll[14] = 0x08;
        assert_eq!(network(LINUX_SLL, &sll), Network::Ip(16));
        let mut sll2 = vec![0u8; 20];
        sll2[0] = 0x86;
        sll2[1] = 0xdd;
        assert_eq!(network(LINUX_SLL2, &sll2), Network::Ip(20));
        assert_eq!(network(LINUX_SLL2, &sll2[..10]), Network::Other);
        sll[14] = 0x08;
        sll[15] = 0x06; // ARP
        assert_eq!(network(LINUX_SLL, &sll), Network::Other);
    }

    #[test]
    fn null_and_loop_families() {
        assert_eq!(network(NULL, &[2, 0, 0, 0]), Network::Ip(4));
        assert_eq!(network(NULL, &[0, 0, 0, 30]), Network::Ip(4));
        assert_eq!(network(LOOP, &[0, 0, 0, 2]), Network::Ip(4));
        assert_eq!(network(LOOP, &[0, 0]), Network::Other);
    }
}
