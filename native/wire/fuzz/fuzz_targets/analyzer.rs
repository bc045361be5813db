//! Arbitrary frames (link type from the first byte) through decoding, reassembly and matching.
#![no_main]
use libfuzzer_sys::fuzz_target;
use perflearn_wire::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::frames(data));
