#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| causet_fuzz::targets::frame(data));
