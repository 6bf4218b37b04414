//! Decoding never panics, whatever the bytes, and refuses what the encoder cannot have written.

use crate::sim::Sim;
use crate::strategies::{flush_picks, steps};
use causet_crdt::{Crdt, CrdtError, CrdtType, Effect, MAX_NESTING_DEPTH};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decoding_random_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = Crdt::decode(&bytes);
        let _ = Effect::decode(&bytes);
        // Past the version byte, so that the decoder gets further than the version check.
        let mut versioned = vec![1u8];
        versioned.extend_from_slice(&bytes);
        let _ = Crdt::decode(&versioned);
        let _ = Effect::decode(&versioned);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Corrupting one byte of a real encoding (of maps, the deepest shapes) gives an error or some valid value.
    #[test]
    fn decoding_corrupted_encodings_never_panics(
        (ty, steps) in prop::sample::select(vec![CrdtType::MapGo, CrdtType::MapRr, CrdtType::SetRw, CrdtType::CounterB])
            .prop_flat_map(|ty| (Just(ty), steps(ty, 20))),
        picks in flush_picks(),
        corruptions in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let sim = Sim::run(ty, &steps, &picks);
        let mut encodings = vec![sim.replicas[0].state.encode()];
        encodings.extend(sim.records.iter().map(|record| record.effect.encode()));
        for mut bytes in encodings {
            for (index, byte) in &corruptions {
                let at = index.index(bytes.len());
                bytes[at] = *byte;
            }
            if let Ok(state) = Crdt::decode(&bytes) {
                // Whatever decodes is usable: reads, effects and validation never panic on it.
                let _ = (state.value(), state.is_bottom());
                for record in &sim.records {
                    let mut state = state.clone();
                    let _ = state.validate_effect(&record.effect);
                    let _ = state.apply(&record.effect, record.stamp);
                    let _ = state.value();
                }
            }
            let _ = Effect::decode(&bytes);
        }
    }

    /// Trailing bytes after a valid encoding are refused.
    #[test]
    fn decoding_refuses_trailing_bytes(ty in prop::sample::select(CrdtType::ALL.to_vec()), extra in 1u8..=255) {
        let mut bytes = Crdt::new(ty).encode();
        bytes.push(extra);
        let refused = matches!(Crdt::decode(&bytes), Err(CrdtError::Decode { .. }));
        prop_assert!(refused);
    }
}

/// The tail of a `map_go` state nesting a `map_go` under key "" once: variant, one entry, empty key, type.
const NESTED_MAP_GO: [u8; 4] = [10, 1, 0, 10];

#[test]
fn decoding_deeply_nested_maps_is_refused_without_exhausting_the_stack() {
    let mut bytes = vec![1u8];
    for _ in 0..100_000 {
        bytes.extend_from_slice(&NESTED_MAP_GO);
    }
    assert!(matches!(Crdt::decode(&bytes), Err(CrdtError::Decode { .. })));
    assert!(matches!(Effect::decode(&bytes), Err(CrdtError::Decode { .. })));
}

/// A `counter_pn` enclosed by `depth` maps (`depth >= 1`): `depth - 1` map levels nesting maps, one nesting the
/// counter under ("", counter_pn), then the counter (variant 0, total 0).
fn counter_nested_in_maps(depth: usize) -> Vec<u8> {
    let mut bytes = vec![1u8];
    for _ in 1..depth {
        bytes.extend_from_slice(&NESTED_MAP_GO);
    }
    bytes.extend_from_slice(&[10, 1, 0, 0, 0, 0]);
    bytes
}

#[test]
fn decoding_accepts_objects_nested_to_the_limit_and_refuses_one_more() {
    let state = Crdt::decode(&counter_nested_in_maps(MAX_NESTING_DEPTH)).expect("nesting up to the limit decodes");
    assert_eq!(state.ty(), CrdtType::MapGo);
    assert!(matches!(Crdt::decode(&counter_nested_in_maps(MAX_NESTING_DEPTH + 1)), Err(CrdtError::Decode { .. })));
}

#[test]
fn decoding_refuses_a_nested_object_of_another_type_than_its_key() {
    // map_go { ("", counter_pn): counter_pn(0) } is well formed...
    assert!(Crdt::decode(&[1, 10, 1, 0, 0, 0, 0]).is_ok());
    // ...but ("", counter_pn): set_go {} is not.
    assert!(matches!(Crdt::decode(&[1, 10, 1, 0, 0, 5, 0]), Err(CrdtError::Decode { .. })));
    // A map_rr may nest a counter_pn (AntidoteDB's map_rr nests any type), with the same check of the type.
    assert!(Crdt::decode(&[1, 11, 1, 0, 0, 0, 0]).is_ok());
    assert!(matches!(Crdt::decode(&[1, 11, 1, 0, 0, 5, 0]), Err(CrdtError::Decode { .. })));
}

#[test]
fn decoding_refuses_an_unknown_format_version_and_empty_input() {
    let mut bytes = Crdt::new(CrdtType::SetAw).encode();
    assert!(Crdt::decode(&bytes).is_ok());
    bytes[0] = 2;
    assert!(matches!(Crdt::decode(&bytes), Err(CrdtError::Decode { .. })));
    assert!(matches!(Crdt::decode(&[]), Err(CrdtError::Decode { .. })));
    assert!(matches!(Effect::decode(&[]), Err(CrdtError::Decode { .. })));
}
