//! Keys and values as they lie in the engine (the layout is described in the crate documentation).
//!
//! Every value is one format-version byte followed by postcard. Keys are big-endian so that the engine's
//! lexicographic order is the numeric order of partitions and log sequence numbers.

use crate::error::{Result, StorageError};
use crate::Compacted;
use causet_core::group::{Entry, EntryKind, HardState};
use causet_core::partition::PreparedImage;
use causet_core::record::{LogRecord, Lsn};
use causet_core::store::ObjectImage;
use causet_core::{ObjectId, PartitionId, Timestamp, TxId, VectorClock};
use serde::{Deserialize, Serialize};

/// The version byte in front of every value this crate writes. A value with another first byte is reported
/// corrupt rather than misread.
pub(crate) const FORMAT_VERSION: u8 = 6;

/// Checkpoint keyspace: the prefix of the per-partition checkpoint state (`STATE ‖ partition`).
const STATE_TAG: u8 = 0x00;
/// Checkpoint keyspace: the prefix of object images (`OBJECT ‖ partition ‖ postcard(ObjectId)`).
const OBJECT_TAG: u8 = 0x01;
/// Checkpoint keyspace: the prefix of the per-partition group state (`GROUP ‖ partition`).
const GROUP_TAG: u8 = 0x02;

/// Meta keyspace: the key of the incarnation counter.
pub(crate) const INCARNATION_KEY: &[u8] = b"incarnation";
/// Meta keyspace: the key of the disk's generation.
pub(crate) const GENERATION_KEY: &[u8] = b"generation";
/// Meta keyspace: the key of the addresses of the DC's nodes, by node index, as this node last knew them.
pub(crate) const MEMBERS_KEY: &[u8] = b"members";
/// Meta keyspace: the marker that the replicas this node runs are recorded (`hosting/` keys).
pub(crate) const HOSTING_KEY: &[u8] = b"hosting";
/// Meta keyspace: the prefix of the per-partition record of the replica this node runs (`hosting/ ‖ partition`).
pub(crate) const HOSTING_PREFIX: &[u8] = b"hosting/";

/// The key of a partition's hosting record: `hosting/ ‖ partition` (big-endian).
pub(crate) fn hosting_key(partition: PartitionId) -> Vec<u8> {
    let mut key = HOSTING_PREFIX.to_vec();
    key.extend_from_slice(&partition.0.to_be_bytes());
    key
}

/// The partition of a hosting key.
pub(crate) fn parse_hosting_key(key: &[u8]) -> Result<PartitionId> {
    let corrupt = || StorageError::CorruptKey { keyspace: "meta", key: key.to_vec() };
    let bytes: [u8; 4] = key.strip_prefix(HOSTING_PREFIX).and_then(|b| b.try_into().ok()).ok_or_else(corrupt)?;
    Ok(PartitionId(u32::from_be_bytes(bytes)))
}

/// Meta keyspace: the prefix of the coordinators' write-buffer logs (`buffer/ ‖ shard ‖ lsn`).
pub(crate) const BUFFER_PREFIX: &[u8] = b"buffer/";

/// The key of a record of shard `shard`'s write-buffer log: `buffer/ ‖ shard ‖ lsn`, both big-endian.
pub(crate) fn buffer_key(shard: u32, lsn: Lsn) -> Vec<u8> {
    let mut key = BUFFER_PREFIX.to_vec();
    key.extend_from_slice(&shard.to_be_bytes());
    key.extend_from_slice(&lsn.0.to_be_bytes());
    key
}

/// The shard and lsn of a write-buffer log key.
pub(crate) fn parse_buffer_key(key: &[u8]) -> Result<(u32, Lsn)> {
    let corrupt = || StorageError::CorruptKey { keyspace: "meta", key: key.to_vec() };
    let rest = key.strip_prefix(BUFFER_PREFIX).filter(|r| r.len() == 12).ok_or_else(corrupt)?;
    let (shard, lsn) = rest.split_at(4);
    let shard = u32::from_be_bytes(shard.try_into().map_err(|_| corrupt())?);
    Ok((shard, Lsn(u64::from_be_bytes(lsn.try_into().map_err(|_| corrupt())?))))
}

/// The length of a log key: partition (4 bytes) and lsn (8 bytes).
pub(crate) const LOG_KEY_LEN: usize = 12;

/// The key of a log record: `partition ‖ lsn`, both big-endian.
pub(crate) fn log_key(partition: PartitionId, lsn: Lsn) -> Vec<u8> {
    let mut key = Vec::with_capacity(LOG_KEY_LEN);
    key.extend_from_slice(&partition.0.to_be_bytes());
    key.extend_from_slice(&lsn.0.to_be_bytes());
    key
}

/// Splits a log key into its partition and lsn.
pub(crate) fn parse_log_key(key: &[u8]) -> Result<(PartitionId, Lsn)> {
    parse_position_key("log", key)
}

/// The key of a Raft entry: `partition ‖ index`, both big-endian (the shape of a log key).
pub(crate) fn entry_key(partition: PartitionId, index: Lsn) -> Vec<u8> {
    log_key(partition, index)
}

/// Splits a Raft entry key into its partition and index.
pub(crate) fn parse_entry_key(key: &[u8]) -> Result<(PartitionId, Lsn)> {
    parse_position_key("raft", key)
}

/// Splits a `partition ‖ position` key of `keyspace`.
fn parse_position_key(keyspace: &'static str, key: &[u8]) -> Result<(PartitionId, Lsn)> {
    let corrupt = || StorageError::CorruptKey { keyspace, key: key.to_vec() };
    let partition: [u8; 4] = key.get(0..4).and_then(|b| b.try_into().ok()).ok_or_else(corrupt)?;
    let lsn: [u8; 8] = key.get(4..LOG_KEY_LEN).and_then(|b| b.try_into().ok()).ok_or_else(corrupt)?;
    if key.len() != LOG_KEY_LEN {
        return Err(corrupt());
    }
    Ok((PartitionId(u32::from_be_bytes(partition)), Lsn(u64::from_be_bytes(lsn))))
}

/// The key of a partition's checkpoint state.
pub(crate) fn state_key(partition: PartitionId) -> Vec<u8> {
    tagged_key(STATE_TAG, partition)
}

/// The prefix under which every partition's checkpoint state lies.
pub(crate) fn state_prefix() -> [u8; 1] {
    [STATE_TAG]
}

/// The partition of a checkpoint state key.
pub(crate) fn parse_state_key(key: &[u8]) -> Result<PartitionId> {
    parse_tagged_key(STATE_TAG, key)
}

/// The key of a partition's group state.
pub(crate) fn group_state_key(partition: PartitionId) -> Vec<u8> {
    tagged_key(GROUP_TAG, partition)
}

/// The prefix under which every partition's group state lies.
pub(crate) fn group_state_prefix() -> [u8; 1] {
    [GROUP_TAG]
}

/// The partition of a group state key.
pub(crate) fn parse_group_state_key(key: &[u8]) -> Result<PartitionId> {
    parse_tagged_key(GROUP_TAG, key)
}

/// A per-partition key of the checkpoint keyspace: `tag ‖ partition`.
fn tagged_key(tag: u8, partition: PartitionId) -> Vec<u8> {
    let mut key = Vec::with_capacity(5);
    key.push(tag);
    key.extend_from_slice(&partition.0.to_be_bytes());
    key
}

/// The partition of a `tag ‖ partition` key.
fn parse_tagged_key(tag: u8, key: &[u8]) -> Result<PartitionId> {
    match key {
        [t, a, b, c, d] if *t == tag => Ok(PartitionId(u32::from_be_bytes([*a, *b, *c, *d]))),
        _ => Err(StorageError::CorruptKey { keyspace: "checkpoint", key: key.to_vec() }),
    }
}

/// The prefix of a partition's object images.
pub(crate) fn object_prefix(partition: PartitionId) -> Vec<u8> {
    tagged_key(OBJECT_TAG, partition)
}

/// The key of an object image: its partition's prefix, then the object id in postcard (deterministic, so one
/// object always has one key and a later image overwrites an earlier one).
pub(crate) fn object_key(partition: PartitionId, object: &ObjectId) -> Result<Vec<u8>> {
    postcard::to_extend(object, object_prefix(partition)).map_err(StorageError::Encode)
}

/// The object id of an object image key under `prefix`.
pub(crate) fn parse_object_key(partition: PartitionId, prefix: &[u8], key: &[u8]) -> Result<ObjectId> {
    let corrupt = |reason: String| StorageError::CorruptCheckpoint { partition, what: "object key", reason };
    let body = key.strip_prefix(prefix).ok_or_else(|| corrupt("outside the partition's prefix".into()))?;
    let (object, rest) = postcard::take_from_bytes::<ObjectId>(body).map_err(|e| corrupt(e.to_string()))?;
    if !rest.is_empty() {
        return Err(corrupt(format!("{} trailing bytes", rest.len())));
    }
    Ok(object)
}

/// A value: the format version byte, then postcard.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    postcard::to_extend(value, vec![FORMAT_VERSION]).map_err(StorageError::Encode)
}

/// Decodes a value written by [`encode`]; the error is a reason for the caller to wrap with its context.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> std::result::Result<T, String> {
    let (version, body) = bytes.split_first().ok_or_else(|| "empty value".to_string())?;
    if *version != FORMAT_VERSION {
        return Err(format!("unknown format version {version} (this build reads {FORMAT_VERSION})"));
    }
    let (value, rest) = postcard::take_from_bytes(body).map_err(|e| e.to_string())?;
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes", rest.len()));
    }
    Ok(value)
}

/// Decodes a log record, naming its partition and lsn when it is corrupt.
pub(crate) fn decode_record(partition: PartitionId, lsn: Lsn, bytes: &[u8]) -> Result<LogRecord> {
    decode(bytes).map_err(|reason| StorageError::CorruptRecord { partition, lsn, reason })
}

/// Decodes an object image.
pub(crate) fn decode_image(partition: PartitionId, bytes: &[u8]) -> Result<ObjectImage> {
    decode(bytes).map_err(|reason| StorageError::CorruptCheckpoint { partition, what: "object image", reason })
}

/// A Raft entry's value: everything but its index, which is in the key. The term comes first, so that
/// [`decode_entry_term`] reads it without decoding the data.
pub(crate) fn encode_entry(entry: &Entry) -> Result<Vec<u8>> {
    encode(&(entry.term, entry.kind, entry.data.as_slice()))
}

/// Decodes the Raft entry of `partition` at `index`, naming both when it is corrupt.
pub(crate) fn decode_entry(partition: PartitionId, index: Lsn, bytes: &[u8]) -> Result<Entry> {
    let (term, kind, data): (u64, EntryKind, Vec<u8>) =
        decode(bytes).map_err(|reason| StorageError::CorruptEntry { partition, index, reason })?;
    Ok(Entry { index, term, kind, data })
}

/// Only the term of a stored Raft entry (for the compaction point).
pub(crate) fn decode_entry_term(partition: PartitionId, index: Lsn, bytes: &[u8]) -> Result<u64> {
    let corrupt = |reason: String| StorageError::CorruptEntry { partition, index, reason };
    let (version, body) = bytes.split_first().ok_or_else(|| corrupt("empty value".into()))?;
    if *version != FORMAT_VERSION {
        return Err(corrupt(format!("unknown format version {version} (this build reads {FORMAT_VERSION})")));
    }
    let (term, _) = postcard::take_from_bytes::<u64>(body).map_err(|e| corrupt(e.to_string()))?;
    Ok(term)
}

/// A partition's group state: what a Raft replica needs besides its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupState {
    /// The last hard state written.
    pub hard_state: HardState,
    /// The last entry truncation removed.
    pub compacted: Option<Compacted>,
}

/// Decodes a group state.
pub(crate) fn decode_group_state(partition: PartitionId, bytes: &[u8]) -> Result<GroupState> {
    decode(bytes).map_err(|reason| StorageError::CorruptGroupState { partition, reason })
}

/// What a checkpoint holds besides its object images, written as one value.
#[derive(Serialize)]
pub(crate) struct StateRef<'a> {
    pub lsn: Lsn,
    pub clock: Timestamp,
    pub frontier: &'a VectorClock,
    pub prepared: &'a [PreparedImage],
    pub recent_commits: &'a [(TxId, VectorClock)],
    pub keep_log_from: Option<Lsn>,
    pub committed_through: Timestamp,
    pub clock_bound: Timestamp,
    pub fenced: &'a [TxId],
    pub peer_acked: &'a [(causet_core::DcId, Timestamp)],
    pub pvc: &'a Option<VectorClock>,
    pub remote_pending: &'a [(causet_core::DcId, causet_core::replication::ReplicatedTx)],
    pub remote_applied: &'a [(causet_core::DcId, Timestamp, TxId)],
    pub decided: &'a [causet_core::partition::DecidedImage],
    pub membership: &'a Option<causet_core::group::Membership>,
}

/// The owned form of [`StateRef`] (postcard encodes a slice and a `Vec` alike).
#[derive(Deserialize)]
pub(crate) struct State {
    pub lsn: Lsn,
    pub clock: Timestamp,
    pub frontier: VectorClock,
    pub prepared: Vec<PreparedImage>,
    pub recent_commits: Vec<(TxId, VectorClock)>,
    pub keep_log_from: Option<Lsn>,
    pub committed_through: Timestamp,
    pub clock_bound: Timestamp,
    pub fenced: Vec<TxId>,
    pub peer_acked: Vec<(causet_core::DcId, Timestamp)>,
    pub pvc: Option<VectorClock>,
    pub remote_pending: Vec<(causet_core::DcId, causet_core::replication::ReplicatedTx)>,
    pub remote_applied: Vec<(causet_core::DcId, Timestamp, TxId)>,
    pub decided: Vec<causet_core::partition::DecidedImage>,
    pub membership: Option<causet_core::group::Membership>,
}

/// Decodes a checkpoint state.
pub(crate) fn decode_state(partition: PartitionId, bytes: &[u8]) -> Result<State> {
    decode(bytes).map_err(|reason| StorageError::CorruptCheckpoint { partition, what: "state", reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use causet_core::DcId;

    #[test]
    fn log_keys_sort_by_partition_then_lsn() {
        let a = log_key(PartitionId(1), Lsn(u64::MAX));
        let b = log_key(PartitionId(2), Lsn(0));
        let c = log_key(PartitionId(2), Lsn(256));
        assert!(a < b && b < c);
        assert_eq!(parse_log_key(&c).unwrap(), (PartitionId(2), Lsn(256)));
        assert!(parse_log_key(&c[..11]).is_err());
        let mut long = c.clone();
        long.push(0);
        assert!(parse_log_key(&long).is_err());
    }

    #[test]
    fn state_and_object_keys_round_trip() {
        let p = PartitionId(7);
        assert_eq!(parse_state_key(&state_key(p)).unwrap(), p);
        assert!(state_key(p).starts_with(&state_prefix()));
        let object = ObjectId::new(b"k".to_vec(), b"b".to_vec(), causet_crdt::CrdtType::CounterPn);
        let key = object_key(p, &object).unwrap();
        assert_eq!(parse_object_key(p, &object_prefix(p), &key).unwrap(), object);
        assert!(parse_object_key(p, &object_prefix(PartitionId(8)), &key).is_err());
    }

    #[test]
    fn entries_and_group_states_round_trip_and_corruption_names_the_position() {
        let p = PartitionId(5);
        let entry = Entry { index: Lsn(9), term: 4, kind: EntryKind::ConfChangeV2, data: vec![1, 2, 3] };
        let bytes = encode_entry(&entry).unwrap();
        assert_eq!(decode_entry(p, Lsn(9), &bytes).unwrap(), entry);
        assert_eq!(decode_entry_term(p, Lsn(9), &bytes).unwrap(), 4);
        assert!(matches!(
            decode_entry(p, Lsn(9), &bytes[..bytes.len() - 1]),
            Err(StorageError::CorruptEntry { partition: PartitionId(5), index: Lsn(9), .. })
        ));
        let mut wrong = bytes.clone();
        wrong[0] = FORMAT_VERSION + 1;
        assert!(matches!(decode_entry_term(p, Lsn(9), &wrong), Err(StorageError::CorruptEntry { .. })));
        assert!(decode_entry_term(p, Lsn(9), &[]).is_err());
        assert_eq!(parse_entry_key(&entry_key(p, Lsn(9))).unwrap(), (p, Lsn(9)));
        assert!(matches!(parse_entry_key(&[1, 2]), Err(StorageError::CorruptKey { keyspace: "raft", .. })));

        let state = GroupState {
            hard_state: HardState { term: 4, vote: Some(causet_core::group::ReplicaId(2)), commit: Lsn(8) },
            compacted: Some(Compacted { index: Lsn(3), term: 1 }),
        };
        assert_eq!(decode_group_state(p, &encode(&state).unwrap()).unwrap(), state);
        assert!(matches!(decode_group_state(p, &[FORMAT_VERSION, 0xff]), Err(StorageError::CorruptGroupState { .. })));
        assert_eq!(parse_group_state_key(&group_state_key(p)).unwrap(), p);
        assert!(group_state_key(p).starts_with(&group_state_prefix()));
        assert!(parse_group_state_key(&state_key(p)).is_err());
    }

    #[test]
    fn buffer_keys_round_trip_and_sort_by_shard_then_lsn() {
        assert_eq!(parse_buffer_key(&buffer_key(3, Lsn(9))).unwrap(), (3, Lsn(9)));
        assert!(buffer_key(3, Lsn(9)) < buffer_key(3, Lsn(10)));
        assert!(buffer_key(3, Lsn(u64::MAX)) < buffer_key(4, Lsn(0)));
        assert!(parse_buffer_key(b"buffer/12").is_err());
        assert!(parse_buffer_key(&hosting_key(PartitionId(1))).is_err());
    }

    #[test]
    fn values_carry_a_version_byte_and_reject_others() {
        let record =
            LogRecord::Aborted { tx: TxId { dc: DcId(1), coordinator: causet_core::CoordinatorId(2), seq: 3 } };
        let bytes = encode(&record).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(decode_record(PartitionId(0), Lsn(1), &bytes).unwrap(), record);
        let mut wrong = bytes.clone();
        wrong[0] = FORMAT_VERSION + 1;
        assert!(matches!(
            decode_record(PartitionId(3), Lsn(9), &wrong),
            Err(StorageError::CorruptRecord { partition: PartitionId(3), lsn: Lsn(9), .. })
        ));
        assert!(decode_record(PartitionId(0), Lsn(1), &[]).is_err());
        assert!(decode_record(PartitionId(0), Lsn(1), &bytes[..bytes.len() - 1]).is_err());
    }
}
