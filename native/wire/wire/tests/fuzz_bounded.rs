//! Bounded fuzzing on stable (cargo-fuzz needs nightly; see bench/wire.md for the real
//! thing): random and mutated inputs through every entry point must never panic or hang.

use perflearn_wire::fuzzing;
use proptest::prelude::*;

fn golden() -> Vec<u8> {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/data/wire/golden.pcap");
    std::fs::read(p).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn random_frames(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        fuzzing::frames(&data);
    }

    #[test]
    fn random_protocol_streams(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        fuzzing::protocols(&data);
    }

    #[test]
    fn random_capture_files(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzzing::capture_file(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// The golden capture with bytes overwritten and cut short.
    #[test]
    fn mutated_golden_capture(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..64), cut in any::<usize>()) {
        let mut g = golden();
        prop_assume!(!g.is_empty());
        for (at, b) in flips {
            let i = at % g.len();
            g[i] = b;
        }
        let keep = 24 + cut % g.len();
        g.truncate(keep);
        fuzzing::capture_file(&g);
    }

    /// Protocol streams built from real message prefixes, then corrupted.
    #[test]
    fn mutated_messages(prefix in 0usize..6, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..16)) {
        let seeds: [&[u8]; 6] = [
            b"\x3f*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n\xbf+OK\r\n",
            b"\x3fGET / HTTP/1.1\r\nHost: x\r\n\r\n\xbfHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
            b"\x3fget a b c\r\n\xbfVALUE a 0 1\r\nx\r\nEND\r\n",
            b"\x18\x80\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x00k",
            b"\x3fPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            b"\x3f*1\r\n$4\r\nPING\r\n\xbf>2\r\n+a\r\n+b\r\n|1\r\n+k\r\n+v\r\n+PONG\r\n",
        ];
        let mut d = seeds[prefix].to_vec();
        for (at, b) in flips {
            let i = at % d.len();
            d[i] = b;
        }
        fuzzing::protocols(&d);
    }
}
