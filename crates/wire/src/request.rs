//! Requests: decoding a frame into a [`Request`] (the server's side) and encoding one (the client's side).
//!
//! | code | message | decoded as |
//! |---|---|---|
//! | 116 | `ApbReadObjects` | [`ClientRequest::Read`] |
//! | 118 | `ApbUpdateObjects` | [`ClientRequest::Update`] |
//! | 119 | `ApbStartTransaction` | [`ClientRequest::Start`] |
//! | 120 | `ApbAbortTransaction` | [`ClientRequest::Abort`] |
//! | 121 | `ApbCommitTransaction` | [`ClientRequest::Commit`] |
//! | 122 | `ApbStaticUpdateObjects` | [`ClientRequest::StaticUpdate`] |
//! | 123 | `ApbStaticReadObjects` | [`ClientRequest::StaticRead`] |
//! | 129 | `ApbCreateDC` | [`Request::CreateDc`] |
//! | 131 | `ApbConnectToDCs` | [`Request::ConnectToDcs`] |
//! | 133 | `ApbGetConnectionDescriptor` | [`Request::GetConnectionDescriptor`] |
//! | 135 | `ApbValidateOrReadObjects` | [`Request::ValidateOrReadObjects`] |
//!
//! `ApbTxnProperties` (in `ApbStartTransaction`, and so in both static requests) is accepted, and AntidoteDB's own
//! fields ignored: Causet runs every transaction the same way, whatever `read_write`, `red_blue` or the lock lists
//! say. Causet's extension field `read_from` (100) selects where reads go ([`ReadFrom`]): 1 the nearest replica,
//! anything else the leaders. Any other code is a [`ProtocolError`], as is a body that does not decode or names an
//! unknown type; none of them panics.

use crate::convert::{bound_object, object_id, update_op, updates_from_proto};
use crate::encoding::{decode_start_clock, encode_clock, DcDescriptor, TxDescriptor};
use crate::error::{EncodeError, ProtocolError};
use crate::frame::{encode_frame, Frame};
use crate::proto::{
    ApbAbortTransaction, ApbCommitTransaction, ApbConnectToDCs, ApbCreateDC, ApbGetConnectionDescriptor,
    ApbReadObjects, ApbStartTransaction, ApbStaticReadObjects, ApbStaticUpdateObjects, ApbUpdateObjects,
    ApbValidateOrReadObjects, MessageCode,
};
use bytes::Bytes;
use causet_core::coordinator::{ClientClock, ClientRequest, ReadFrom};
use causet_core::{ObjectId, TxId};
use causet_crdt::Op;
use prost::Message;

/// A decoded request.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// A transaction request for the coordinator (codes 116 and 118–123).
    Client(ClientRequest),
    /// `ApbCreateDC` (129): form a DC of the named nodes.
    CreateDc {
        /// The nodes' names.
        nodes: Vec<String>,
    },
    /// `ApbConnectToDCs` (131): replicate with the described DCs.
    ConnectToDcs {
        /// The DCs' descriptors.
        descriptors: Vec<DcDescriptor>,
    },
    /// `ApbGetConnectionDescriptor` (133): describe this DC for others.
    GetConnectionDescriptor,
    /// `ApbValidateOrReadObjects` (135): read objects in a transaction unless the client's tokens are current.
    ValidateOrReadObjects {
        /// The transaction.
        tx: TxId,
        /// The objects.
        objects: Vec<ObjectId>,
        /// The client's tokens, one per object.
        tokens: Vec<Vec<u8>>,
    },
}

impl Request {
    /// The message code the request travels with.
    pub fn code(&self) -> MessageCode {
        match self {
            Request::Client(request) => client_request_code(request),
            Request::CreateDc { .. } => MessageCode::ApbCreateDC,
            Request::ConnectToDcs { .. } => MessageCode::ApbConnectToDCs,
            Request::GetConnectionDescriptor => MessageCode::ApbGetConnectionDescriptor,
            Request::ValidateOrReadObjects { .. } => MessageCode::ApbValidateOrReadObjects,
        }
    }
}

/// The message code a client request travels with.
pub fn client_request_code(request: &ClientRequest) -> MessageCode {
    match request {
        ClientRequest::Start { .. } => MessageCode::ApbStartTransaction,
        ClientRequest::Read { .. } => MessageCode::ApbReadObjects,
        ClientRequest::Update { .. } => MessageCode::ApbUpdateObjects,
        ClientRequest::Commit { .. } => MessageCode::ApbCommitTransaction,
        ClientRequest::Abort { .. } => MessageCode::ApbAbortTransaction,
        ClientRequest::StaticRead { .. } => MessageCode::ApbStaticReadObjects,
        ClientRequest::StaticUpdate { .. } => MessageCode::ApbStaticUpdateObjects,
    }
}

fn decode_body<M: Message + Default>(frame: &Frame, name: &'static str) -> Result<M, ProtocolError> {
    M::decode(frame.body.clone()).map_err(|e| ProtocolError::decode(name, e))
}

fn tx_of(descriptor: &[u8]) -> Result<TxId, ProtocolError> {
    TxDescriptor::decode(descriptor).map(|d| d.tx).map_err(ProtocolError::InvalidTxDescriptor)
}

fn start_clock(start: &ApbStartTransaction) -> Result<Option<ClientClock>, ProtocolError> {
    decode_start_clock(start.timestamp.as_deref()).map_err(ProtocolError::InvalidClock)
}

/// Where a transaction's reads go, from its properties' `read_from` extension.
fn read_from(start: &ApbStartTransaction) -> ReadFrom {
    match start.properties.as_ref().and_then(|p| p.read_from) {
        Some(READ_FROM_NEAREST) => ReadFrom::Nearest,
        Some(READ_FROM_CACHE) => ReadFrom::Cache,
        Some(READ_FROM_FRESH) => ReadFrom::Fresh,
        _ => ReadFrom::Leader,
    }
}

/// `ApbTxnProperties.read_from` for reads from the nearest replica.
pub const READ_FROM_NEAREST: u32 = 1;
/// `ApbTxnProperties.read_from` for reads through the node's lease cache (where it has one).
pub const READ_FROM_CACHE: u32 = 2;
/// `ApbTxnProperties.read_from` for fresh reads from each partition's leader, even where the node caches.
pub const READ_FROM_FRESH: u32 = 3;

fn objects_of(objects: &[crate::proto::ApbBoundObject]) -> Result<Vec<ObjectId>, ProtocolError> {
    objects.iter().map(object_id).collect()
}

/// Decodes a request frame.
pub fn decode_request(frame: &Frame) -> Result<Request, ProtocolError> {
    let code = MessageCode::from_u8(frame.code).ok_or(ProtocolError::UnknownCode(frame.code))?;
    let request = match code {
        MessageCode::ApbStartTransaction => {
            let m: ApbStartTransaction = decode_body(frame, "ApbStartTransaction")?;
            ClientRequest::Start { clock: start_clock(&m)?, reads: read_from(&m) }
        }
        MessageCode::ApbReadObjects => {
            let m: ApbReadObjects = decode_body(frame, "ApbReadObjects")?;
            ClientRequest::Read { tx: tx_of(&m.transaction_descriptor)?, objects: objects_of(&m.boundobjects)? }
        }
        MessageCode::ApbUpdateObjects => {
            let m: ApbUpdateObjects = decode_body(frame, "ApbUpdateObjects")?;
            ClientRequest::Update { tx: tx_of(&m.transaction_descriptor)?, updates: updates_from_proto(&m.updates)? }
        }
        MessageCode::ApbAbortTransaction => {
            let m: ApbAbortTransaction = decode_body(frame, "ApbAbortTransaction")?;
            ClientRequest::Abort { tx: tx_of(&m.transaction_descriptor)? }
        }
        MessageCode::ApbCommitTransaction => {
            let m: ApbCommitTransaction = decode_body(frame, "ApbCommitTransaction")?;
            ClientRequest::Commit { tx: tx_of(&m.transaction_descriptor)? }
        }
        MessageCode::ApbStaticUpdateObjects => {
            let m: ApbStaticUpdateObjects = decode_body(frame, "ApbStaticUpdateObjects")?;
            ClientRequest::StaticUpdate {
                clock: start_clock(&m.transaction)?,
                updates: updates_from_proto(&m.updates)?,
            }
        }
        MessageCode::ApbStaticReadObjects => {
            let m: ApbStaticReadObjects = decode_body(frame, "ApbStaticReadObjects")?;
            ClientRequest::StaticRead {
                clock: start_clock(&m.transaction)?,
                objects: objects_of(&m.objects)?,
                reads: read_from(&m.transaction),
            }
        }
        MessageCode::ApbCreateDC => {
            let m: ApbCreateDC = decode_body(frame, "ApbCreateDC")?;
            return Ok(Request::CreateDc { nodes: m.nodes });
        }
        MessageCode::ApbConnectToDCs => {
            let m: ApbConnectToDCs = decode_body(frame, "ApbConnectToDCs")?;
            let descriptors = m
                .descriptors
                .iter()
                .map(|d| DcDescriptor::decode(d).map_err(ProtocolError::InvalidDcDescriptor))
                .collect::<Result<_, _>>()?;
            return Ok(Request::ConnectToDcs { descriptors });
        }
        MessageCode::ApbGetConnectionDescriptor => {
            let _: ApbGetConnectionDescriptor = decode_body(frame, "ApbGetConnectionDescriptor")?;
            return Ok(Request::GetConnectionDescriptor);
        }
        MessageCode::ApbValidateOrReadObjects => {
            let m: ApbValidateOrReadObjects = decode_body(frame, "ApbValidateOrReadObjects")?;
            return Ok(Request::ValidateOrReadObjects {
                tx: tx_of(&m.transaction_descriptor)?,
                objects: objects_of(&m.boundobjects)?,
                tokens: m.object_tokens,
            });
        }
        other => return Err(ProtocolError::NotARequest(other)),
    };
    Ok(Request::Client(request))
}

/// Encodes a request into a frame. Transaction descriptors are written with the transaction id only (see
/// [`TxDescriptor`]); a client that holds the descriptor a server handed out uses [`encode_read`] and its siblings
/// to send it back as received.
pub fn encode_request(request: &Request) -> Result<Bytes, EncodeError> {
    match request {
        Request::Client(request) => encode_client_request(request),
        Request::CreateDc { nodes } => {
            Ok(encode_frame(MessageCode::ApbCreateDC, &ApbCreateDC { nodes: nodes.clone() }))
        }
        Request::ConnectToDcs { descriptors } => {
            let descriptors =
                descriptors.iter().map(|d| d.encode().map_err(EncodeError::Encoding)).collect::<Result<_, _>>()?;
            Ok(encode_frame(MessageCode::ApbConnectToDCs, &ApbConnectToDCs { descriptors }))
        }
        Request::GetConnectionDescriptor => {
            Ok(encode_frame(MessageCode::ApbGetConnectionDescriptor, &ApbGetConnectionDescriptor {}))
        }
        Request::ValidateOrReadObjects { tx, objects, tokens } => {
            let m = ApbValidateOrReadObjects {
                boundobjects: objects.iter().map(bound_object).collect::<Result<_, _>>()?,
                object_tokens: tokens.clone(),
                transaction_descriptor: descriptor_bytes(&TxDescriptor::id_only(*tx))?,
            };
            Ok(encode_frame(MessageCode::ApbValidateOrReadObjects, &m))
        }
    }
}

/// Encodes a transaction request into a frame, descriptors naming the transaction only.
pub fn encode_client_request(request: &ClientRequest) -> Result<Bytes, EncodeError> {
    match request {
        ClientRequest::Start { clock, reads } => encode_start(clock.as_ref(), *reads),
        ClientRequest::Read { tx, objects } => encode_read(&TxDescriptor::id_only(*tx), objects),
        ClientRequest::Update { tx, updates } => encode_update(&TxDescriptor::id_only(*tx), updates),
        ClientRequest::Commit { tx } => encode_commit(&TxDescriptor::id_only(*tx)),
        ClientRequest::Abort { tx } => encode_abort(&TxDescriptor::id_only(*tx)),
        ClientRequest::StaticRead { clock, objects, reads } => encode_static_read(clock.as_ref(), objects, *reads),
        ClientRequest::StaticUpdate { clock, updates } => encode_static_update(clock.as_ref(), updates),
    }
}

fn descriptor_bytes(tx: &TxDescriptor) -> Result<Vec<u8>, EncodeError> {
    tx.encode().map_err(EncodeError::Encoding)
}

fn start_message(clock: Option<&ClientClock>, reads: ReadFrom) -> Result<ApbStartTransaction, EncodeError> {
    let timestamp = clock.map(encode_clock).transpose().map_err(EncodeError::Encoding)?;
    // No properties for the default: the frames stay those of AntidoteDB's clients.
    let read_from = match reads {
        ReadFrom::Leader => None,
        ReadFrom::Nearest => Some(READ_FROM_NEAREST),
        ReadFrom::Cache => Some(READ_FROM_CACHE),
        ReadFrom::Fresh => Some(READ_FROM_FRESH),
    };
    let properties = read_from.map(|r| crate::proto::ApbTxnProperties { read_from: Some(r), ..Default::default() });
    Ok(ApbStartTransaction { timestamp, properties })
}

fn bound_objects(objects: &[ObjectId]) -> Result<Vec<crate::proto::ApbBoundObject>, EncodeError> {
    objects.iter().map(bound_object).collect()
}

fn update_ops(updates: &[(ObjectId, Op)]) -> Result<Vec<crate::proto::ApbUpdateOp>, EncodeError> {
    updates.iter().map(|(o, op)| update_op(o, op)).collect()
}

/// `ApbStartTransaction` (119) after `clock`, if any; properties only for reads from the nearest replica.
pub fn encode_start(clock: Option<&ClientClock>, reads: ReadFrom) -> Result<Bytes, EncodeError> {
    Ok(encode_frame(MessageCode::ApbStartTransaction, &start_message(clock, reads)?))
}

/// `ApbReadObjects` (116) in the transaction `tx`.
pub fn encode_read(tx: &TxDescriptor, objects: &[ObjectId]) -> Result<Bytes, EncodeError> {
    let m = ApbReadObjects { boundobjects: bound_objects(objects)?, transaction_descriptor: descriptor_bytes(tx)? };
    Ok(encode_frame(MessageCode::ApbReadObjects, &m))
}

/// `ApbUpdateObjects` (118) in the transaction `tx`.
pub fn encode_update(tx: &TxDescriptor, updates: &[(ObjectId, Op)]) -> Result<Bytes, EncodeError> {
    let m = ApbUpdateObjects { updates: update_ops(updates)?, transaction_descriptor: descriptor_bytes(tx)? };
    Ok(encode_frame(MessageCode::ApbUpdateObjects, &m))
}

/// `ApbCommitTransaction` (121).
pub fn encode_commit(tx: &TxDescriptor) -> Result<Bytes, EncodeError> {
    let m = ApbCommitTransaction { transaction_descriptor: descriptor_bytes(tx)? };
    Ok(encode_frame(MessageCode::ApbCommitTransaction, &m))
}

/// `ApbAbortTransaction` (120).
pub fn encode_abort(tx: &TxDescriptor) -> Result<Bytes, EncodeError> {
    let m = ApbAbortTransaction { transaction_descriptor: descriptor_bytes(tx)? };
    Ok(encode_frame(MessageCode::ApbAbortTransaction, &m))
}

/// `ApbStaticReadObjects` (123) after `clock`, if any.
pub fn encode_static_read(
    clock: Option<&ClientClock>,
    objects: &[ObjectId],
    reads: ReadFrom,
) -> Result<Bytes, EncodeError> {
    let m = ApbStaticReadObjects { transaction: start_message(clock, reads)?, objects: bound_objects(objects)? };
    Ok(encode_frame(MessageCode::ApbStaticReadObjects, &m))
}

/// `ApbStaticUpdateObjects` (122) after `clock`, if any.
pub fn encode_static_update(clock: Option<&ClientClock>, updates: &[(ObjectId, Op)]) -> Result<Bytes, EncodeError> {
    let m =
        ApbStaticUpdateObjects { transaction: start_message(clock, ReadFrom::Leader)?, updates: update_ops(updates)? };
    Ok(encode_frame(MessageCode::ApbStaticUpdateObjects, &m))
}
