//! The messages of AntidoteDB's `antidote.proto` (proto2), written by hand.
//!
//! Message names, field names, field numbers, scalar types and labels (`required`, `optional`, `repeated`) are
//! exactly those of `apps/antidote_pb_codec/proto/antidote.proto` in the AntidoteDB repository, so the bytes on the
//! wire are those AntidoteDB's clients produce and expect. Rust spells two names differently: the field `type`
//! is `r#type`, and the nested enum `ApbSetUpdate.SetOpType` lives in the module [`apb_set_update`], as prost's
//! code generator would put it.
//!
//! Decoding does not check that `required` fields are present: a missing one reads as its default (empty bytes,
//! zero, false, an empty message). The request decoder in [`crate::request`] treats those defaults as values.
//!
//! [`MessageCode`] is the one-byte code that precedes every message in a frame (`antidote_pb_codec.erl`'s
//! `message_type_to_code`).

#![allow(non_camel_case_types, non_snake_case, clippy::upper_case_acronyms)]

/// `CRDT_type`: the object types a client can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CRDT_type {
    /// `counter_pn`.
    COUNTER = 3,
    /// `set_aw`.
    ORSET = 4,
    /// `register_lww`.
    LWWREG = 5,
    /// `register_mv`.
    MVREG = 6,
    /// `map_go`.
    GMAP = 8,
    /// `set_rw`.
    RWSET = 10,
    /// `map_rr`.
    RRMAP = 11,
    /// `counter_fat`.
    FATCOUNTER = 12,
    /// `flag_ew`.
    FLAG_EW = 13,
    /// `flag_dw`.
    FLAG_DW = 14,
    /// `counter_b`.
    BCOUNTER = 15,
}

/// `ApbErrorResp`: a request failed outside the typed responses (code 0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbErrorResp {
    /// `required bytes errmsg = 1`: a readable message.
    #[prost(bytes = "vec", required, tag = "1")]
    pub errmsg: Vec<u8>,
    /// `required uint32 errcode = 2`: 0 unknown, 1 timeout, 2 no_permissions, 3 aborted.
    #[prost(uint32, required, tag = "2")]
    pub errcode: u32,
}

/// `ApbCounterUpdate`: add `inc` (negative to decrement; absent means 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCounterUpdate {
    /// `optional sint64 inc = 1`.
    #[prost(sint64, optional, tag = "1")]
    pub inc: Option<i64>,
}

/// `ApbGetCounterResp`: a counter's value. The field is 32 bits wide.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetCounterResp {
    /// `required sint32 value = 1`.
    #[prost(sint32, required, tag = "1")]
    pub value: i32,
}

/// `ApbSetUpdate`: add or remove elements.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbSetUpdate {
    /// `required SetOpType optype = 1`: which of the two lists applies.
    #[prost(enumeration = "apb_set_update::SetOpType", required, tag = "1")]
    pub optype: i32,
    /// `repeated bytes adds = 2`: the elements an `ADD` adds.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub adds: Vec<Vec<u8>>,
    /// `repeated bytes rems = 3`: the elements a `REMOVE` removes.
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub rems: Vec<Vec<u8>>,
}

/// Types nested in [`ApbSetUpdate`].
pub mod apb_set_update {
    /// `ApbSetUpdate.SetOpType`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    #[allow(clippy::upper_case_acronyms)]
    pub enum SetOpType {
        /// Add the `adds`.
        ADD = 1,
        /// Remove the `rems`.
        REMOVE = 2,
    }
}

/// `ApbGetSetResp`: a set's elements.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetSetResp {
    /// `repeated bytes value = 1`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `ApbRegUpdate`: assign a register (both register types).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbRegUpdate {
    /// `required bytes value = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub value: Vec<u8>,
}

/// `ApbGetRegResp`: a last-writer-wins register's value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetRegResp {
    /// `required bytes value = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub value: Vec<u8>,
}

/// `ApbGetMVRegResp`: a multi-value register's concurrent values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetMVRegResp {
    /// `repeated bytes values = 1`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub values: Vec<Vec<u8>>,
}

/// `ApbMapKey`: a nested object's key and type.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbMapKey {
    /// `required bytes key = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub key: Vec<u8>,
    /// `required CRDT_type type = 2`.
    #[prost(enumeration = "CRDT_type", required, tag = "2")]
    pub r#type: i32,
}

/// `ApbMapUpdate`: nested updates and removed keys.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbMapUpdate {
    /// `repeated ApbMapNestedUpdate updates = 1`.
    #[prost(message, repeated, tag = "1")]
    pub updates: Vec<ApbMapNestedUpdate>,
    /// `repeated ApbMapKey removedKeys = 2`.
    #[prost(message, repeated, tag = "2")]
    pub removedKeys: Vec<ApbMapKey>,
}

/// `ApbMapNestedUpdate`: one nested object's operation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbMapNestedUpdate {
    /// `required ApbMapKey key = 1`.
    #[prost(message, required, tag = "1")]
    pub key: ApbMapKey,
    /// `required ApbUpdateOperation update = 2`.
    #[prost(message, required, tag = "2")]
    pub update: ApbUpdateOperation,
}

/// `ApbGetMapResp`: a map's entries.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetMapResp {
    /// `repeated ApbMapEntry entries = 1`.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<ApbMapEntry>,
}

/// `ApbMapEntry`: one entry of a map's value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbMapEntry {
    /// `required ApbMapKey key = 1`.
    #[prost(message, required, tag = "1")]
    pub key: ApbMapKey,
    /// `required ApbReadObjectResp value = 2`.
    #[prost(message, required, tag = "2")]
    pub value: ApbReadObjectResp,
}

/// `ApbFlagUpdate`: enable (`true`) or disable (`false`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbFlagUpdate {
    /// `required bool value = 1`.
    #[prost(bool, required, tag = "1")]
    pub value: bool,
}

/// `ApbGetFlagResp`: a flag's value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetFlagResp {
    /// `required bool value = 1`.
    #[prost(bool, required, tag = "1")]
    pub value: bool,
}

/// `ApbCrdtReset`: the reset operation. It has no fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCrdtReset {}

/// `ApbOperationResp`: the answer to an update or an abort.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbOperationResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional uint32 errorcode = 2`.
    #[prost(uint32, optional, tag = "2")]
    pub errorcode: Option<u32>,
}

/// `ApbTxnProperties`: transaction properties. Causet ignores AntidoteDB's own, and reads one extension field,
/// `read_from` (AntidoteDB, which does not know it, skips it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbTxnProperties {
    /// `optional uint32 read_write = 1`: 0 read-write, 1 read-only, 2 write-only.
    #[prost(uint32, optional, tag = "1")]
    pub read_write: Option<u32>,
    /// `optional uint32 red_blue = 2`: 0 blue, 1 red.
    #[prost(uint32, optional, tag = "2")]
    pub red_blue: Option<u32>,
    /// `repeated bytes shared_locks = 3`.
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub shared_locks: Vec<Vec<u8>>,
    /// `repeated bytes exclusive_locks = 4`.
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub exclusive_locks: Vec<Vec<u8>>,
    /// Causet's extension, `optional uint32 read_from = 100`: where the transaction's reads go; 0 (or absent) the
    /// partitions' leaders, 1 the nearest replica (see `docs/protocol.md`).
    #[prost(uint32, optional, tag = "100")]
    pub read_from: Option<u32>,
}

/// `ApbBoundObject`: an object (key, type, bucket).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbBoundObject {
    /// `required bytes key = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub key: Vec<u8>,
    /// `required CRDT_type type = 2`.
    #[prost(enumeration = "CRDT_type", required, tag = "2")]
    pub r#type: i32,
    /// `required bytes bucket = 3`.
    #[prost(bytes = "vec", required, tag = "3")]
    pub bucket: Vec<u8>,
}

/// `ApbReadObjects` (116): read objects in an interactive transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbReadObjects {
    /// `repeated ApbBoundObject boundobjects = 1`.
    #[prost(message, repeated, tag = "1")]
    pub boundobjects: Vec<ApbBoundObject>,
    /// `required bytes transaction_descriptor = 2`.
    #[prost(bytes = "vec", required, tag = "2")]
    pub transaction_descriptor: Vec<u8>,
}

/// `ApbValidateOrReadObjects` (135): read objects unless the client's tokens show it has them already.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbValidateOrReadObjects {
    /// `repeated ApbBoundObject boundobjects = 1`.
    #[prost(message, repeated, tag = "1")]
    pub boundobjects: Vec<ApbBoundObject>,
    /// `repeated bytes object_tokens = 2`.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub object_tokens: Vec<Vec<u8>>,
    /// `required bytes transaction_descriptor = 3`.
    #[prost(bytes = "vec", required, tag = "3")]
    pub transaction_descriptor: Vec<u8>,
}

/// `ApbUpdateOp`: an object and the operation to apply to it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbUpdateOp {
    /// `required ApbBoundObject boundobject = 1`.
    #[prost(message, required, tag = "1")]
    pub boundobject: ApbBoundObject,
    /// `required ApbUpdateOperation operation = 2`.
    #[prost(message, required, tag = "2")]
    pub operation: ApbUpdateOperation,
}

/// `ApbUpdateOperation`: one of the operation kinds (there is no field 4).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbUpdateOperation {
    /// `optional ApbCounterUpdate counterop = 1`.
    #[prost(message, optional, tag = "1")]
    pub counterop: Option<ApbCounterUpdate>,
    /// `optional ApbSetUpdate setop = 2`.
    #[prost(message, optional, tag = "2")]
    pub setop: Option<ApbSetUpdate>,
    /// `optional ApbRegUpdate regop = 3`.
    #[prost(message, optional, tag = "3")]
    pub regop: Option<ApbRegUpdate>,
    /// `optional ApbMapUpdate mapop = 5`.
    #[prost(message, optional, tag = "5")]
    pub mapop: Option<ApbMapUpdate>,
    /// `optional ApbCrdtReset resetop = 6`.
    #[prost(message, optional, tag = "6")]
    pub resetop: Option<ApbCrdtReset>,
    /// `optional ApbFlagUpdate flagop = 7`.
    #[prost(message, optional, tag = "7")]
    pub flagop: Option<ApbFlagUpdate>,
}

/// `ApbUpdateObjects` (118): update objects in an interactive transaction.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbUpdateObjects {
    /// `repeated ApbUpdateOp updates = 1`.
    #[prost(message, repeated, tag = "1")]
    pub updates: Vec<ApbUpdateOp>,
    /// `required bytes transaction_descriptor = 2`.
    #[prost(bytes = "vec", required, tag = "2")]
    pub transaction_descriptor: Vec<u8>,
}

/// `ApbStartTransaction` (119): start an interactive transaction after a clock.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbStartTransaction {
    /// `optional bytes timestamp = 1`: the client's causal clock.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub timestamp: Option<Vec<u8>>,
    /// `optional ApbTxnProperties properties = 2`.
    #[prost(message, optional, tag = "2")]
    pub properties: Option<ApbTxnProperties>,
}

/// `ApbAbortTransaction` (120).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbAbortTransaction {
    /// `required bytes transaction_descriptor = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub transaction_descriptor: Vec<u8>,
}

/// `ApbCommitTransaction` (121).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCommitTransaction {
    /// `required bytes transaction_descriptor = 1`.
    #[prost(bytes = "vec", required, tag = "1")]
    pub transaction_descriptor: Vec<u8>,
}

/// `ApbStaticUpdateObjects` (122): update objects in a transaction of their own.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbStaticUpdateObjects {
    /// `required ApbStartTransaction transaction = 1`.
    #[prost(message, required, tag = "1")]
    pub transaction: ApbStartTransaction,
    /// `repeated ApbUpdateOp updates = 2`.
    #[prost(message, repeated, tag = "2")]
    pub updates: Vec<ApbUpdateOp>,
}

/// `ApbStaticReadObjects` (123): read objects in a transaction of their own.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbStaticReadObjects {
    /// `required ApbStartTransaction transaction = 1`.
    #[prost(message, required, tag = "1")]
    pub transaction: ApbStartTransaction,
    /// `repeated ApbBoundObject objects = 2`.
    #[prost(message, repeated, tag = "2")]
    pub objects: Vec<ApbBoundObject>,
}

/// `ApbStartTransactionResp` (124).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbStartTransactionResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional bytes transaction_descriptor = 2`.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub transaction_descriptor: Option<Vec<u8>>,
    /// `optional uint32 errorcode = 3`.
    #[prost(uint32, optional, tag = "3")]
    pub errorcode: Option<u32>,
}

/// `ApbReadObjectResp` (125): one object's value; exactly one field is set (there is no field 5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbReadObjectResp {
    /// `optional ApbGetCounterResp counter = 1`.
    #[prost(message, optional, tag = "1")]
    pub counter: Option<ApbGetCounterResp>,
    /// `optional ApbGetSetResp set = 2`.
    #[prost(message, optional, tag = "2")]
    pub set: Option<ApbGetSetResp>,
    /// `optional ApbGetRegResp reg = 3`.
    #[prost(message, optional, tag = "3")]
    pub reg: Option<ApbGetRegResp>,
    /// `optional ApbGetMVRegResp mvreg = 4`.
    #[prost(message, optional, tag = "4")]
    pub mvreg: Option<ApbGetMVRegResp>,
    /// `optional ApbGetMapResp map = 6`.
    #[prost(message, optional, tag = "6")]
    pub map: Option<ApbGetMapResp>,
    /// `optional ApbGetFlagResp flag = 7`.
    #[prost(message, optional, tag = "7")]
    pub flag: Option<ApbGetFlagResp>,
}

/// `ApbReadObjectsResp` (126).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbReadObjectsResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `repeated ApbReadObjectResp objects = 2`.
    #[prost(message, repeated, tag = "2")]
    pub objects: Vec<ApbReadObjectResp>,
    /// `optional uint32 errorcode = 3`.
    #[prost(uint32, optional, tag = "3")]
    pub errorcode: Option<u32>,
}

/// `ApbValidateOrReadObjectsResp` (136).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbValidateOrReadObjectsResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `repeated ApbReadObjectResp objects = 2`.
    #[prost(message, repeated, tag = "2")]
    pub objects: Vec<ApbReadObjectResp>,
    /// `repeated bytes tokens = 3`.
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub tokens: Vec<Vec<u8>>,
    /// `optional uint32 errorcode = 4`.
    #[prost(uint32, optional, tag = "4")]
    pub errorcode: Option<u32>,
}

/// `ApbCommitResp` (127): the answer to a commit or a static update.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCommitResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional bytes commit_time = 2`.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub commit_time: Option<Vec<u8>>,
    /// `optional uint32 errorcode = 3`.
    #[prost(uint32, optional, tag = "3")]
    pub errorcode: Option<u32>,
}

/// `ApbStaticReadObjectsResp` (128): the values and the snapshot read.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbStaticReadObjectsResp {
    /// `required ApbReadObjectsResp objects = 1`.
    #[prost(message, required, tag = "1")]
    pub objects: ApbReadObjectsResp,
    /// `required ApbCommitResp committime = 2`.
    #[prost(message, required, tag = "2")]
    pub committime: ApbCommitResp,
}

/// `ApbCreateDC` (129): form a DC of the named nodes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCreateDC {
    /// `repeated string nodes = 1`.
    #[prost(string, repeated, tag = "1")]
    pub nodes: Vec<String>,
}

/// `ApbCreateDCResp` (130).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbCreateDCResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional uint32 errorcode = 2`.
    #[prost(uint32, optional, tag = "2")]
    pub errorcode: Option<u32>,
}

/// `ApbGetConnectionDescriptor` (133): ask for the DC's connection descriptor. It has no fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetConnectionDescriptor {}

/// `ApbGetConnectionDescriptorResp` (134).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbGetConnectionDescriptorResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional bytes descriptor = 2`.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub descriptor: Option<Vec<u8>>,
    /// `optional uint32 errorcode = 3`.
    #[prost(uint32, optional, tag = "3")]
    pub errorcode: Option<u32>,
}

/// `ApbConnectToDCs` (131): replicate with the DCs described.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbConnectToDCs {
    /// `repeated bytes descriptors = 1`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub descriptors: Vec<Vec<u8>>,
}

/// `ApbConnectToDCsResp` (132).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApbConnectToDCsResp {
    /// `required bool success = 1`.
    #[prost(bool, required, tag = "1")]
    pub success: bool,
    /// `optional uint32 errorcode = 2`.
    #[prost(uint32, optional, tag = "2")]
    pub errorcode: Option<u32>,
}

/// The one-byte code in front of every message of a frame. The codes of messages that only ever travel nested in
/// others (107–110, 112–115, 117, 125) are in AntidoteDB's table too; no request or reply uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MessageCode {
    /// 0.
    ApbErrorResp = 0,
    /// 107 (nested only).
    ApbRegUpdate = 107,
    /// 108 (nested only).
    ApbGetRegResp = 108,
    /// 109 (nested only).
    ApbCounterUpdate = 109,
    /// 110 (nested only).
    ApbGetCounterResp = 110,
    /// 111.
    ApbOperationResp = 111,
    /// 112 (nested only).
    ApbSetUpdate = 112,
    /// 113 (nested only).
    ApbGetSetResp = 113,
    /// 114 (nested only).
    ApbTxnProperties = 114,
    /// 115 (nested only).
    ApbBoundObject = 115,
    /// 116.
    ApbReadObjects = 116,
    /// 117 (nested only).
    ApbUpdateOp = 117,
    /// 118.
    ApbUpdateObjects = 118,
    /// 119.
    ApbStartTransaction = 119,
    /// 120.
    ApbAbortTransaction = 120,
    /// 121.
    ApbCommitTransaction = 121,
    /// 122.
    ApbStaticUpdateObjects = 122,
    /// 123.
    ApbStaticReadObjects = 123,
    /// 124.
    ApbStartTransactionResp = 124,
    /// 125 (nested only).
    ApbReadObjectResp = 125,
    /// 126.
    ApbReadObjectsResp = 126,
    /// 127.
    ApbCommitResp = 127,
    /// 128.
    ApbStaticReadObjectsResp = 128,
    /// 129.
    ApbCreateDC = 129,
    /// 130.
    ApbCreateDCResp = 130,
    /// 131.
    ApbConnectToDCs = 131,
    /// 132.
    ApbConnectToDCsResp = 132,
    /// 133.
    ApbGetConnectionDescriptor = 133,
    /// 134.
    ApbGetConnectionDescriptorResp = 134,
    /// 135.
    ApbValidateOrReadObjects = 135,
    /// 136.
    ApbValidateOrReadObjectsResp = 136,
}

impl MessageCode {
    /// Every code, in ascending order.
    pub const ALL: [MessageCode; 31] = [
        MessageCode::ApbErrorResp,
        MessageCode::ApbRegUpdate,
        MessageCode::ApbGetRegResp,
        MessageCode::ApbCounterUpdate,
        MessageCode::ApbGetCounterResp,
        MessageCode::ApbOperationResp,
        MessageCode::ApbSetUpdate,
        MessageCode::ApbGetSetResp,
        MessageCode::ApbTxnProperties,
        MessageCode::ApbBoundObject,
        MessageCode::ApbReadObjects,
        MessageCode::ApbUpdateOp,
        MessageCode::ApbUpdateObjects,
        MessageCode::ApbStartTransaction,
        MessageCode::ApbAbortTransaction,
        MessageCode::ApbCommitTransaction,
        MessageCode::ApbStaticUpdateObjects,
        MessageCode::ApbStaticReadObjects,
        MessageCode::ApbStartTransactionResp,
        MessageCode::ApbReadObjectResp,
        MessageCode::ApbReadObjectsResp,
        MessageCode::ApbCommitResp,
        MessageCode::ApbStaticReadObjectsResp,
        MessageCode::ApbCreateDC,
        MessageCode::ApbCreateDCResp,
        MessageCode::ApbConnectToDCs,
        MessageCode::ApbConnectToDCsResp,
        MessageCode::ApbGetConnectionDescriptor,
        MessageCode::ApbGetConnectionDescriptorResp,
        MessageCode::ApbValidateOrReadObjects,
        MessageCode::ApbValidateOrReadObjectsResp,
    ];

    /// The code of a byte, if AntidoteDB's table has it.
    pub fn from_u8(code: u8) -> Option<MessageCode> {
        MessageCode::ALL.iter().copied().find(|c| *c as u8 == code)
    }

    /// The code's byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The message's name in `antidote.proto`.
    pub fn name(self) -> &'static str {
        match self {
            MessageCode::ApbErrorResp => "ApbErrorResp",
            MessageCode::ApbRegUpdate => "ApbRegUpdate",
            MessageCode::ApbGetRegResp => "ApbGetRegResp",
            MessageCode::ApbCounterUpdate => "ApbCounterUpdate",
            MessageCode::ApbGetCounterResp => "ApbGetCounterResp",
            MessageCode::ApbOperationResp => "ApbOperationResp",
            MessageCode::ApbSetUpdate => "ApbSetUpdate",
            MessageCode::ApbGetSetResp => "ApbGetSetResp",
            MessageCode::ApbTxnProperties => "ApbTxnProperties",
            MessageCode::ApbBoundObject => "ApbBoundObject",
            MessageCode::ApbReadObjects => "ApbReadObjects",
            MessageCode::ApbUpdateOp => "ApbUpdateOp",
            MessageCode::ApbUpdateObjects => "ApbUpdateObjects",
            MessageCode::ApbStartTransaction => "ApbStartTransaction",
            MessageCode::ApbAbortTransaction => "ApbAbortTransaction",
            MessageCode::ApbCommitTransaction => "ApbCommitTransaction",
            MessageCode::ApbStaticUpdateObjects => "ApbStaticUpdateObjects",
            MessageCode::ApbStaticReadObjects => "ApbStaticReadObjects",
            MessageCode::ApbStartTransactionResp => "ApbStartTransactionResp",
            MessageCode::ApbReadObjectResp => "ApbReadObjectResp",
            MessageCode::ApbReadObjectsResp => "ApbReadObjectsResp",
            MessageCode::ApbCommitResp => "ApbCommitResp",
            MessageCode::ApbStaticReadObjectsResp => "ApbStaticReadObjectsResp",
            MessageCode::ApbCreateDC => "ApbCreateDC",
            MessageCode::ApbCreateDCResp => "ApbCreateDCResp",
            MessageCode::ApbConnectToDCs => "ApbConnectToDCs",
            MessageCode::ApbConnectToDCsResp => "ApbConnectToDCsResp",
            MessageCode::ApbGetConnectionDescriptor => "ApbGetConnectionDescriptor",
            MessageCode::ApbGetConnectionDescriptorResp => "ApbGetConnectionDescriptorResp",
            MessageCode::ApbValidateOrReadObjects => "ApbValidateOrReadObjects",
            MessageCode::ApbValidateOrReadObjectsResp => "ApbValidateOrReadObjectsResp",
        }
    }
}

impl TryFrom<u8> for MessageCode {
    type Error = u8;

    /// The code of a byte; the byte itself if AntidoteDB's table does not have it.
    fn try_from(code: u8) -> Result<Self, Self::Error> {
        MessageCode::from_u8(code).ok_or(code)
    }
}

impl std::fmt::Display for MessageCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.as_u8())
    }
}
