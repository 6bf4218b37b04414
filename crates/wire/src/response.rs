//! Replies: encoding the coordinator's answer in the message AntidoteDB's clients expect (the server's side), and
//! decoding it (the client's side).
//!
//! | request | success | failure with code 1, 2 or 3 | failure with code 0 |
//! |---|---|---|---|
//! | 119 start | 124 `ApbStartTransactionResp` (descriptor) | 124, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 116 read | 126 `ApbReadObjectsResp` (values) | 126, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 118 update | 111 `ApbOperationResp` | 111, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 120 abort | 111 `ApbOperationResp` | 111, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 121 commit | 127 `ApbCommitResp` (commit time) | 127, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 122 static update | 127 `ApbCommitResp` (commit time) | 127, `success = false`, `errorcode` | 0 `ApbErrorResp` |
//! | 123 static read | 128 `ApbStaticReadObjectsResp` | 0 `ApbErrorResp` with the code | 0 `ApbErrorResp` |
//!
//! # Why errors take these two shapes
//!
//! This is what AntidoteDB itself answers. Its `antidote_pb_process` turns `{error, Reason}` into the typed
//! response with `success = false` and `errorcode = encode_error_code(Reason)`; `encode_error_code` knows only
//! `unknown`, `timeout`, `no_permissions` and `aborted`. Any other failure (an unknown or finished transaction, an
//! operation of the wrong type, `{error, {badtype, _}}`, a bad clock) raises inside the server, and
//! `antidote_pb_protocol:handle` catches it and answers `ApbErrorResp` with errcode 0 (`unknown`) and the error's
//! text. A failed static read always ends up there: AntidoteDB's encoder has no clause for its error, and
//! AntidoteDB's Erlang client (`antidotec_pb:read_values`) only understands `ApbErrorResp` as a static read's
//! failure, since its decoder ignores the `success` flags inside `ApbStaticReadObjectsResp`.
//!
//! So Causet answers a [`TxError`] whose [`TxError::code`] is 1 (timeout), 2 (no_permissions) or 3 (aborted) with
//! the typed response — clients such as the Python `antidotedb` package turn it into `False` or `None` (a retry
//! is sensible) — and every other error, whose code is 0, with `ApbErrorResp` carrying the error's message, which
//! the Python client raises as `AntidoteException("Antidote error 0: <message>")`. A failed static read is always
//! `ApbErrorResp`, with the error's code. Nothing is lost against AntidoteDB, and the code-0 errors keep their
//! explanation instead of a bare "unknown".

use crate::convert::{read_object_resp, value_from_proto};
use crate::encoding::{decode_clock, encode_clock, TxDescriptor};
use crate::error::{EncodeError, ProtocolError};
use crate::frame::{encode_frame, Frame};
use crate::proto::{
    ApbCommitResp, ApbConnectToDCsResp, ApbCreateDCResp, ApbErrorResp, ApbGetConnectionDescriptorResp,
    ApbOperationResp, ApbReadObjectResp, ApbReadObjectsResp, ApbStartTransactionResp, ApbStaticReadObjectsResp,
    ApbValidateOrReadObjectsResp, MessageCode,
};
use bytes::Bytes;
use causet_core::coordinator::{BufferToken, ClientClock, ClientRequest, ClientResponse, TxError};
use causet_core::VectorClock;
use causet_crdt::{CrdtType, Value};
use prost::Message;

/// AntidoteDB's error code `unknown`.
pub const ERROR_UNKNOWN: u32 = 0;
/// AntidoteDB's error code `timeout`.
pub const ERROR_TIMEOUT: u32 = 1;
/// AntidoteDB's error code `no_permissions`.
pub const ERROR_NO_PERMISSIONS: u32 = 2;
/// AntidoteDB's error code `aborted`.
pub const ERROR_ABORTED: u32 = 3;

/// AntidoteDB's name for an error code.
pub fn error_code_name(code: u32) -> &'static str {
    match code {
        ERROR_UNKNOWN => "unknown",
        ERROR_TIMEOUT => "timeout",
        ERROR_NO_PERMISSIONS => "no_permissions",
        ERROR_ABORTED => "aborted",
        _ => "error_code",
    }
}

/// What a reply must look like: the kind of request it answers, with the types of the objects a read asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// `ApbStartTransaction`, answered by 124.
    Start,
    /// `ApbReadObjects` of objects of these types, answered by 126.
    Read(Vec<CrdtType>),
    /// `ApbUpdateObjects`, answered by 111.
    Update,
    /// `ApbAbortTransaction`, answered by 111.
    Abort,
    /// `ApbCommitTransaction`, answered by 127.
    Commit,
    /// `ApbStaticReadObjects` of objects of these types, answered by 128.
    StaticRead(Vec<CrdtType>),
    /// `ApbStaticUpdateObjects`, answered by 127.
    StaticUpdate,
}

impl ReplyKind {
    /// The reply a request calls for.
    pub fn of(request: &ClientRequest) -> ReplyKind {
        match request {
            ClientRequest::Start { .. } => ReplyKind::Start,
            ClientRequest::Read { objects, .. } => ReplyKind::Read(objects.iter().map(|o| o.ty).collect()),
            ClientRequest::Update { .. } => ReplyKind::Update,
            ClientRequest::Commit { .. } => ReplyKind::Commit,
            ClientRequest::Abort { .. } => ReplyKind::Abort,
            ClientRequest::StaticRead { objects, .. } => ReplyKind::StaticRead(objects.iter().map(|o| o.ty).collect()),
            ClientRequest::StaticUpdate { .. } => ReplyKind::StaticUpdate,
        }
    }

    /// The code of a successful reply.
    pub fn reply_code(&self) -> MessageCode {
        match self {
            ReplyKind::Start => MessageCode::ApbStartTransactionResp,
            ReplyKind::Read(_) => MessageCode::ApbReadObjectsResp,
            ReplyKind::Update | ReplyKind::Abort => MessageCode::ApbOperationResp,
            ReplyKind::Commit | ReplyKind::StaticUpdate => MessageCode::ApbCommitResp,
            ReplyKind::StaticRead(_) => MessageCode::ApbStaticReadObjectsResp,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            ReplyKind::Start => "start transaction",
            ReplyKind::Read(_) => "read objects",
            ReplyKind::Update => "update objects",
            ReplyKind::Abort => "abort transaction",
            ReplyKind::Commit => "commit transaction",
            ReplyKind::StaticRead(_) => "static read objects",
            ReplyKind::StaticUpdate => "static update objects",
        }
    }
}

fn response_name(response: &ClientResponse) -> &'static str {
    match response {
        ClientResponse::Started { .. } => "started",
        ClientResponse::Values(_) => "values",
        ClientResponse::Updated => "updated",
        ClientResponse::Committed { .. } => "committed",
        ClientResponse::Aborted => "aborted",
        ClientResponse::StaticValues { .. } => "static values",
    }
}

/// An `ApbErrorResp` frame (code 0): for requests that do not decode, for errors outside AntidoteDB's typed codes,
/// and for failed static reads.
pub fn error_frame(message: &str, code: u32) -> Bytes {
    encode_frame(MessageCode::ApbErrorResp, &ApbErrorResp { errmsg: message.as_bytes().to_vec(), errcode: code })
}

/// The reply frame to a transaction request: see the module documentation for the shapes. It never fails: a
/// response that cannot be expressed (a counter beyond 32 bits, a value of the wrong shape) is answered with an
/// `ApbErrorResp` that says why.
pub fn encode_reply(kind: &ReplyKind, result: &Result<ClientResponse, TxError>) -> Bytes {
    match result {
        Ok(response) => encode_success(kind, response)
            .unwrap_or_else(|e| error_frame(&format!("cannot encode the reply: {e}"), ERROR_UNKNOWN)),
        Err(error) => encode_failure(kind, error),
    }
}

fn encode_failure(kind: &ReplyKind, error: &TxError) -> Bytes {
    let code = error.code();
    if code == ERROR_UNKNOWN {
        return error_frame(&error.to_string(), code);
    }
    let errorcode = Some(code);
    match kind {
        ReplyKind::Start => encode_frame(
            MessageCode::ApbStartTransactionResp,
            &ApbStartTransactionResp { success: false, transaction_descriptor: None, errorcode },
        ),
        ReplyKind::Read(_) => encode_frame(
            MessageCode::ApbReadObjectsResp,
            &ApbReadObjectsResp { success: false, objects: Vec::new(), errorcode },
        ),
        ReplyKind::Update | ReplyKind::Abort => {
            encode_frame(MessageCode::ApbOperationResp, &ApbOperationResp { success: false, errorcode })
        }
        ReplyKind::Commit | ReplyKind::StaticUpdate => {
            encode_frame(MessageCode::ApbCommitResp, &ApbCommitResp { success: false, commit_time: None, errorcode })
        }
        ReplyKind::StaticRead(_) => error_frame(&error.to_string(), code),
    }
}

fn read_values(types: &[CrdtType], values: &[Value]) -> Result<Vec<ApbReadObjectResp>, EncodeError> {
    if types.len() != values.len() {
        return Err(EncodeError::ValueCount { objects: types.len(), values: values.len() });
    }
    types.iter().zip(values).map(|(ty, v)| read_object_resp(*ty, v)).collect()
}

fn commit_resp(vector: &VectorClock, token: Option<BufferToken>) -> Result<ApbCommitResp, EncodeError> {
    let commit_time = encode_clock(&ClientClock::new(vector.clone(), token)).map_err(EncodeError::Encoding)?;
    Ok(ApbCommitResp { success: true, commit_time: Some(commit_time), errorcode: None })
}

fn encode_success(kind: &ReplyKind, response: &ClientResponse) -> Result<Bytes, EncodeError> {
    Ok(match (kind, response) {
        (ReplyKind::Start, ClientResponse::Started { tx, snapshot, token }) => {
            let descriptor = TxDescriptor { tx: *tx, snapshot: snapshot.clone(), token: *token }
                .encode()
                .map_err(EncodeError::Encoding)?;
            encode_frame(
                MessageCode::ApbStartTransactionResp,
                &ApbStartTransactionResp { success: true, transaction_descriptor: Some(descriptor), errorcode: None },
            )
        }
        (ReplyKind::Read(types), ClientResponse::Values(values)) => encode_frame(
            MessageCode::ApbReadObjectsResp,
            &ApbReadObjectsResp { success: true, objects: read_values(types, values)?, errorcode: None },
        ),
        (ReplyKind::Update, ClientResponse::Updated) | (ReplyKind::Abort, ClientResponse::Aborted) => {
            encode_frame(MessageCode::ApbOperationResp, &ApbOperationResp { success: true, errorcode: None })
        }
        (ReplyKind::Commit | ReplyKind::StaticUpdate, ClientResponse::Committed { commit, token }) => {
            encode_frame(MessageCode::ApbCommitResp, &commit_resp(commit, *token)?)
        }
        (ReplyKind::StaticRead(types), ClientResponse::StaticValues { values, commit, token }) => encode_frame(
            MessageCode::ApbStaticReadObjectsResp,
            &ApbStaticReadObjectsResp {
                objects: ApbReadObjectsResp { success: true, objects: read_values(types, values)?, errorcode: None },
                committime: commit_resp(commit, *token)?,
            },
        ),
        (kind, response) => {
            return Err(EncodeError::ResponseMismatch { request: kind.name(), response: response_name(response) })
        }
    })
}

/// The answer to a request Causet does not serve yet: the cluster-management requests (129, 131, 133) and
/// `ApbValidateOrReadObjects` (135) get their typed response with `success = false` and error code 0, which
/// AntidoteDB's management client reads as `{error, unknown}`; any other code gets an `ApbErrorResp`.
pub fn not_supported(request: MessageCode) -> Bytes {
    let errorcode = Some(ERROR_UNKNOWN);
    match request {
        MessageCode::ApbCreateDC => {
            encode_frame(MessageCode::ApbCreateDCResp, &ApbCreateDCResp { success: false, errorcode })
        }
        MessageCode::ApbConnectToDCs => {
            encode_frame(MessageCode::ApbConnectToDCsResp, &ApbConnectToDCsResp { success: false, errorcode })
        }
        MessageCode::ApbGetConnectionDescriptor => encode_frame(
            MessageCode::ApbGetConnectionDescriptorResp,
            &ApbGetConnectionDescriptorResp { success: false, descriptor: None, errorcode },
        ),
        MessageCode::ApbValidateOrReadObjects => encode_frame(
            MessageCode::ApbValidateOrReadObjectsResp,
            &ApbValidateOrReadObjectsResp { success: false, objects: Vec::new(), tokens: Vec::new(), errorcode },
        ),
        other => error_frame(&format!("{} is not supported yet", other.name()), ERROR_UNKNOWN),
    }
}

/// The reply to a cluster-management request (129, 131, 133): the typed response on success (with the
/// connection descriptor for 133), an `ApbErrorResp` with a readable message on failure.
pub fn cluster_reply(request: MessageCode, result: Result<Option<Vec<u8>>, String>) -> Bytes {
    let message = match result {
        Err(message) => return error_frame(&message, ERROR_UNKNOWN),
        Ok(descriptor) => descriptor,
    };
    match request {
        MessageCode::ApbCreateDC => {
            encode_frame(MessageCode::ApbCreateDCResp, &ApbCreateDCResp { success: true, errorcode: None })
        }
        MessageCode::ApbConnectToDCs => {
            encode_frame(MessageCode::ApbConnectToDCsResp, &ApbConnectToDCsResp { success: true, errorcode: None })
        }
        MessageCode::ApbGetConnectionDescriptor => encode_frame(
            MessageCode::ApbGetConnectionDescriptorResp,
            &ApbGetConnectionDescriptorResp { success: true, descriptor: message, errorcode: None },
        ),
        other => not_supported(other),
    }
}

/// A failure the server reported: an `ApbErrorResp`, or a typed response with `success = false`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// AntidoteDB's error code: 0 unknown, 1 timeout, 2 no_permissions, 3 aborted.
    pub code: u32,
    /// The server's message; for a typed failure, which carries none, a description of the request and code.
    pub message: String,
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error code {}: {})", self.message, self.code, error_code_name(self.code))
    }
}

fn decode_reply_body<M: Message + Default>(frame: &Frame, name: &'static str) -> Result<M, ProtocolError> {
    M::decode(frame.body.clone()).map_err(|e| ProtocolError::decode(name, e))
}

fn typed_failure(kind: &ReplyKind, errorcode: Option<u32>) -> ErrorReply {
    let code = errorcode.unwrap_or(ERROR_UNKNOWN);
    ErrorReply { code, message: format!("{} failed: {}", kind.name(), error_code_name(code)) }
}

fn values_of(types: &[CrdtType], objects: &[ApbReadObjectResp]) -> Result<Vec<Value>, ProtocolError> {
    if types.len() != objects.len() {
        return Err(ProtocolError::MalformedReply(format!(
            "{} values answer a read of {} objects",
            objects.len(),
            types.len()
        )));
    }
    types.iter().zip(objects).map(|(ty, o)| value_from_proto(*ty, o)).collect()
}

/// A commit's clock: its vector and the one write buffer a server names in a reply, if any.
fn commit_time_of(resp: &ApbCommitResp) -> Result<(VectorClock, Option<BufferToken>), ProtocolError> {
    let bytes = resp
        .commit_time
        .as_deref()
        .ok_or_else(|| ProtocolError::MalformedReply("a successful commit carries no commit time".into()))?;
    let clock = decode_clock(bytes).map_err(ProtocolError::InvalidClock)?;
    match clock.tokens[..] {
        [] => Ok((clock.vector, None)),
        [token] => Ok((clock.vector, Some(token))),
        _ => Err(ProtocolError::MalformedReply("a commit's clock names several write buffers".into())),
    }
}

/// Decodes the reply to a request of `kind`: the response, or the failure the server reported. A reply that is
/// not a valid answer to the request is a [`ProtocolError`].
pub fn decode_reply(kind: &ReplyKind, frame: &Frame) -> Result<Result<ClientResponse, ErrorReply>, ProtocolError> {
    if frame.code == MessageCode::ApbErrorResp.as_u8() {
        let m: ApbErrorResp = decode_reply_body(frame, "ApbErrorResp")?;
        let message = String::from_utf8_lossy(&m.errmsg).into_owned();
        return Ok(Err(ErrorReply { code: m.errcode, message }));
    }
    let expected = kind.reply_code();
    if frame.code != expected.as_u8() {
        return Err(ProtocolError::UnexpectedReply { expected, got: frame.code });
    }
    let response = match kind {
        ReplyKind::Start => {
            let m: ApbStartTransactionResp = decode_reply_body(frame, "ApbStartTransactionResp")?;
            if !m.success {
                return Ok(Err(typed_failure(kind, m.errorcode)));
            }
            let bytes = m
                .transaction_descriptor
                .as_deref()
                .ok_or_else(|| ProtocolError::MalformedReply("a started transaction carries no descriptor".into()))?;
            let d = TxDescriptor::decode(bytes).map_err(ProtocolError::InvalidTxDescriptor)?;
            ClientResponse::Started { tx: d.tx, snapshot: d.snapshot, token: d.token }
        }
        ReplyKind::Read(types) => {
            let m: ApbReadObjectsResp = decode_reply_body(frame, "ApbReadObjectsResp")?;
            if !m.success {
                return Ok(Err(typed_failure(kind, m.errorcode)));
            }
            ClientResponse::Values(values_of(types, &m.objects)?)
        }
        ReplyKind::Update | ReplyKind::Abort => {
            let m: ApbOperationResp = decode_reply_body(frame, "ApbOperationResp")?;
            if !m.success {
                return Ok(Err(typed_failure(kind, m.errorcode)));
            }
            if *kind == ReplyKind::Update {
                ClientResponse::Updated
            } else {
                ClientResponse::Aborted
            }
        }
        ReplyKind::Commit | ReplyKind::StaticUpdate => {
            let m: ApbCommitResp = decode_reply_body(frame, "ApbCommitResp")?;
            if !m.success {
                return Ok(Err(typed_failure(kind, m.errorcode)));
            }
            let (commit, token) = commit_time_of(&m)?;
            ClientResponse::Committed { commit, token }
        }
        ReplyKind::StaticRead(types) => {
            let m: ApbStaticReadObjectsResp = decode_reply_body(frame, "ApbStaticReadObjectsResp")?;
            if !m.objects.success {
                return Ok(Err(typed_failure(kind, m.objects.errorcode)));
            }
            if !m.committime.success {
                return Ok(Err(typed_failure(kind, m.committime.errorcode)));
            }
            let (commit, token) = commit_time_of(&m.committime)?;
            ClientResponse::StaticValues { values: values_of(types, &m.objects.objects)?, commit, token }
        }
    };
    Ok(Ok(response))
}
