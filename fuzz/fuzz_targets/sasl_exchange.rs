#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    twinlog_fuzz::sasl_exchange(data);
});
