//! The client and its interactive transactions.

use crate::connection::Connection;
use crate::ClientError;
use bytes::Bytes;
use causet_core::coordinator::{BufferToken, ClientClock, ClientResponse, ReadFrom};
use causet_core::{ObjectId, TxId, VectorClock};
use causet_crdt::{CrdtType, Op, Value};
use causet_wire::frame::DEFAULT_MAX_FRAME_BYTES;
use causet_wire::request::{
    encode_abort, encode_commit, encode_read, encode_start, encode_static_read, encode_static_update, encode_update,
};
use causet_wire::{decode_reply, ProtocolError, ReplyKind, TxDescriptor};
use prost::Message as _;
use tokio::net::{TcpStream, ToSocketAddrs};

/// A connection to a Causet (or AntidoteDB) server, with the session's causal clock.
///
/// The session clock is the largest commit or snapshot vector the client has seen. Every request that starts a
/// transaction passes it unless the caller gives a clock, so the session reads its own writes and never reads
/// older data than it has seen (across servers too, if the caller hands the clock over). Requests on one client
/// are sequential, which `&mut self` enforces; open several clients for concurrency.
///
/// With a server that buffers writes (docs/cache.md), a reply's clock may also name the write buffer the session
/// depends on (a [`BufferToken`]); the session sends it with its next transactions, on whichever server. To hand
/// the session's clock to another session, use [`Client::session_clock`] and [`Client::observe_session_clock`],
/// which carry the tokens ([`Client::causal_clock`] and [`Client::observe_clock`] carry the vector only).
#[derive(Debug)]
pub struct Client {
    connection: Connection,
    clock: Option<VectorClock>,
    tokens: Vec<BufferToken>,
}

impl Client {
    /// Connects to a server.
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<Client, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client { connection: Connection::new(stream, DEFAULT_MAX_FRAME_BYTES), clock: None, tokens: Vec::new() })
    }

    /// Sets the largest reply frame accepted (code byte and message); a larger one breaks the connection. The
    /// default is [`DEFAULT_MAX_FRAME_BYTES`].
    pub fn set_max_frame_bytes(&mut self, max_frame_bytes: usize) {
        self.connection.set_max_frame_bytes(max_frame_bytes);
    }

    /// The session's causal clock, once the session has seen one.
    pub fn causal_clock(&self) -> Option<&VectorClock> {
        self.clock.as_ref()
    }

    /// Raises the session clock to include `clock` (entry-wise maximum), for example a clock another session
    /// handed over. An empty clock is ignored. A clock with another number of DCs than the session's replaces it:
    /// the DC configuration changed and the older clock no longer applies.
    pub fn observe_clock(&mut self, clock: &VectorClock) {
        if clock.is_empty() {
            return;
        }
        match &mut self.clock {
            Some(own) if own.len() == clock.len() => own.merge_max(clock),
            _ => self.clock = Some(clock.clone()),
        }
    }

    /// The session's clock with the write buffers it depends on, to hand to another session
    /// ([`Client::observe_session_clock`]), on another server too.
    pub fn session_clock(&self) -> Option<ClientClock> {
        let vector = self.clock.clone().unwrap_or_default();
        (self.clock.is_some() || !self.tokens.is_empty()).then(|| ClientClock { vector, tokens: self.tokens.clone() })
    }

    /// Raises the session clock to include `clock`: its vector ([`Client::observe_clock`]) and its buffer tokens,
    /// kept with the session's own.
    pub fn observe_session_clock(&mut self, clock: &ClientClock) {
        let mut own =
            ClientClock { vector: self.clock.take().unwrap_or_default(), tokens: std::mem::take(&mut self.tokens) };
        own.merge(clock);
        self.clock = (!own.vector.is_empty()).then_some(own.vector);
        self.tokens = own.tokens;
    }

    /// A reply's clock: the session absorbs the vector and takes the reply's token in place of its own (the server
    /// resolved the tokens it was sent before it answered, and names its own buffer again if it must).
    fn observe_reply(&mut self, vector: &VectorClock, token: Option<BufferToken>) {
        self.observe_clock(vector);
        self.tokens = token.into_iter().collect();
    }

    /// The clock to send: the caller's, else the session's, with the session's buffer tokens.
    fn clock_for(&self, clock: Option<&VectorClock>) -> Option<ClientClock> {
        match clock {
            Some(vector) => Some(ClientClock { vector: vector.clone(), tokens: self.tokens.clone() }),
            None => self.session_clock(),
        }
    }

    async fn call(&mut self, kind: &ReplyKind, request: Bytes) -> Result<ClientResponse, ClientError> {
        let frame = self.connection.call(request).await?;
        decode_reply(kind, &frame)?.map_err(|e| ClientError::Server { code: e.code, message: e.message })
    }

    /// Starts an interactive transaction whose snapshot includes `clock`, or the session clock if `clock` is
    /// `None`.
    ///
    /// Drop the transaction only after [`Transaction::commit`] or [`Transaction::abort`]: a transaction dropped
    /// open stays open on the server until its idle timeout aborts it.
    pub async fn start_transaction(&mut self, clock: Option<&VectorClock>) -> Result<Transaction<'_>, ClientError> {
        self.start_transaction_with(clock, ReadFrom::Leader).await
    }

    /// [`Client::start_transaction`], with its reads going where `reads` says: [`ReadFrom::Nearest`] reads from
    /// the replica on the server's own node where a partition has one, at the DC's stable snapshot (a little
    /// older than the leaders' latest, and still causally consistent and after the session clock).
    pub async fn start_transaction_with(
        &mut self,
        clock: Option<&VectorClock>,
        reads: ReadFrom,
    ) -> Result<Transaction<'_>, ClientError> {
        let request = encode_start(self.clock_for(clock).as_ref(), reads)?;
        match self.call(&ReplyKind::Start, request).await? {
            // (The snapshot and its token cover what the transaction reads, also if it aborts.)
            ClientResponse::Started { tx, snapshot, token } => {
                self.observe_reply(&snapshot, token);
                Ok(Transaction { client: self, descriptor: TxDescriptor { tx, snapshot, token } })
            }
            other => Err(unexpected("start transaction", &other)),
        }
    }

    /// Reads objects in a transaction of their own, at a snapshot that includes `clock` (or the session clock).
    /// Returns the values in request order and the snapshot read, which the session clock absorbs.
    pub async fn static_read(
        &mut self,
        clock: Option<&VectorClock>,
        objects: &[ObjectId],
    ) -> Result<(Vec<Value>, VectorClock), ClientError> {
        self.static_read_with(clock, objects, ReadFrom::Leader).await
    }

    /// [`Client::static_read`], reading where `reads` says (see [`Client::start_transaction_with`]).
    pub async fn static_read_with(
        &mut self,
        clock: Option<&VectorClock>,
        objects: &[ObjectId],
        reads: ReadFrom,
    ) -> Result<(Vec<Value>, VectorClock), ClientError> {
        let request = encode_static_read(self.clock_for(clock).as_ref(), objects, reads)?;
        let kind = ReplyKind::StaticRead(types_of(objects));
        match self.call(&kind, request).await? {
            ClientResponse::StaticValues { values, commit, token } => {
                self.observe_reply(&commit, token);
                Ok((values, commit))
            }
            other => Err(unexpected("static read", &other)),
        }
    }

    /// Updates objects in a transaction of their own, after `clock` (or the session clock). Returns the commit
    /// vector, which the session clock absorbs.
    pub async fn static_update(
        &mut self,
        clock: Option<&VectorClock>,
        updates: impl IntoIterator<Item = (ObjectId, Op)>,
    ) -> Result<VectorClock, ClientError> {
        let updates: Vec<(ObjectId, Op)> = updates.into_iter().collect();
        let request = encode_static_update(self.clock_for(clock).as_ref(), &updates)?;
        match self.call(&ReplyKind::StaticUpdate, request).await? {
            ClientResponse::Committed { commit, token } => {
                self.observe_reply(&commit, token);
                Ok(commit)
            }
            other => Err(unexpected("static update", &other)),
        }
    }
}

/// Cluster management (AntidoteDB's codes 129–134).
impl Client {
    async fn management<M: prost::Message + Default>(
        &mut self,
        code: causet_wire::proto::MessageCode,
        reply_code: causet_wire::proto::MessageCode,
        message: &impl prost::Message,
    ) -> Result<M, ClientError> {
        let frame = self.connection.call(causet_wire::frame::encode_frame(code, message)).await?;
        if frame.code == causet_wire::proto::MessageCode::ApbErrorResp.as_u8() {
            let e = causet_wire::proto::ApbErrorResp::decode(frame.body)
                .map_err(|e| ClientError::Protocol(ProtocolError::MalformedReply(e.to_string())))?;
            return Err(ClientError::Server {
                code: e.errcode,
                message: String::from_utf8_lossy(&e.errmsg).into_owned(),
            });
        }
        if frame.code != reply_code.as_u8() {
            return Err(ClientError::Protocol(ProtocolError::MalformedReply(format!(
                "{} answered with code {}",
                code.name(),
                frame.code
            ))));
        }
        M::decode(frame.body).map_err(|e| ClientError::Protocol(ProtocolError::MalformedReply(e.to_string())))
    }

    /// This DC's connection descriptor (`ApbGetConnectionDescriptor`), to hand to the other DCs.
    pub async fn connection_descriptor(&mut self) -> Result<Vec<u8>, ClientError> {
        use causet_wire::proto::{ApbGetConnectionDescriptor, ApbGetConnectionDescriptorResp, MessageCode};
        let reply: ApbGetConnectionDescriptorResp = self
            .management(
                MessageCode::ApbGetConnectionDescriptor,
                MessageCode::ApbGetConnectionDescriptorResp,
                &ApbGetConnectionDescriptor {},
            )
            .await?;
        match (reply.success, reply.descriptor) {
            (true, Some(d)) => Ok(d),
            _ => Err(ClientError::Server { code: reply.errorcode.unwrap_or(0), message: "no descriptor".into() }),
        }
    }

    /// Connects this DC to the described DCs (`ApbConnectToDCs`); this DC's own descriptor may be among them.
    pub async fn connect_dcs(&mut self, descriptors: Vec<Vec<u8>>) -> Result<(), ClientError> {
        use causet_wire::proto::{ApbConnectToDCs, ApbConnectToDCsResp, MessageCode};
        let reply: ApbConnectToDCsResp = self
            .management(
                MessageCode::ApbConnectToDCs,
                MessageCode::ApbConnectToDCsResp,
                &ApbConnectToDCs { descriptors },
            )
            .await?;
        if !reply.success {
            return Err(ClientError::Server { code: reply.errorcode.unwrap_or(0), message: "connect refused".into() });
        }
        Ok(())
    }
}

fn types_of(objects: &[ObjectId]) -> Vec<CrdtType> {
    objects.iter().map(|o| o.ty).collect()
}

/// `decode_reply` returns only the response the kind calls for; this covers the impossible rest without a panic.
fn unexpected(request: &str, response: &ClientResponse) -> ClientError {
    ClientError::Protocol(ProtocolError::MalformedReply(format!("{request} answered with {response:?}")))
}

/// An interactive transaction. It borrows its client: requests on a connection are sequential.
#[derive(Debug)]
pub struct Transaction<'c> {
    client: &'c mut Client,
    descriptor: TxDescriptor,
}

impl Transaction<'_> {
    /// The transaction's id.
    pub fn id(&self) -> TxId {
        self.descriptor.tx
    }

    /// The snapshot the transaction reads.
    pub fn snapshot(&self) -> &VectorClock {
        &self.descriptor.snapshot
    }

    /// Reads objects; the values come in request order.
    pub async fn read(&mut self, objects: &[ObjectId]) -> Result<Vec<Value>, ClientError> {
        let request = encode_read(&self.descriptor, objects)?;
        match self.client.call(&ReplyKind::Read(types_of(objects)), request).await? {
            ClientResponse::Values(values) => Ok(values),
            other => Err(unexpected("read", &other)),
        }
    }

    /// Reads one object.
    pub async fn read_one(&mut self, object: &ObjectId) -> Result<Value, ClientError> {
        let mut values = self.read(std::slice::from_ref(object)).await?;
        values.pop().ok_or_else(|| ClientError::Protocol(ProtocolError::MalformedReply("no value read".into())))
    }

    /// Applies operations, in order. They take effect when the transaction commits; later reads in the
    /// transaction see them.
    pub async fn update(&mut self, updates: impl IntoIterator<Item = (ObjectId, Op)>) -> Result<(), ClientError> {
        let updates: Vec<(ObjectId, Op)> = updates.into_iter().collect();
        let request = encode_update(&self.descriptor, &updates)?;
        match self.client.call(&ReplyKind::Update, request).await? {
            ClientResponse::Updated => Ok(()),
            other => Err(unexpected("update", &other)),
        }
    }

    /// Commits. Returns the commit vector (the snapshot for a read-only transaction), which the session clock
    /// absorbs.
    pub async fn commit(self) -> Result<VectorClock, ClientError> {
        let request = encode_commit(&self.descriptor)?;
        match self.client.call(&ReplyKind::Commit, request).await? {
            ClientResponse::Committed { commit, token } => {
                self.client.observe_reply(&commit, token);
                Ok(commit)
            }
            other => Err(unexpected("commit", &other)),
        }
    }

    /// Aborts: none of the transaction's updates take effect.
    pub async fn abort(self) -> Result<(), ClientError> {
        let request = encode_abort(&self.descriptor)?;
        match self.client.call(&ReplyKind::Abort, request).await? {
            ClientResponse::Aborted => Ok(()),
            other => Err(unexpected("abort", &other)),
        }
    }
}
