//! The client against a tiny in-test server: a tokio listener that decodes each request with `causet-wire` and
//! answers either from a small in-memory store (for the transaction paths) or with canned frames (for the error
//! paths).

use bytes::{Bytes, BytesMut};
use causet_client::{Client, ClientError, Counter, Flag, LwwRegister, Map, MvRegister, Set, ValueExt};
use causet_core::coordinator::{BufferToken, ClientClock, ClientRequest, ClientResponse, TxError};
use causet_core::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{Crdt, CrdtType, EffectCtx, MapKey, Op, Stamp, TxTag, Value};
use causet_wire::proto::{ApbCommitResp, ApbStartTransactionResp, MessageCode};
use causet_wire::{
    decode_frame, decode_request, encode_frame, encode_reply, error_frame, not_supported, Frame, ProtocolError,
    ReplyKind, Request,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the fake server does with one request.
enum Action {
    /// Write the bytes in one go.
    Reply(Bytes),
    /// Write the bytes one at a time.
    ReplyByteByByte(Bytes),
    /// Close the connection without answering.
    Close,
    /// Never answer.
    Silence,
}

/// Serves one connection, calling `handle` for each request frame. Returns the address to connect to.
async fn serve(mut handle: impl FnMut(Frame) -> Action + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind on loopback");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("one client connects");
        let mut buf = BytesMut::new();
        loop {
            while let Some(frame) = decode_frame(&mut buf, 1 << 20).expect("the client frames correctly") {
                match handle(frame) {
                    Action::Reply(bytes) => socket.write_all(&bytes).await.expect("write"),
                    Action::ReplyByteByByte(bytes) => {
                        for b in bytes.iter() {
                            socket.write_all(&[*b]).await.expect("write");
                            socket.flush().await.expect("flush");
                            tokio::task::yield_now().await;
                        }
                    }
                    Action::Close => return,
                    Action::Silence => {}
                }
            }
            if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return;
            }
        }
    });
    addr
}

/// A one-DC, single-partition stand-in for the server: committed state, open transactions' buffered operations,
/// and a clock that ticks at each commit. It records the clock (and the buffer tokens) every transaction start
/// carried, and names `reply_token` in every reply's clock, as a server that buffers writes does.
#[derive(Default)]
struct Store {
    committed: BTreeMap<ObjectId, Crdt>,
    time: u64,
    next_seq: u64,
    open: BTreeMap<TxId, Vec<(ObjectId, Op)>>,
    start_clocks: Vec<Option<VectorClock>>,
    start_tokens: Vec<Vec<BufferToken>>,
    reply_token: Option<BufferToken>,
}

fn vc(entries: &[u64]) -> VectorClock {
    VectorClock::from_entries(entries.iter().map(|t| Timestamp(*t)).collect())
}

impl Store {
    fn handle(&mut self, frame: &Frame) -> Bytes {
        match decode_request(frame) {
            Ok(Request::Client(request)) => {
                let kind = ReplyKind::of(&request);
                let result = self.serve(request);
                encode_reply(&kind, &result)
            }
            Ok(other) => not_supported(other.code()),
            Err(e) => error_frame(&e.to_string(), 0),
        }
    }

    fn apply(state: &mut BTreeMap<ObjectId, Crdt>, updates: &[(ObjectId, Op)], stamp: u64) -> Result<(), TxError> {
        let tag = TxTag(u128::from(stamp));
        let mut ctx = EffectCtx::new(tag, 0);
        for (object, op) in updates {
            let crdt = state.entry(object.clone()).or_insert_with(|| Crdt::new(object.ty));
            let effect = crdt.generate(op, &mut ctx).map_err(TxError::Crdt)?;
            crdt.apply(&effect, Stamp { time: u128::from(stamp), tx: tag }).map_err(TxError::Crdt)?;
        }
        Ok(())
    }

    fn read(&self, objects: &[ObjectId], pending: &[(ObjectId, Op)]) -> Vec<Value> {
        let mut state = self.committed.clone();
        Store::apply(&mut state, pending, u64::MAX).expect("buffered operations were checked");
        objects.iter().map(|o| state.get(o).map_or_else(|| Crdt::new(o.ty).value(), Crdt::value)).collect()
    }

    fn commit(&mut self, updates: &[(ObjectId, Op)]) -> Result<VectorClock, TxError> {
        let mut state = self.committed.clone();
        Store::apply(&mut state, updates, self.time + 1)?;
        self.committed = state;
        self.time += 1;
        Ok(vc(&[self.time]))
    }

    fn record_start(&mut self, clock: Option<ClientClock>) {
        let (vector, tokens) = clock.map_or((None, Vec::new()), |c| (Some(c.vector), c.tokens));
        self.start_clocks.push(vector);
        self.start_tokens.push(tokens);
    }

    fn serve(&mut self, request: ClientRequest) -> Result<ClientResponse, TxError> {
        match request {
            ClientRequest::Start { clock, .. } => {
                self.record_start(clock);
                let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(1), seq: self.next_seq };
                self.next_seq += 1;
                self.open.insert(tx, Vec::new());
                Ok(ClientResponse::Started { tx, snapshot: vc(&[self.time]), token: self.reply_token })
            }
            ClientRequest::Read { tx, objects } => {
                let pending = self.open.get(&tx).ok_or(TxError::UnknownTransaction(tx))?;
                Ok(ClientResponse::Values(self.read(&objects, pending)))
            }
            ClientRequest::Update { tx, updates } => {
                let pending = self.open.get(&tx).ok_or(TxError::UnknownTransaction(tx))?;
                let mut all = pending.clone();
                all.extend(updates);
                Store::apply(&mut self.committed.clone(), &all, u64::MAX)?;
                self.open.insert(tx, all);
                Ok(ClientResponse::Updated)
            }
            ClientRequest::Commit { tx } => {
                let pending = self.open.remove(&tx).ok_or(TxError::UnknownTransaction(tx))?;
                Ok(ClientResponse::Committed { commit: self.commit(&pending)?, token: self.reply_token })
            }
            ClientRequest::Abort { tx } => {
                self.open.remove(&tx).ok_or(TxError::UnknownTransaction(tx))?;
                Ok(ClientResponse::Aborted)
            }
            ClientRequest::StaticRead { clock, objects, .. } => {
                self.record_start(clock);
                Ok(ClientResponse::StaticValues {
                    values: self.read(&objects, &[]),
                    commit: vc(&[self.time]),
                    token: self.reply_token,
                })
            }
            ClientRequest::StaticUpdate { clock, updates } => {
                self.record_start(clock);
                Ok(ClientResponse::Committed { commit: self.commit(&updates)?, token: self.reply_token })
            }
        }
    }
}

async fn store_server() -> (SocketAddr, Arc<Mutex<Store>>) {
    let store = Arc::new(Mutex::new(Store::default()));
    let shared = Arc::clone(&store);
    let addr = serve(move |frame| Action::Reply(shared.lock().expect("not poisoned").handle(&frame))).await;
    (addr, store)
}

/// Answers the n-th request with the n-th action.
async fn canned(actions: Vec<Action>) -> SocketAddr {
    let mut actions = actions.into_iter();
    serve(move |_| actions.next().unwrap_or(Action::Close)).await
}

fn started(seq: u64) -> Bytes {
    let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(1), seq };
    encode_reply(&ReplyKind::Start, &Ok(ClientResponse::Started { tx, snapshot: vc(&[1]), token: None }))
}

#[tokio::test]
async fn an_interactive_transaction_reads_its_own_writes_and_commits_them() {
    let (addr, _) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let hits = Counter::new("hits", "b");
    let tags = Set::aw("tags", "b");
    let name = LwwRegister::new("name", "b");
    let page = Map::rr("page", "b");
    let views = Counter::fat_field("views");

    let mut tx = client.start_transaction(None).await.unwrap();
    assert_eq!(tx.snapshot(), &vc(&[0]));
    tx.update([hits.increment(5), tags.add_all(["a", "b"]), name.assign("causet")]).await.unwrap();
    tx.update([hits.decrement(2), page.update([views.increment(7)])]).await.unwrap();
    let values = tx.read(&[hits.key().clone(), tags.key().clone(), name.key().clone()]).await.unwrap();
    assert_eq!(values[0].as_counter(), Some(3));
    assert_eq!(values[1].as_set(), Some(&[b"a".to_vec(), b"b".to_vec()][..]));
    assert_eq!(values[2].as_register(), Some(&b"causet"[..]));
    let commit = tx.commit().await.unwrap();
    assert_eq!(commit, vc(&[1]));
    assert_eq!(client.causal_clock(), Some(&vc(&[1])));

    let mut tx = client.start_transaction(None).await.unwrap();
    let page_value = tx.read_one(page.key()).await.unwrap();
    assert_eq!(page_value.field(views.key()).and_then(ValueExt::as_counter), Some(7));
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn the_session_clock_is_passed_along_unless_the_caller_gives_one() {
    let (addr, store) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let flag = Flag::ew("f", "b");

    client.start_transaction(None).await.unwrap().abort().await.unwrap();
    let commit = client.static_update(None, [flag.enable()]).await.unwrap();
    assert_eq!(commit, vc(&[1]));
    let (values, snapshot) = client.static_read(None, &[flag.key().clone()]).await.unwrap();
    assert_eq!((values[0].as_flag(), snapshot), (Some(true), vc(&[1])));
    client.start_transaction(Some(&vc(&[0]))).await.unwrap().commit().await.unwrap();
    client.observe_clock(&vc(&[9]));
    client.static_read(None, &[]).await.unwrap();
    // A clock of another shape replaces the session's; an empty one is ignored.
    client.observe_clock(&VectorClock::default());
    client.observe_clock(&vc(&[2, 2]));
    client.static_read(None, &[]).await.unwrap();

    let clocks = store.lock().unwrap().start_clocks.clone();
    assert_eq!(
        clocks,
        vec![None, Some(vc(&[0])), Some(vc(&[1])), Some(vc(&[0])), Some(vc(&[9])), Some(vc(&[2, 2]))],
        "the first start had no clock; later ones carry the session clock, except the explicit one"
    );
}

#[tokio::test]
async fn an_abort_discards_the_transactions_updates() {
    let (addr, _) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let reg = MvRegister::new("r", "b");
    let mut tx = client.start_transaction(None).await.unwrap();
    tx.update([reg.assign("x")]).await.unwrap();
    assert_eq!(tx.read_one(reg.key()).await.unwrap().as_mv_register(), Some(&[b"x".to_vec()][..]));
    tx.abort().await.unwrap();
    let (values, _) = client.static_read(None, &[reg.key().clone()]).await.unwrap();
    assert_eq!(values, vec![Value::MvRegister(vec![])]);
}

#[tokio::test]
async fn an_operation_the_type_refuses_is_a_server_error_with_its_message() {
    let (addr, _) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let mut tx = client.start_transaction(None).await.unwrap();
    // counter_pn has no reset: the server answers ApbErrorResp, code 0, with the CRDT's explanation.
    let err = tx.update([Counter::new("c", "b").reset()]).await.unwrap_err();
    match &err {
        ClientError::Server { code: 0, message } => assert!(message.contains("counter_pn"), "{message}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    assert!(!err.is_connection_lost());
    // The transaction is still usable.
    tx.update([Counter::new("c", "b").increment(1)]).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_typed_failure_carries_antidotedbs_code() {
    let aborted = encode_frame(
        MessageCode::ApbCommitResp,
        &ApbCommitResp { success: false, commit_time: None, errorcode: Some(3) },
    );
    let timeout = encode_frame(
        MessageCode::ApbStartTransactionResp,
        &ApbStartTransactionResp { success: false, transaction_descriptor: None, errorcode: Some(1) },
    );
    let addr = canned(vec![Action::Reply(started(0)), Action::Reply(aborted), Action::Reply(timeout)]).await;
    let mut client = Client::connect(addr).await.unwrap();
    let tx = client.start_transaction(None).await.unwrap();
    let err = tx.commit().await.unwrap_err();
    assert!(err.is_aborted(), "{err}");
    assert_eq!(err.code(), Some(3));
    let err = client.start_transaction(None).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(client.causal_clock(), Some(&vc(&[1])), "the failed commit taught the session nothing");
}

#[tokio::test]
async fn an_error_response_carries_the_servers_message_and_code() {
    let addr =
        canned(vec![Action::Reply(error_frame("no such transaction", 0)), Action::Reply(error_frame("", 3))]).await;
    let mut client = Client::connect(addr).await.unwrap();
    match client.static_update(None, [Counter::new("c", "b").increment(1)]).await.unwrap_err() {
        ClientError::Server { code, message } => assert_eq!((code, message.as_str()), (0, "no such transaction")),
        other => panic!("expected a server error, got {other:?}"),
    }
    let err = client.static_read(None, &[]).await.unwrap_err();
    assert!(err.is_aborted());
    assert_eq!(err.to_string(), "server error 3 (aborted): ");
}

#[tokio::test]
async fn a_reply_with_the_wrong_code_is_a_protocol_error_and_the_connection_survives() {
    let addr = canned(vec![Action::Reply(started(0)), Action::Reply(started(1))]).await;
    let mut client = Client::connect(addr).await.unwrap();
    let err = client.static_update(None, []).await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Protocol(ProtocolError::UnexpectedReply { expected: MessageCode::ApbCommitResp, got: 124 })
        ),
        "{err:?}"
    );
    let tx = client.start_transaction(None).await.unwrap();
    assert_eq!(tx.id().seq, 1);
}

#[tokio::test]
async fn a_reply_arriving_byte_by_byte_is_reassembled() {
    let addr = canned(vec![Action::ReplyByteByByte(started(4))]).await;
    let mut client = Client::connect(addr).await.unwrap();
    let tx = client.start_transaction(None).await.unwrap();
    assert_eq!(tx.id(), TxId { dc: DcId(0), coordinator: CoordinatorId(1), seq: 4 });
    assert_eq!(tx.snapshot(), &vc(&[1]));
}

#[tokio::test]
async fn a_closed_connection_is_reported_and_the_client_is_then_unusable() {
    let addr = canned(vec![Action::Close]).await;
    let mut client = Client::connect(addr).await.unwrap();
    let err = client.static_read(None, &[]).await.unwrap_err();
    assert!(matches!(err, ClientError::Closed | ClientError::Io(_)), "{err:?}");
    assert!(err.is_connection_lost());
    assert!(matches!(client.static_read(None, &[]).await, Err(ClientError::Broken)));
}

#[tokio::test]
async fn an_oversized_reply_breaks_the_connection_without_being_buffered() {
    let huge = encode_reply(
        &ReplyKind::StaticRead(vec![CrdtType::SetAw]),
        &Ok(ClientResponse::StaticValues {
            values: vec![Value::Set(vec![vec![7; 1000]])],
            commit: vc(&[1]),
            token: None,
        }),
    );
    let addr = canned(vec![Action::Reply(huge)]).await;
    let mut client = Client::connect(addr).await.unwrap();
    client.set_max_frame_bytes(256);
    let err = client.static_read(None, &[Set::aw("s", "b").key().clone()]).await.unwrap_err();
    assert!(matches!(err, ClientError::Frame(causet_wire::FrameError::TooLarge { .. })), "{err:?}");
    assert!(matches!(client.static_read(None, &[]).await, Err(ClientError::Broken)));
}

#[tokio::test]
async fn a_request_abandoned_before_its_reply_breaks_the_connection() {
    let addr = canned(vec![Action::Silence]).await;
    let mut client = Client::connect(addr).await.unwrap();
    let abandoned = tokio::time::timeout(Duration::from_millis(50), client.static_read(None, &[])).await;
    assert!(abandoned.is_err(), "the server never answers");
    // A late reply could now be taken for the next request's: the client refuses to go on.
    assert!(matches!(client.static_read(None, &[]).await, Err(ClientError::Broken)));
}

#[tokio::test]
async fn a_request_the_protocol_cannot_express_is_refused_before_sending() {
    let (addr, _) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let transfer = (Counter::bounded("c", "b").key().clone(), Op::Transfer { amount: 1, to: 1 });
    let err = client.static_update(None, [transfer]).await.unwrap_err();
    assert!(matches!(err, ClientError::Encode(_)), "{err:?}");
    let set_go = ObjectId::new("g", "b", CrdtType::SetGo);
    assert!(matches!(client.static_read(None, &[set_go]).await, Err(ClientError::Encode(_))));
    // Nothing was sent, so the connection is fine.
    client.static_update(None, [Counter::new("c", "b").increment(1)]).await.unwrap();
}

#[tokio::test]
async fn nested_maps_round_trip_through_the_server() {
    let (addr, _) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let doc = Map::rr("doc", "b");
    let meta = Map::rr_field("meta");
    let title = MvRegister::field("title");
    let seen = Flag::dw_field("seen");
    client.static_update(None, [doc.update([meta.update([title.assign("t"), seen.enable()])])]).await.unwrap();
    let (values, _) = client.static_read(None, &[doc.key().clone()]).await.unwrap();
    let meta_value = values[0].field(meta.key()).expect("meta is set");
    assert_eq!(meta_value.field(title.key()).and_then(ValueExt::as_mv_register), Some(&[b"t".to_vec()][..]));
    assert_eq!(meta_value.field(seen.key()).and_then(ValueExt::as_flag), Some(true));
    client.static_update(None, [doc.remove([meta.key().clone()])]).await.unwrap();
    let (values, _) = client.static_read(None, &[doc.key().clone()]).await.unwrap();
    assert_eq!(values[0].field(&MapKey { key: b"meta".to_vec(), ty: CrdtType::MapRr }), None);
}

#[tokio::test]
async fn buffer_tokens_travel_with_the_session_clock_and_each_reply_replaces_them() {
    let (addr, store) = store_server().await;
    let mut client = Client::connect(addr).await.unwrap();
    let flag = Flag::ew("f", "b");
    let [x, y] = [7, 8].map(|c| BufferToken { dc: DcId(0), coordinator: CoordinatorId(c) });
    // A buffered commit names its buffer: the session keeps the token.
    store.lock().unwrap().reply_token = Some(x);
    client.static_update(None, [flag.enable()]).await.unwrap();
    assert_eq!(client.session_clock().map(|c| c.tokens), Some(vec![x]));
    // Another session's clock: its token joins the session's own.
    client.observe_session_clock(&ClientClock::new(vc(&[0]), Some(y)));
    assert_eq!(client.session_clock().map(|c| c.tokens), Some(vec![x, y]));
    // The next start carries both; its reply (no buffer there) replaces them.
    store.lock().unwrap().reply_token = None;
    client.static_read(None, &[flag.key().clone()]).await.unwrap();
    assert_eq!(store.lock().unwrap().start_tokens.last(), Some(&vec![x, y]));
    assert_eq!(client.session_clock().map(|c| c.tokens), Some(vec![]));
    // A started transaction's descriptor names the buffer its snapshot depends on: kept, even if it aborts.
    store.lock().unwrap().reply_token = Some(y);
    client.start_transaction(None).await.unwrap().abort().await.unwrap();
    assert_eq!(client.session_clock().map(|c| c.tokens), Some(vec![y]));
    client.static_read(None, &[]).await.unwrap();
    assert_eq!(store.lock().unwrap().start_tokens.last(), Some(&vec![y]));
}
