//! pcap and pcapng files through the pcap-parser streaming reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use pcap_parser::pcapng::Block;
use pcap_parser::{create_reader, PcapBlockOwned, PcapError};

use super::Frame;
use crate::error::{Result, WireError};
use crate::Ts;

const INITIAL_BUFFER: usize = 1 << 20;
const MAX_BUFFER: usize = 256 << 20;

#[derive(Debug, Default, Clone, Copy)]
pub struct FileStats {
    pub frames: u64,
    pub bytes: u64,
    /// The last block was cut short (the rest of the file was read).
    pub truncated: bool,
}

#[derive(Clone, Copy)]
struct Interface {
    linktype: u32,
    /// Units per second of the timestamp fraction.
    resolution: u64,
    offset: i64,
}

fn to_ns(sec: u64, frac: u64, resolution: u64) -> Ts {
    if resolution == 0 {
        return sec.saturating_mul(1_000_000_000);
    }
    let frac_ns = (frac as u128 * 1_000_000_000u128 / resolution as u128) as u64;
    sec.saturating_mul(1_000_000_000).saturating_add(frac_ns)
}

/// Read every frame of a pcap or pcapng file, in file order, calling `on_frame` for each.
pub fn read_file(path: &Path, on_frame: impl FnMut(Frame<'_>)) -> Result<FileStats> {
    let where_ = path.display().to_string();
    let file = File::open(path).map_err(|e| WireError::new(&where_, format!("cannot open: {e}")))?;
    read_capture(file, &where_, on_frame)
}

/// Read a pcap or pcapng stream; `where_` names it in errors.
pub fn read_capture<R: Read + Send>(input: R, where_: &str, mut on_frame: impl FnMut(Frame<'_>)) -> Result<FileStats> {
    let where_ = where_.to_string();
    let mut reader = match create_reader(INITIAL_BUFFER, input) {
        Ok(r) => r,
        Err(PcapError::Eof) => return Err(WireError::new(&where_, "empty file, not a pcap or pcapng capture")),
        Err(e) => return Err(WireError::new(&where_, format!("not a pcap or pcapng capture ({e:?})"))),
    };
    let mut stats = FileStats::default();
    // Legacy pcap: one link type and precision for the file.
    let mut legacy_linktype: u32 = 1;
    let mut legacy_ns = false;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut buffer_size = INITIAL_BUFFER;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        legacy_linktype = h.network.0 as u32;
                        legacy_ns = h.is_nanosecond_precision();
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac_res = if legacy_ns { 1_000_000_000 } else { 1_000_000 };
                        stats.frames += 1;
                        stats.bytes += b.data.len() as u64;
                        let caplen = (b.caplen as usize).min(b.data.len());
                        on_frame(Frame {
                            ts: to_ns(b.ts_sec as u64, b.ts_usec as u64, frac_res),
                            linktype: legacy_linktype,
                            data: &b.data[..caplen],
                            orig_len: b.origlen,
                        });
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => interfaces.push(Interface {
                        linktype: idb.linktype.0 as u32,
                        resolution: idb.ts_resolution().unwrap_or(1_000_000),
                        offset: idb.ts_offset(),
                    }),
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        if let Some(ifc) = interfaces.get(epb.if_id as usize).copied() {
                            let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                            let sec = raw / ifc.resolution.max(1);
                            let frac = raw % ifc.resolution.max(1);
                            let sec = (sec as i64).saturating_add(ifc.offset).max(0) as u64;
                            let caplen = (epb.caplen as usize).min(epb.data.len());
                            stats.frames += 1;
                            stats.bytes += caplen as u64;
                            on_frame(Frame {
                                ts: to_ns(sec, frac, ifc.resolution),
                                linktype: ifc.linktype,
                                data: &epb.data[..caplen],
                                orig_len: epb.origlen,
                            });
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        // No timestamp in a simple packet block: keep file order, time 0.
                        if let Some(ifc) = interfaces.first().copied() {
                            let caplen = (spb.origlen as usize).min(spb.data.len());
                            stats.frames += 1;
                            on_frame(Frame { ts: 0, linktype: ifc.linktype, data: &spb.data[..caplen], orig_len: spb.origlen });
                        }
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                // No shift per block: the buffer is compacted once per refill instead.
                reader.consume_noshift(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                reader
                    .refill()
                    .map_err(|e| WireError::new(&where_, format!("read error after {} frames ({e:?})", stats.frames)))?;
            }
            Err(PcapError::BufferTooSmall) => {
                if buffer_size >= MAX_BUFFER || !reader.grow(buffer_size * 2) {
                    return Err(WireError::new(&where_, format!("block larger than {MAX_BUFFER} bytes after {} frames", stats.frames)));
                }
                buffer_size *= 2;
            }
            Err(PcapError::UnexpectedEof) => {
                // A capture cut short (tcpdump killed while writing): keep what was read.
                stats.truncated = true;
                break;
            }
            Err(e) => {
                return Err(WireError::new(&where_, format!("malformed block after {} frames ({e:?})", stats.frames)))
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ns_conversion() {
        assert_eq!(to_ns(1, 5, 1_000_000), 1_000_005_000);
        assert_eq!(to_ns(2, 7, 1_000_000_000), 2_000_000_007);
        assert_eq!(to_ns(0, 1, 0), 0);
    }
}
