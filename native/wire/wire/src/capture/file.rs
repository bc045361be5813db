//! pcap and pcapng files through the pcap-parser streaming reader.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use pcap_parser::nom;
use pcap_parser::pcapng::Block;
use pcap_parser::{
    create_reader, parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header, LegacyPcapBlock,
    PcapBlockOwned, PcapError, PcapNGSlice,
};

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

/// What the blocks so far said about the capture: the legacy header's link type and
/// precision, the pcapng interfaces of the current section, and what was read.
#[derive(Default)]
struct Blocks {
    stats: FileStats,
    legacy_linktype: u32,
    legacy_ns: bool,
    interfaces: Vec<Interface>,
}

impl Blocks {
    fn legacy_frame(&mut self, b: &LegacyPcapBlock<'_>, on_frame: &mut impl FnMut(Frame<'_>)) {
        let frac_res = if self.legacy_ns { 1_000_000_000 } else { 1_000_000 };
        self.stats.frames += 1;
        self.stats.bytes += b.data.len() as u64;
        let caplen = (b.caplen as usize).min(b.data.len());
        on_frame(Frame {
            ts: to_ns(b.ts_sec as u64, b.ts_usec as u64, frac_res),
            linktype: self.legacy_linktype,
            data: &b.data[..caplen],
            orig_len: b.origlen,
        });
    }

    fn block(&mut self, block: &PcapBlockOwned<'_>, on_frame: &mut impl FnMut(Frame<'_>)) {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.legacy_linktype = h.network.0 as u32;
                self.legacy_ns = h.is_nanosecond_precision();
            }
            PcapBlockOwned::Legacy(b) => self.legacy_frame(b, on_frame),
            PcapBlockOwned::NG(Block::SectionHeader(_)) => self.interfaces.clear(),
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => self.interfaces.push(Interface {
                linktype: idb.linktype.0 as u32,
                resolution: idb.ts_resolution().unwrap_or(1_000_000),
                offset: idb.ts_offset(),
            }),
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                if let Some(ifc) = self.interfaces.get(epb.if_id as usize).copied() {
                    let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                    let sec = raw / ifc.resolution.max(1);
                    let frac = raw % ifc.resolution.max(1);
                    let sec = (sec as i64).saturating_add(ifc.offset).max(0) as u64;
                    let caplen = (epb.caplen as usize).min(epb.data.len());
                    self.stats.frames += 1;
                    self.stats.bytes += caplen as u64;
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
                if let Some(ifc) = self.interfaces.first().copied() {
                    let caplen = (spb.origlen as usize).min(spb.data.len());
                    self.stats.frames += 1;
                    on_frame(Frame { ts: 0, linktype: ifc.linktype, data: &spb.data[..caplen], orig_len: spb.origlen });
                }
            }
            PcapBlockOwned::NG(_) => {}
        }
    }
}

/// Read every frame of a pcap or pcapng file, in file order, calling `on_frame` for each.
/// A regular file is mapped into memory and parsed in place (no copy through a read
/// buffer: a third of the time per packet went there); anything else is streamed.
pub fn read_file(path: &Path, on_frame: impl FnMut(Frame<'_>)) -> Result<FileStats> {
    let where_ = path.display().to_string();
    // A file that cannot be opened, or is no capture, is a bad argument (exit 2);
    // one that breaks off after some frames is a failure of the run.
    let file = File::open(path).map_err(|e| WireError::usage(&where_, format!("cannot open: {e}")))?;
    match map(&file) {
        Some(bytes) => read_bytes(&bytes, &where_, on_frame),
        None => read_capture(file, &where_, on_frame),
    }
}

/// The whole file mapped read-only, or None (not a regular file, empty, or mmap failed).
#[allow(unsafe_code)]
fn map(file: &File) -> Option<memmap2::Mmap> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    // SAFETY: the FFI boundary of this crate (mmap(2) through memmap2). The map is
    // read-only and private to this call; the one hazard is another process truncating
    // the file while we read it (SIGBUS), as with any mmap reader. A file that grows
    // (tcpdump still writing) is read up to its length when opened.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(file) }.ok()?;
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

/// Read a pcap or pcapng capture held in memory; `where_` names it in errors.
pub fn read_bytes(data: &[u8], where_: &str, mut on_frame: impl FnMut(Frame<'_>)) -> Result<FileStats> {
    let mut blocks = Blocks { legacy_linktype: 1, ..Blocks::default() };
    let bad = |what: String| WireError::new(where_, what);
    let not_capture = |what: String| WireError::usage(where_, what);
    if data.is_empty() {
        return Err(not_capture("empty file, not a pcap or pcapng capture".into()));
    }
    if data.len() >= 4 && data[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
        let ng = PcapNGSlice::from_slice(data).map_err(|e| not_capture(format!("not a pcap or pcapng capture ({e:?})")))?;
        for block in ng {
            match block {
                Ok(b) => blocks.block(&b, &mut on_frame),
                Err(e) => {
                    if is_truncation(&e) {
                        blocks.stats.truncated = true;
                        break;
                    }
                    return Err(bad(format!("malformed block after {} frames ({e:?})", blocks.stats.frames)));
                }
            }
        }
        return Ok(blocks.stats);
    }
    let (mut rest, header) = parse_pcap_header(data).map_err(|e| not_capture(format!("not a pcap or pcapng capture ({e:?})")))?;
    let parse = if header.is_modified_format() {
        parse_pcap_frame_modified
    } else if header.is_bigendian() {
        parse_pcap_frame_be
    } else {
        parse_pcap_frame
    };
    blocks.block(&PcapBlockOwned::LegacyHeader(header), &mut on_frame);
    while !rest.is_empty() {
        match parse(rest) {
            Ok((r, b)) => {
                rest = r;
                blocks.legacy_frame(&b, &mut on_frame);
            }
            Err(e) if is_truncation(&e) => {
                // A capture cut short (tcpdump killed while writing): keep what was read.
                blocks.stats.truncated = true;
                break;
            }
            Err(e) => return Err(bad(format!("malformed block after {} frames ({e:?})", blocks.stats.frames))),
        }
    }
    Ok(blocks.stats)
}

fn is_truncation<E>(e: &nom::Err<PcapError<E>>) -> bool {
    matches!(e, nom::Err::Incomplete(_) | nom::Err::Error(PcapError::Incomplete(_)) | nom::Err::Error(PcapError::UnexpectedEof))
}

/// Read a pcap or pcapng stream; `where_` names it in errors.
pub fn read_capture<R: Read + Send>(input: R, where_: &str, mut on_frame: impl FnMut(Frame<'_>)) -> Result<FileStats> {
    let where_ = where_.to_string();
    let mut reader = match create_reader(INITIAL_BUFFER, input) {
        Ok(r) => r,
        Err(PcapError::Eof) => return Err(WireError::usage(&where_, "empty file, not a pcap or pcapng capture")),
        Err(e) => return Err(WireError::usage(&where_, format!("not a pcap or pcapng capture ({e:?})"))),
    };
    let mut blocks = Blocks { legacy_linktype: 1, ..Blocks::default() };
    let mut buffer_size = INITIAL_BUFFER;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                blocks.block(&block, &mut on_frame);
                // No shift per block: the buffer is compacted once per refill instead.
                reader.consume_noshift(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                reader
                    .refill()
                    .map_err(|e| WireError::new(&where_, format!("read error after {} frames ({e:?})", blocks.stats.frames)))?;
            }
            Err(PcapError::BufferTooSmall) => {
                if buffer_size >= MAX_BUFFER || !reader.grow(buffer_size * 2) {
                    return Err(WireError::new(
                        &where_,
                        format!("block larger than {MAX_BUFFER} bytes after {} frames", blocks.stats.frames),
                    ));
                }
                buffer_size *= 2;
            }
            Err(PcapError::UnexpectedEof) => {
                // A capture cut short (tcpdump killed while writing): keep what was read.
                blocks.stats.truncated = true;
                break;
            }
            Err(e) => {
                return Err(WireError::new(&where_, format!("malformed block after {} frames ({e:?})", blocks.stats.frames)))
            }
        }
    }
    Ok(blocks.stats)
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
