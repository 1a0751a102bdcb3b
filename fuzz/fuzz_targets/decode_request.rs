//! Arbitrary bytes as a request frame (after the size prefix): parse_frame, then the typed
//! decoder of the API it names. Decoder panics caught by Sluice's guards are fine; a panic
//! that escapes them, an abort, an OOM or a stack overflow is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: sluice_fuzz::install_panic_hook(),
    |data: &[u8]| {
        sluice_fuzz::guarded(|| {
            sluice_fuzz::decode_one(data);
        });
    }
);
