//! The binary encoding shared by states and effects: a format version byte, then postcard.
//!
//! Decoding never panics and never recurses without bound: maps count how deep they are nested while decoding and
//! refuse to go past [`MAX_NESTING_DEPTH`], so hostile bytes cannot exhaust the stack.

use super::MAX_NESTING_DEPTH;
use crate::CrdtError;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::cell::Cell;

/// The version of the encoding; bumped when it changes incompatibly.
const FORMAT_VERSION: u8 = 1;

thread_local! {
    /// How many maps enclose the value being decoded on this thread.
    static DECODE_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Encodes a value after the format version byte.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing into a growable vector fails only for sequences of unknown length, which these types never
    // produce (every collection is a Vec, BTreeMap or BTreeSet), so the fallback is never taken.
    postcard::to_extend(value, vec![FORMAT_VERSION]).unwrap_or_default()
}

/// Decodes a whole buffer written by [`encode`]: the version must match and no byte may be left over.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &'static str) -> Result<T, CrdtError> {
    let fail = |reason: String| CrdtError::Decode { what: what.into(), reason };
    let (&version, body) = bytes.split_first().ok_or_else(|| fail("empty buffer".into()))?;
    if version != FORMAT_VERSION {
        return Err(fail(format!("unknown format version {version}")));
    }
    let (value, rest) = postcard::take_from_bytes(body).map_err(|e| fail(e.to_string()))?;
    if !rest.is_empty() {
        return Err(fail(format!("{} trailing bytes", rest.len())));
    }
    Ok(value)
}

/// Restores the decoding depth when a nested decode ends, however it ends.
struct DepthGuard {
    outer: usize,
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DECODE_DEPTH.with(|depth| depth.set(self.outer));
    }
}

/// `deserialize_with` for a map's nested objects or effects: one level deeper, refused past the bound.
pub(crate) fn deserialize_nested<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let outer = DECODE_DEPTH.with(Cell::get);
    if outer >= MAX_NESTING_DEPTH {
        return Err(D::Error::custom(format!("maps nested deeper than {MAX_NESTING_DEPTH}")));
    }
    DECODE_DEPTH.with(|depth| depth.set(outer + 1));
    let _guard = DepthGuard { outer };
    T::deserialize(deserializer)
}
