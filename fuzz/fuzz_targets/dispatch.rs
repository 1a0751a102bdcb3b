//! One or more request frames through `Broker::dispatch` on a real broker (one per
//! process, topic `t` with 3 partitions, auto-creation off). Input format: see
//! `sluice_fuzz::split_frames`. Every response must be a well-formed frame that Kafka's own
//! decoder reads back (`sluice_fuzz::check_response`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        sluice_fuzz::install_panic_hook();
        sluice_fuzz::Harness::get();
    },
    |data: &[u8]| {
        let frames = sluice_fuzz::split_frames(data);
        sluice_fuzz::guarded(|| sluice_fuzz::Harness::get().run(&frames));
    }
);
