//! Arbitrary bytes as a pcap/pcapng file, every frame through the analyzer.
#![no_main]
use libfuzzer_sys::fuzz_target;
use perflearn_wire::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::capture_file(data));
