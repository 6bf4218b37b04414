//! The fuzz smoke run CI does: every target on its corpus and mutations of it, with a fresh seed each run
//! (printed) unless `CAUSET_FUZZ_SEED` fixes one; `CAUSET_FUZZ_SECONDS` sets the time per target (default 8).

use causet_fuzz::{hex, run, targets::TARGETS, Budget};
use std::time::Duration;

#[test]
fn no_decoder_panics_on_mutated_input() {
    let seconds: f64 = std::env::var("CAUSET_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(8.0);
    let seed: u64 = std::env::var("CAUSET_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    });
    for (name, target) in TARGETS {
        match run(name, target, seed, Budget::Time(Duration::from_secs_f64(seconds))) {
            Ok(stats) => {
                eprintln!("{name}: {} inputs in {:.1} s (seed {seed})", stats.inputs, stats.seconds);
                assert!(stats.inputs > 1000, "{name}: too few inputs tried to mean anything: {}", stats.inputs);
            }
            Err(f) => panic!(
                "{name} panicked with seed {seed} (CAUSET_FUZZ_SEED={seed} reproduces): {}\ninput: {}",
                f.message,
                hex(&f.input)
            ),
        }
    }
}

#[test]
fn every_target_has_a_corpus_of_valid_inputs() {
    for (name, _) in TARGETS {
        assert!(causet_fuzz::corpus::seeds(name).len() >= 5, "{name} has too small a corpus");
    }
}

#[test]
fn the_corpus_is_valid_so_mutations_start_past_the_first_checks() {
    use causet_wire::request::decode_request;
    for input in causet_fuzz::corpus::seeds("request") {
        let frame = causet_wire::Frame { code: input[0], body: bytes::Bytes::copy_from_slice(&input[1..]) };
        assert!(decode_request(&frame).is_ok(), "a request seed does not decode: {}", hex(&input));
    }
    for input in causet_fuzz::corpus::seeds("effect") {
        assert!(causet_crdt::Effect::decode(&input).is_ok(), "an effect seed does not decode: {}", hex(&input));
    }
}
