//! Arbitrary bytes, split at arbitrary points, through every protocol's framers and sessions.
#![no_main]
use libfuzzer_sys::fuzz_target;
use perflearn_wire::fuzzing;

fuzz_target!(|data: &[u8]| fuzzing::protocols(data));
