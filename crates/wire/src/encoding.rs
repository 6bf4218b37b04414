//! Causet's own encodings of the values AntidoteDB's protocol carries as opaque bytes: clocks (the start
//! timestamp, the commit time), transaction descriptors and DC connection descriptors.
//!
//! AntidoteDB fills these with Erlang's external term format. Causet uses small, fixed layouts any language can
//! read with a few lines of code. Every encoding starts with a format byte whose high nibble names the kind and whose
//! low nibble is the version, so that a value of one kind passed where another is expected is refused rather than
//! misread, and so that a layout can change later. All integers are big-endian. `docs/protocol.md` describes
//! each layout byte by byte.
//!
//! | kind | format byte | layout after it |
//! |---|---|---|
//! | clock | `0x01` | `n: u16`, then `n × u64` |
//! | clock with buffer tokens | `0x02` | `n: u16`, `n × u64`, `k: u16`, then `k ×` (`dc: u16`, `coordinator: u32`) |
//! | transaction descriptor | `0x11` | `dc: u16`, `coordinator: u32`, `seq: u64`, `n: u16`, `n × u64` (snapshot) |
//! | descriptor with a buffer token | `0x12` | as `0x11`, then `dc: u16`, `coordinator: u32` (the token) |
//! | DC descriptor | `0x22` | `dc: u16`, `dcs: u16`, `partitions: u32`, `count: u16`, then `count ×` (`len: u16`, `len` bytes of UTF-8) |
//!
//! Decoding never panics and never allocates more than the input's length: every length is checked against the
//! bytes actually present first.

use causet_core::coordinator::{BufferToken, ClientClock};
use causet_core::{CoordinatorId, DcId, Timestamp, TxId, VectorClock};

/// The format byte of a clock.
pub const CLOCK_FORMAT: u8 = 0x01;
/// The format byte of a clock that names a write buffer the client depends on (HoneyPot's buffered writes, not
/// handed over to their owners yet: docs/cache.md).
pub const TOKEN_CLOCK_FORMAT: u8 = 0x02;
/// The format byte of a transaction descriptor.
pub const TX_DESCRIPTOR_FORMAT: u8 = 0x11;
/// The format byte of a transaction descriptor that names a write buffer its snapshot depends on.
pub const TOKEN_TX_DESCRIPTOR_FORMAT: u8 = 0x12;
/// The format byte of a DC connection descriptor.
pub const DC_DESCRIPTOR_FORMAT: u8 = 0x22;

/// Erlang's `term_to_binary(ignore)` in the two atom encodings OTP uses (`ATOM_EXT`, and `SMALL_ATOM_UTF8_EXT`
/// since OTP 26). AntidoteDB's Erlang client sends it as the start timestamp when the caller has no clock.
const ERLANG_IGNORE: [&[u8]; 2] = [b"\x83\x64\x00\x06ignore", b"\x83\x77\x06ignore"];

/// Why bytes do not decode into a clock or a descriptor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodingError {
    /// There are no bytes at all.
    #[error("{what}: no bytes")]
    Empty {
        /// What was being decoded.
        what: &'static str,
    },
    /// The format byte is not the one this kind and version use.
    #[error("{what}: unknown format byte 0x{format:02x} (expected 0x{expected:02x})")]
    UnknownFormat {
        /// What was being decoded.
        what: &'static str,
        /// The format byte found.
        format: u8,
        /// The format byte this version writes.
        expected: u8,
    },
    /// The bytes end before the layout does.
    #[error("{what}: truncated: {needed_bytes} bytes needed, {available_bytes} present")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// Bytes the layout needs from the point where they ran out.
        needed_bytes: usize,
        /// Bytes present from that point.
        available_bytes: usize,
    },
    /// Bytes remain after the layout ends.
    #[error("{what}: {extra_bytes} unexpected trailing bytes")]
    TrailingBytes {
        /// What was being decoded.
        what: &'static str,
        /// How many.
        extra_bytes: usize,
    },
    /// A string is not UTF-8.
    #[error("{what}: a string is not valid UTF-8")]
    InvalidUtf8 {
        /// What was being decoded.
        what: &'static str,
    },
    /// A value is too large for its length field.
    #[error("{what}: {count} entries exceed the limit of {max}")]
    TooLong {
        /// What was being encoded.
        what: &'static str,
        /// How many there are.
        count: usize,
        /// The most the layout can express.
        max: usize,
    },
}

/// A reader over a byte slice that refuses to read past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], what: &'static str, format: u8) -> Result<Self, EncodingError> {
        let Some((&first, rest)) = bytes.split_first() else {
            return Err(EncodingError::Empty { what });
        };
        if first != format {
            return Err(EncodingError::UnknownFormat { what, format: first, expected: format });
        }
        Ok(Reader { bytes: rest, what })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], EncodingError> {
        if self.bytes.len() < n {
            return Err(EncodingError::Truncated {
                what: self.what,
                needed_bytes: n,
                available_bytes: self.bytes.len(),
            });
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], EncodingError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, EncodingError> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, EncodingError> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, EncodingError> {
        self.array().map(u64::from_be_bytes)
    }

    /// `n: u16` then `n` timestamps. The count is checked against the bytes present before allocating.
    fn timestamps(&mut self) -> Result<VectorClock, EncodingError> {
        let n = usize::from(self.u16()?);
        let raw = self.take(n * 8)?;
        let entries = raw
            .chunks_exact(8)
            .map(|c| Timestamp(u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])))
            .collect();
        Ok(VectorClock::from_entries(entries))
    }

    /// Fails unless `n` more bytes are present.
    fn ensure(&self, n: usize) -> Result<(), EncodingError> {
        if self.bytes.len() < n {
            return Err(EncodingError::Truncated {
                what: self.what,
                needed_bytes: n,
                available_bytes: self.bytes.len(),
            });
        }
        Ok(())
    }

    /// A buffer token: `dc: u16`, `coordinator: u32`.
    fn token(&mut self) -> Result<BufferToken, EncodingError> {
        Ok(BufferToken { dc: DcId(self.u16()?), coordinator: CoordinatorId(self.u32()?) })
    }

    fn finish(self) -> Result<(), EncodingError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(EncodingError::TrailingBytes { what: self.what, extra_bytes: self.bytes.len() })
        }
    }
}

fn put_timestamps(out: &mut Vec<u8>, clock: &VectorClock, what: &'static str) -> Result<(), EncodingError> {
    let n = u16::try_from(clock.len()).map_err(|_| EncodingError::TooLong {
        what,
        count: clock.len(),
        max: usize::from(u16::MAX),
    })?;
    out.extend_from_slice(&n.to_be_bytes());
    for t in clock.entries() {
        out.extend_from_slice(&t.0.to_be_bytes());
    }
    Ok(())
}

/// Encodes a client's clock: `0x01`, the number of DCs as `u16`, then each DC's timestamp as `u64`; with buffer
/// tokens, `0x02`, the same, then the number of tokens as `u16` and each token's DC as `u16` and coordinator as
/// `u32`.
///
/// A [`VectorClock`] has one entry per DC and [`DcId`] is 16 bits wide, so the count always fits; a longer vector
/// (or more than 65,535 tokens) is refused rather than truncated.
pub fn encode_clock(clock: &ClientClock) -> Result<Vec<u8>, EncodingError> {
    let mut out = Vec::with_capacity(11 + 8 * clock.vector.len() + 6 * clock.tokens.len());
    out.push(if clock.tokens.is_empty() { CLOCK_FORMAT } else { TOKEN_CLOCK_FORMAT });
    put_timestamps(&mut out, &clock.vector, "clock")?;
    if !clock.tokens.is_empty() {
        let n = u16::try_from(clock.tokens.len()).map_err(|_| EncodingError::TooLong {
            what: "clock's buffer tokens",
            count: clock.tokens.len(),
            max: usize::from(u16::MAX),
        })?;
        out.extend_from_slice(&n.to_be_bytes());
        for token in &clock.tokens {
            put_token(&mut out, token);
        }
    }
    Ok(out)
}

fn put_token(out: &mut Vec<u8>, token: &BufferToken) {
    out.extend_from_slice(&token.dc.0.to_be_bytes());
    out.extend_from_slice(&token.coordinator.0.to_be_bytes());
}

/// Decodes a clock written by [`encode_clock`].
pub fn decode_clock(bytes: &[u8]) -> Result<ClientClock, EncodingError> {
    let format = if bytes.first() == Some(&TOKEN_CLOCK_FORMAT) { TOKEN_CLOCK_FORMAT } else { CLOCK_FORMAT };
    let mut r = Reader::new(bytes, "clock", format)?;
    let vector = r.timestamps()?;
    let mut tokens = Vec::new();
    if format == TOKEN_CLOCK_FORMAT {
        let n = usize::from(r.u16()?);
        // The count is checked against the bytes present before anything is allocated.
        r.ensure(n * 6)?;
        for _ in 0..n {
            tokens.push(r.token()?);
        }
    }
    r.finish()?;
    Ok(ClientClock { vector, tokens })
}

/// Decodes the clock a client sends to start a transaction: absent or empty bytes mean "no clock", and so does
/// Erlang's encoding of the atom `ignore`, which AntidoteDB's own Erlang client sends when it has no clock.
pub fn decode_start_clock(bytes: Option<&[u8]>) -> Result<Option<ClientClock>, EncodingError> {
    match bytes {
        None => Ok(None),
        Some(b) if b.is_empty() || ERLANG_IGNORE.contains(&b) => Ok(None),
        Some(b) => decode_clock(b).map(Some),
    }
}

/// A transaction descriptor: what the server hands out when a transaction starts and the client passes back with
/// every request of the transaction.
///
/// The descriptor also carries the transaction's snapshot vector, so that a client learns the snapshot it reads
/// from (and can keep its session's causal clock up to date even if the transaction aborts). Servers identify the
/// transaction by `tx` alone and ignore the snapshot a client sends back: the coordinator keeps the real one. A
/// client may send the snapshot back as received or with no entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxDescriptor {
    /// The transaction.
    pub tx: TxId,
    /// Its snapshot vector, or an empty vector when unknown.
    pub snapshot: VectorClock,
    /// The write buffer the snapshot depends on, if the coordinator buffers writes the snapshot does not cover
    /// (a client that keeps the snapshot as its clock keeps this with it).
    pub token: Option<BufferToken>,
}

impl TxDescriptor {
    /// A descriptor that names the transaction only.
    pub fn id_only(tx: TxId) -> TxDescriptor {
        TxDescriptor { tx, snapshot: VectorClock::default(), token: None }
    }

    /// Encodes the descriptor: `0x11`, `dc: u16`, `coordinator: u32`, `seq: u64`, then the snapshot as the number
    /// of DCs (`u16`) and one `u64` per DC; with a buffer token, `0x12`, the same, then the token's DC (`u16`) and
    /// coordinator (`u32`).
    pub fn encode(&self) -> Result<Vec<u8>, EncodingError> {
        let mut out = Vec::with_capacity(23 + 8 * self.snapshot.len());
        out.push(if self.token.is_some() { TOKEN_TX_DESCRIPTOR_FORMAT } else { TX_DESCRIPTOR_FORMAT });
        out.extend_from_slice(&self.tx.dc.0.to_be_bytes());
        out.extend_from_slice(&self.tx.coordinator.0.to_be_bytes());
        out.extend_from_slice(&self.tx.seq.to_be_bytes());
        put_timestamps(&mut out, &self.snapshot, "transaction descriptor")?;
        if let Some(token) = &self.token {
            put_token(&mut out, token);
        }
        Ok(out)
    }

    /// Decodes a descriptor written by [`TxDescriptor::encode`].
    pub fn decode(bytes: &[u8]) -> Result<TxDescriptor, EncodingError> {
        let with_token = bytes.first() == Some(&TOKEN_TX_DESCRIPTOR_FORMAT);
        let format = if with_token { TOKEN_TX_DESCRIPTOR_FORMAT } else { TX_DESCRIPTOR_FORMAT };
        let mut r = Reader::new(bytes, "transaction descriptor", format)?;
        let dc = DcId(r.u16()?);
        let coordinator = CoordinatorId(r.u32()?);
        let seq = r.u64()?;
        let snapshot = r.timestamps()?;
        let token = if with_token { Some(r.token()?) } else { None };
        r.finish()?;
        Ok(TxDescriptor { tx: TxId { dc, coordinator, seq }, snapshot, token })
    }
}

/// A DC's connection descriptor, as `ApbGetConnectionDescriptorResp` hands out and `ApbConnectToDCs` takes.
///
/// This is a placeholder until Causet's inter-DC layer settles what another DC needs: the DC's id and the
/// addresses its replication endpoints listen on. The format byte lets the layout grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcDescriptor {
    /// The DC.
    pub dc: DcId,
    /// How many DCs its configuration has.
    pub dcs: u16,
    /// Its partitions (every DC must run the same number).
    pub partitions: u32,
    /// Where its inter-DC endpoints listen (`host:port`).
    pub addresses: Vec<String>,
}

impl DcDescriptor {
    /// Encodes the descriptor: `0x22`, `dc: u16`, `dcs: u16`, `partitions: u32`, the number of addresses (`u16`),
    /// then each address as its length (`u16`) and its UTF-8 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodingError> {
        const WHAT: &str = "DC descriptor";
        let too_long = |count: usize| EncodingError::TooLong { what: WHAT, count, max: usize::from(u16::MAX) };
        let count = u16::try_from(self.addresses.len()).map_err(|_| too_long(self.addresses.len()))?;
        let mut out = vec![DC_DESCRIPTOR_FORMAT];
        out.extend_from_slice(&self.dc.0.to_be_bytes());
        out.extend_from_slice(&self.dcs.to_be_bytes());
        out.extend_from_slice(&self.partitions.to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        for address in &self.addresses {
            let len = u16::try_from(address.len()).map_err(|_| too_long(address.len()))?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(address.as_bytes());
        }
        Ok(out)
    }

    /// Decodes a descriptor written by [`DcDescriptor::encode`].
    pub fn decode(bytes: &[u8]) -> Result<DcDescriptor, EncodingError> {
        const WHAT: &str = "DC descriptor";
        let mut r = Reader::new(bytes, WHAT, DC_DESCRIPTOR_FORMAT)?;
        let dc = DcId(r.u16()?);
        let dcs = r.u16()?;
        let partitions = r.u32()?;
        let count = r.u16()?;
        // Every address takes at least its two length bytes, so the input bounds the count.
        let mut addresses = Vec::with_capacity(usize::from(count).min(r.bytes.len() / 2));
        for _ in 0..count {
            let len = usize::from(r.u16()?);
            let raw = r.take(len)?;
            let address = std::str::from_utf8(raw).map_err(|_| EncodingError::InvalidUtf8 { what: WHAT })?;
            addresses.push(address.to_owned());
        }
        r.finish()?;
        Ok(DcDescriptor { dc, dcs, partitions, addresses })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clock(entries: &[u64]) -> VectorClock {
        VectorClock::from_entries(entries.iter().map(|t| Timestamp(*t)).collect())
    }

    #[test]
    fn clock_bytes_are_the_documented_layout() {
        let bytes = encode_clock(&clock(&[1, 0x0102_0304_0506_0708]).into()).unwrap();
        assert_eq!(
            bytes,
            [0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 1, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08].to_vec()
        );
        assert_eq!(encode_clock(&VectorClock::default().into()).unwrap(), vec![0x01, 0, 0]);
    }

    #[test]
    fn a_clock_with_buffer_tokens_has_the_documented_layout() {
        let token = BufferToken { dc: DcId(3), coordinator: CoordinatorId(0x0a0b_0c0d) };
        let c = ClientClock::new(clock(&[7]), Some(token));
        let bytes = encode_clock(&c).unwrap();
        assert_eq!(bytes, [0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0, 3, 0x0a, 0x0b, 0x0c, 0x0d].to_vec());
        assert_eq!(decode_clock(&bytes).unwrap(), c);
        // A token cut short, a count beyond the bytes, or a plain clock with tokens after it, is refused.
        assert!(matches!(decode_clock(&bytes[..bytes.len() - 1]), Err(EncodingError::Truncated { .. })));
        let mut more = bytes.clone();
        more[12] = 0xff;
        assert!(matches!(decode_clock(&more), Err(EncodingError::Truncated { .. })));
        let mut plain = bytes.clone();
        plain[0] = CLOCK_FORMAT;
        assert!(matches!(decode_clock(&plain), Err(EncodingError::TrailingBytes { extra_bytes: 8, .. })));
        // No tokens: the plain layout.
        assert_eq!(encode_clock(&ClientClock::new(clock(&[7]), None)).unwrap()[0], CLOCK_FORMAT);
    }

    #[test]
    fn a_descriptor_with_a_buffer_token_has_the_documented_layout() {
        let tx = TxId { dc: DcId(2), coordinator: CoordinatorId(0x0a0b_0c0d), seq: 7 };
        let token = Some(BufferToken { dc: DcId(1), coordinator: CoordinatorId(5) });
        let d = TxDescriptor { tx, snapshot: clock(&[9]), token };
        let bytes = d.encode().unwrap();
        let mut expected =
            vec![0x12, 0, 2, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9];
        expected.extend([0, 1, 0, 0, 0, 5]);
        assert_eq!(bytes, expected);
        assert_eq!(TxDescriptor::decode(&bytes).unwrap(), d);
        assert!(matches!(TxDescriptor::decode(&bytes[..bytes.len() - 2]), Err(EncodingError::Truncated { .. })));
    }

    #[test]
    fn tx_descriptor_bytes_are_the_documented_layout() {
        let tx = TxId { dc: DcId(2), coordinator: CoordinatorId(0x0a0b_0c0d), seq: 7 };
        let d = TxDescriptor { tx, snapshot: clock(&[9]), token: None };
        let bytes = d.encode().unwrap();
        assert_eq!(
            bytes,
            [0x11, 0, 2, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9].to_vec()
        );
        assert_eq!(TxDescriptor::decode(&bytes).unwrap(), d);
        assert_eq!(TxDescriptor::decode(&TxDescriptor::id_only(tx).encode().unwrap()).unwrap().tx, tx);
    }

    #[test]
    fn dc_descriptor_round_trips_and_has_the_documented_layout() {
        let d = DcDescriptor { dc: DcId(1), dcs: 3, partitions: 8, addresses: vec!["a:1".into(), String::new()] };
        let bytes = d.encode().unwrap();
        assert_eq!(bytes, [0x22, 0, 1, 0, 3, 0, 0, 0, 8, 0, 2, 0, 3, b'a', b':', b'1', 0, 0].to_vec());
        assert_eq!(DcDescriptor::decode(&bytes).unwrap(), d);
    }

    #[test]
    fn garbage_is_refused_with_typed_errors() {
        assert_eq!(decode_clock(&[]), Err(EncodingError::Empty { what: "clock" }));
        assert!(matches!(decode_clock(&[0x11, 0, 0]), Err(EncodingError::UnknownFormat { format: 0x11, .. })));
        assert!(matches!(decode_clock(&[0x01, 0]), Err(EncodingError::Truncated { .. })));
        assert!(matches!(decode_clock(&[0x01, 0, 1, 0, 0]), Err(EncodingError::Truncated { .. })));
        assert!(matches!(decode_clock(&[0x01, 0, 0, 9]), Err(EncodingError::TrailingBytes { extra_bytes: 1, .. })));
        // A huge declared count is refused by length, not allocated.
        assert!(matches!(decode_clock(&[0x01, 0xff, 0xff]), Err(EncodingError::Truncated { .. })));
        let tx = TxDescriptor::id_only(TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq: 0 });
        let bytes = tx.encode().unwrap();
        assert!(matches!(decode_clock(&bytes), Err(EncodingError::UnknownFormat { .. })));
        assert!(matches!(TxDescriptor::decode(&bytes[..10]), Err(EncodingError::Truncated { .. })));
        assert!(matches!(
            DcDescriptor::decode(&[0x22, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0xff]),
            Err(EncodingError::InvalidUtf8 { .. })
        ));
        assert!(matches!(
            DcDescriptor::decode(&[0x22, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff]),
            Err(EncodingError::Truncated { .. })
        ));
    }

    #[test]
    fn a_start_clock_may_be_absent_empty_or_erlangs_ignore() {
        assert_eq!(decode_start_clock(None), Ok(None));
        assert_eq!(decode_start_clock(Some(&[])), Ok(None));
        assert_eq!(decode_start_clock(Some(b"\x83\x64\x00\x06ignore")), Ok(None));
        assert_eq!(decode_start_clock(Some(b"\x83\x77\x06ignore")), Ok(None));
        assert_eq!(decode_start_clock(Some(&[0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5])), Ok(Some(clock(&[5]).into())));
        assert!(decode_start_clock(Some(b"\x83\x64\x00\x06ignorf")).is_err());
    }

    proptest! {
        #[test]
        fn clocks_round_trip(
            entries in proptest::collection::vec(any::<u64>(), 0..8),
            tokens in proptest::collection::vec((any::<u16>(), any::<u32>()), 0..4),
        ) {
            let tokens = tokens.into_iter().map(|(dc, c)| BufferToken { dc: DcId(dc), coordinator: CoordinatorId(c) });
            let c = ClientClock { vector: clock(&entries), tokens: tokens.collect() };
            prop_assert_eq!(decode_clock(&encode_clock(&c).unwrap()).unwrap(), c);
        }

        #[test]
        fn tx_descriptors_round_trip(
            dc in any::<u16>(), coordinator in any::<u32>(), seq in any::<u64>(),
            entries in proptest::collection::vec(any::<u64>(), 0..8),
            token in proptest::option::of(any::<u32>()),
        ) {
            let d = TxDescriptor {
                tx: TxId { dc: DcId(dc), coordinator: CoordinatorId(coordinator), seq },
                snapshot: clock(&entries),
                token: token.map(|c| BufferToken { dc: DcId(dc), coordinator: CoordinatorId(c) }),
            };
            prop_assert_eq!(TxDescriptor::decode(&d.encode().unwrap()).unwrap(), d);
        }

        #[test]
        fn dc_descriptors_round_trip(
            dc in any::<u16>(),
            dcs in any::<u16>(),
            partitions in any::<u32>(),
            addresses in proptest::collection::vec(".{0,12}", 0..4),
        ) {
            let d = DcDescriptor { dc: DcId(dc), dcs, partitions, addresses };
            prop_assert_eq!(DcDescriptor::decode(&d.encode().unwrap()).unwrap(), d);
        }

        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_clock(&bytes);
            let _ = decode_start_clock(Some(&bytes));
            let _ = TxDescriptor::decode(&bytes);
            let _ = DcDescriptor::decode(&bytes);
        }

        #[test]
        fn a_cut_encoding_is_refused(entries in proptest::collection::vec(any::<u64>(), 1..6), cut in 0usize..100) {
            let bytes = encode_clock(&clock(&entries).into()).unwrap();
            let cut = cut % bytes.len();
            prop_assert!(decode_clock(&bytes[..cut]).is_err());
        }
    }
}
