#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    twinlog_fuzz::mirror_rpc(data);
});
