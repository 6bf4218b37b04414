//! A proxy speaking AntidoteDB's client protocol in front of the middleware, so that AntidoteDB's clients and
//! `causet bench` drive the middleware (over Cassandra, or over Causet in eventual mode) as they drive Causet.
//!
//! Each connection is one causal session. The middleware offers causal consistency per operation, not multi-key
//! transactions, so a transaction may touch one `register_lww` object: read it, assign it (the last assignment is
//! written when the transaction commits), or both. A transaction that touches a second object, or an object of
//! another type, is refused with an error that says why; the transaction stays usable for its first object.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use bytes::BytesMut;
use causet_core::coordinator::{ClientRequest, ClientResponse, TxError};
use causet_core::{CoordinatorId, DcId, ObjectId, TxId, VectorClock};
use causet_crdt::{CrdtType, Op, Value};
use causet_wire::frame::{decode_frame, DEFAULT_MAX_FRAME_BYTES};
use causet_wire::request::{decode_request, Request};
use causet_wire::response::{encode_reply, error_frame, not_supported, ReplyKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::driver::{Error, Middleware, Store};
use crate::op::Session;
use crate::record::KeyDisplay;

/// What the proxy serves single-key operations with: the causal middleware over a store, or (as the baseline the
/// paper compares against) the store alone.
pub trait Backend: Send + Sync + 'static {
    /// Reads `key` for `session` (`None`: never written).
    fn read(&self, session: &mut Session, key: &[u8]) -> impl Future<Output = Result<Option<Vec<u8>>, Error>> + Send;
    /// Writes `value` to `key` for `session`.
    fn write(
        &self,
        session: &mut Session,
        key: &[u8],
        value: Vec<u8>,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

impl<S: Store + 'static> Backend for Middleware<S> {
    async fn read(&self, session: &mut Session, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Middleware::read(self, session, key).await
    }

    async fn write(&self, session: &mut Session, key: &[u8], value: Vec<u8>) -> Result<(), Error> {
        Middleware::write(self, session, key, value).await.map(|_| ())
    }
}

/// Open transactions a connection may keep at once.
const MAX_OPEN_TRANSACTIONS: usize = 64;

/// The key the middleware stores an object under: the bucket, length-prefixed, then the key (so that bucket `a`,
/// key `bc` and bucket `ab`, key `c` differ).
pub fn storage_key(object: &ObjectId) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + object.bucket.len() + object.key.len());
    k.extend_from_slice(&(object.bucket.len().min(u16::MAX as usize) as u16).to_be_bytes());
    k.extend_from_slice(&object.bucket);
    k.extend_from_slice(&object.key);
    k
}

/// One open transaction: the object it touches and the value it assigned last.
#[derive(Default)]
struct Tx {
    object: Option<ObjectId>,
    assigned: Option<Vec<u8>>,
}

impl Tx {
    /// Binds the transaction to `object`, or says why it cannot touch it.
    fn touch(&mut self, object: &ObjectId) -> Result<(), TxError> {
        if object.ty != CrdtType::RegisterLww {
            return Err(TxError::Aborted(format!(
                "the causal middleware stores last-writer-wins registers (register_lww) only; {} is a {}",
                KeyDisplay(&object.key),
                object.ty.name()
            )));
        }
        match &self.object {
            Some(o) if o != object => Err(TxError::Aborted(format!(
                "the causal middleware gives causal consistency per operation, not multi-key transactions: this \
                 transaction already uses {}, so it cannot also use {} (use one transaction per key)",
                KeyDisplay(&o.key),
                KeyDisplay(&object.key)
            ))),
            Some(_) => Ok(()),
            None => {
                self.object = Some(object.clone());
                Ok(())
            }
        }
    }
}

fn tx_error(e: Error) -> TxError {
    match e {
        Error::Unresolved { .. } | Error::Unfinished { .. } | Error::Unfollowed { .. } => {
            TxError::Timeout(e.to_string())
        }
        e => TxError::Aborted(e.to_string()),
    }
}

struct Connection<B> {
    backend: Arc<B>,
    session: Session,
    open: HashMap<TxId, Tx>,
    next: u64,
}

impl<B: Backend> Connection<B> {
    async fn read(&mut self, tx: &mut Tx, objects: &[ObjectId]) -> Result<Vec<Value>, TxError> {
        let mut values = Vec::with_capacity(objects.len());
        for o in objects {
            tx.touch(o)?;
            let value = match &tx.assigned {
                Some(v) => v.clone(),
                None => {
                    self.backend.read(&mut self.session, &storage_key(o)).await.map_err(tx_error)?.unwrap_or_default()
                }
            };
            values.push(Value::Register(value));
        }
        Ok(values)
    }

    fn update(tx: &mut Tx, updates: &[(ObjectId, Op)]) -> Result<(), TxError> {
        for (o, op) in updates {
            tx.touch(o)?;
            let Op::Assign(v) = op else { unreachable!("a register_lww operation is an assignment") };
            tx.assigned = Some(v.clone());
        }
        Ok(())
    }

    async fn commit(&mut self, tx: Tx) -> Result<(), TxError> {
        if let (Some(o), Some(v)) = (tx.object, tx.assigned) {
            self.backend.write(&mut self.session, &storage_key(&o), v).await.map_err(tx_error)?;
        }
        Ok(())
    }

    fn open(&mut self, tx: TxId) -> Result<Tx, TxError> {
        self.open.remove(&tx).ok_or(TxError::UnknownTransaction(tx))
    }

    async fn serve(&mut self, request: ClientRequest) -> Result<ClientResponse, TxError> {
        let clock = || VectorClock::zero(1);
        match request {
            ClientRequest::Start { .. } => {
                if self.open.len() >= MAX_OPEN_TRANSACTIONS {
                    return Err(TxError::TooManyTransactions(self.open.len()));
                }
                self.next += 1;
                let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq: self.next };
                self.open.insert(tx, Tx::default());
                Ok(ClientResponse::Started { tx, snapshot: clock(), token: None })
            }
            ClientRequest::Read { tx, objects } => {
                let mut t = self.open(tx)?;
                let result = self.read(&mut t, &objects).await;
                self.open.insert(tx, t);
                result.map(ClientResponse::Values)
            }
            ClientRequest::Update { tx, updates } => {
                let mut t = self.open(tx)?;
                let result = Self::update(&mut t, &updates);
                self.open.insert(tx, t);
                result.map(|()| ClientResponse::Updated)
            }
            ClientRequest::Commit { tx } => {
                let t = self.open(tx)?;
                self.commit(t).await.map(|()| ClientResponse::Committed { commit: clock(), token: None })
            }
            ClientRequest::Abort { tx } => self.open(tx).map(|_| ClientResponse::Aborted),
            ClientRequest::StaticRead { objects, .. } => {
                let values = self.read(&mut Tx::default(), &objects).await?;
                Ok(ClientResponse::StaticValues { values, commit: clock(), token: None })
            }
            ClientRequest::StaticUpdate { updates, .. } => {
                let mut t = Tx::default();
                Self::update(&mut t, &updates)?;
                self.commit(t).await.map(|()| ClientResponse::Committed { commit: clock(), token: None })
            }
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves AntidoteDB's protocol on `listener` until `stop` turns true.
pub async fn serve<B: Backend>(listener: TcpListener, backend: Arc<B>, stop: watch::Receiver<bool>) {
    let mut stopping = stop.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let conn = Connection { backend: backend.clone(), session: Session::new(), open: HashMap::new(), next: 0 };
                tokio::spawn(connection(socket, conn, stop.clone()));
            }
            _ = stopped(&mut stopping) => return,
        }
    }
}

async fn connection<B: Backend>(mut socket: TcpStream, mut conn: Connection<B>, mut stop: watch::Receiver<bool>) {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    loop {
        loop {
            let frame = match decode_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    let _ = socket.write_all(&error_frame(&format!("{e}; closing the connection"), 0)).await;
                    return;
                }
            };
            let reply = match decode_request(&frame) {
                Ok(Request::Client(request)) => {
                    let kind = ReplyKind::of(&request);
                    match conn.serve(request).await {
                        // A typed failure (`success = false`) carries no message: answer with `ApbErrorResp`, which
                        // does, so that the client sees why (a refused multi-key transaction, a missing dependency).
                        Err(e) => error_frame(&e.to_string(), e.code()),
                        ok => encode_reply(&kind, &ok),
                    }
                }
                Ok(other) => not_supported(other.code()),
                Err(e) => error_frame(&e.to_string(), 0),
            };
            if socket.write_all(&reply).await.is_err() {
                return;
            }
        }
        tokio::select! {
            read = socket.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = stopped(&mut stop) => return,
        }
    }
}
