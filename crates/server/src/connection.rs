//! Client connections: AntidoteDB's protocol on TCP.
//!
//! A connection reads frames, decodes each into a request, hands it to the shard whose coordinator owns the
//! transaction (a new transaction goes to the connection's own shard), and writes the answer. Requests on one
//! connection are served in order, one at a time, as AntidoteDB's protocol has no request ids. A frame that does not
//! decode is answered with `ApbErrorResp` and the connection stays usable; a frame over the size limit, or with no
//! code byte, breaks the framing and closes the connection after an error reply.

use crate::shard::ShardInput;
use crate::NodeState;
use bytes::BytesMut;
use causet_core::coordinator::{ClientRequest, ClientResponse, TxError};
use causet_core::ClientId;
use causet_wire::encoding::DcDescriptor;
use causet_wire::frame::{decode_frame, Frame};
use causet_wire::proto::MessageCode;
use causet_wire::request::{decode_request, Request};
use causet_wire::response::{cluster_reply, encode_reply, error_frame, not_supported, ReplyKind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, Semaphore};
use tracing::{debug, warn};

/// AntidoteDB's "unknown" error code.
const ERROR_UNKNOWN: u32 = 0;

/// Accepts connections until `stop` turns true.
pub async fn accept_loop(listener: TcpListener, state: Arc<NodeState>, stop: watch::Receiver<bool>) {
    let limit = Arc::new(Semaphore::new(state.config.max_connections));
    let mut stopping = stop.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                match limit.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let state = state.clone();
                        let stop = stop.clone();
                        tokio::spawn(async move {
                            serve(socket, state, stop).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        state.metrics.connections_refused.inc();
                        debug!(%peer, "refused: connection limit");
                        let max = state.config.max_connections;
                        tokio::spawn(refuse(socket, max));
                    }
                }
            }
            _ = stopped(&mut stopping) => break,
        }
    }
}

/// Resolves once the node is stopping.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: the node is stopping too.
    let _ = stop.wait_for(|s| *s).await;
}

async fn refuse(mut socket: TcpStream, max: usize) {
    let msg = format!("too many connections: this node serves at most {max} at once; retry later");
    let _ = socket.write_all(&error_frame(&msg, ERROR_UNKNOWN)).await;
    let _ = socket.shutdown().await;
}

async fn serve(socket: TcpStream, state: Arc<NodeState>, mut stop: watch::Receiver<bool>) {
    let client = ClientId(state.next_client.fetch_add(1, Ordering::Relaxed));
    let home = client.0 as usize % state.routes.inboxes.len();
    state.metrics.connections.inc();
    let (mut reader, mut writer) = socket.into_split();
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let max = state.config.max_frame_bytes;
    'connection: loop {
        loop {
            match decode_frame(&mut buf, max) {
                Ok(Some(frame)) => {
                    let reply = answer(&state, client, home, frame).await;
                    if writer.write_all(&reply).await.is_err() {
                        break 'connection;
                    }
                }
                Ok(None) => {
                    if !buf.is_empty() {
                        // Part of a frame: the client may be waiting for our ACK to send the rest.
                        quick_ack(&reader);
                    }
                    break;
                }
                Err(e) => {
                    state.metrics.protocol_errors.inc();
                    let _ =
                        writer.write_all(&error_frame(&format!("{e}; closing the connection"), ERROR_UNKNOWN)).await;
                    break 'connection;
                }
            }
        }
        tokio::select! {
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = stopped(&mut stop) => break,
        }
    }
    let _ = writer.shutdown().await;
    // Abort what the client left open, on every shard (a descriptor may have travelled to another connection's
    // shard; aborting there only affects this client's own idle transactions).
    for inbox in &state.routes.inboxes {
        let _ = inbox.send(ShardInput::Disconnect(client));
    }
    state.metrics.connections.dec();
}

/// Acknowledges received bytes at once instead of delaying the ACK. Clients that write a frame's header and body
/// separately with Nagle's algorithm on (AntidoteDB's Python client does) otherwise wait for the delayed ACK of the
/// header, about 40 ms per request. Setting the flag sends an ACK that is due at once; Linux resets the flag after
/// a while, so it is set whenever a read leaves part of a frame (a syscall per request cost 4% of a node's CPU).
fn quick_ack(reader: &tokio::net::tcp::OwnedReadHalf) {
    #[cfg(target_os = "linux")]
    {
        let _ = socket2::SockRef::from(reader.as_ref()).set_tcp_quickack(true);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = reader;
}

/// Serves one frame and returns the reply frame.
async fn answer(state: &NodeState, client: ClientId, home: usize, frame: Frame) -> bytes::Bytes {
    let request = match decode_request(&frame) {
        Ok(r) => r,
        Err(e) => {
            state.metrics.protocol_errors.inc();
            return error_frame(&e.to_string(), ERROR_UNKNOWN);
        }
    };
    let body = match request {
        Request::Client(body) => body,
        Request::CreateDc { nodes } => {
            return cluster_reply(MessageCode::ApbCreateDC, create_dc(&nodes, state.config.node_count()))
        }
        Request::GetConnectionDescriptor => {
            return cluster_reply(MessageCode::ApbGetConnectionDescriptor, descriptor(state).map(Some));
        }
        Request::ConnectToDcs { descriptors } => {
            let result = connect_dcs(state, descriptors).await.map(|()| None);
            return cluster_reply(MessageCode::ApbConnectToDCs, result);
        }
        other => return not_supported(other.code()),
    };
    let mut body = body;
    raise_to_acknowledged(state, &mut body);
    let kind = ReplyKind::of(&body);
    let name = request_name(&body);
    let shard = match transaction_of(&body) {
        None => home,
        Some(tx) => match state.routes.coordinator_shard(tx.coordinator) {
            Some(shard) => shard,
            None => {
                let err = TxError::UnknownTransaction(tx);
                return encode_reply(&kind, &Err(err));
            }
        },
    };
    let started = Instant::now();
    let starts = matches!(
        body,
        ClientRequest::Start { .. } | ClientRequest::StaticRead { .. } | ClientRequest::StaticUpdate { .. }
    );
    let (reply, answer) = oneshot::channel();
    let result = match state.routes.inboxes[shard].send(ShardInput::Client { client, body, reply }) {
        Ok(()) => answer.await.unwrap_or_else(|_| Err(TxError::Aborted("the node is shutting down".into()))),
        Err(_) => Err(TxError::Aborted("the node is shutting down".into())),
    };
    let m = &state.metrics;
    let labels = vec![("kind", name)];
    m.requests.get_or_create(&labels).inc();
    m.latency.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    if starts && !matches!(result, Err(TxError::InvalidClock(_) | TxError::TooManyTransactions(_))) {
        m.started.inc();
    }
    match &result {
        Ok(ClientResponse::Committed { commit }) => {
            m.committed.inc();
            let local = commit.get(causet_core::DcId(state.config.dc));
            state.acknowledged.fetch_max(local.0, Ordering::Relaxed);
        }
        Ok(ClientResponse::StaticValues { .. }) => {
            m.committed.inc();
        }
        Ok(ClientResponse::Aborted) | Err(TxError::Aborted(_) | TxError::Timeout(_)) => {
            m.aborted.inc();
        }
        _ => {}
    }
    encode_reply(&kind, &result)
}

/// Raises the local entry of a new transaction's clock to the largest commit time this node acknowledged: a
/// client without a clock (or with an older one) still sees what was acknowledged before it asked.
fn raise_to_acknowledged(state: &NodeState, body: &mut ClientRequest) {
    let clock = match body {
        ClientRequest::Start { clock }
        | ClientRequest::StaticRead { clock, .. }
        | ClientRequest::StaticUpdate { clock, .. } => clock,
        _ => return,
    };
    let acknowledged = state.acknowledged.load(Ordering::Relaxed);
    if acknowledged == 0 {
        return;
    }
    let (dc, dcs) = (causet_core::DcId(state.config.dc), usize::from(state.config.dcs));
    let c = clock.get_or_insert_with(|| causet_core::VectorClock::zero(dcs));
    if c.has_dcs(dcs) && c.get(dc).0 < acknowledged {
        c.set(dc, causet_core::Timestamp(acknowledged));
    }
}

/// `ApbCreateDC`: a DC's nodes are fixed by its configuration (`node`, `nodes`), because partitions are placed by
/// node index; asking for a DC of as many nodes as it has succeeds, any other shape is refused with the reason.
fn create_dc(nodes: &[String], configured: u16) -> Result<Option<Vec<u8>>, String> {
    if nodes.len().max(1) != usize::from(configured) {
        return Err(format!(
            "a DC of {} nodes was asked for, but this DC is configured with {configured}: a DC's nodes are set by \
             each node's `nodes` list (see docs/configuration.md), not formed at run time",
            nodes.len()
        ));
    }
    Ok(None)
}

/// `ApbGetConnectionDescriptor`: what another DC needs to replicate with this one.
fn descriptor(state: &NodeState) -> Result<Vec<u8>, String> {
    let c = &state.config;
    let Some(addr) = state.replication_addr else {
        return Err("this node runs a single DC (dcs = 1): start every DC with `dcs` and its own `dc` index to \
                    connect DCs"
            .into());
    };
    let d = DcDescriptor {
        dc: causet_core::DcId(c.dc),
        dcs: c.dcs,
        partitions: c.partitions,
        addresses: if c.nodes.is_empty() {
            vec![addr.to_string()]
        } else {
            c.nodes.iter().map(|a| a.to_string()).collect()
        },
    };
    d.encode().map_err(|e| format!("cannot encode the descriptor: {e}"))
}

/// `ApbConnectToDCs`: starts replicating with every described DC that is not this one, after checking that the
/// DCs agree on their shape and can be reached.
async fn connect_dcs(state: &NodeState, descriptors: Vec<DcDescriptor>) -> Result<(), String> {
    let c = &state.config;
    let descriptors: Vec<DcDescriptor> = descriptors.into_iter().filter(|d| d.dc.0 != c.dc || d.dcs != c.dcs).collect();
    if descriptors.is_empty() {
        return Ok(()); // Nothing but this DC: nothing to connect.
    }
    if state.replication_addr.is_none() {
        return Err(format!(
            "this node runs a single DC (dcs = 1) and cannot connect to {} other DCs: start every DC with `dcs` and \
             its own `dc` index",
            descriptors.len()
        ));
    }
    let mut peers = Vec::new();
    for d in descriptors {
        if d.dc.0 >= c.dcs {
            return Err(format!("DC {} is outside this cluster's {} DCs", d.dc.0, c.dcs));
        }
        if d.dcs != c.dcs {
            return Err(format!("DC {} was configured for {} DCs, this DC (DC {}) for {}", d.dc.0, d.dcs, c.dc, c.dcs));
        }
        if d.partitions != c.partitions {
            return Err(format!(
                "partition counts differ: DC {} has {}, this DC (DC {}) has {}; every DC must run the same number",
                d.dc.0, d.partitions, c.dc, c.partitions
            ));
        }
        if d.addresses.is_empty() {
            return Err(format!("the descriptor of DC {} names no address", d.dc.0));
        }
        let mut addrs = Vec::new();
        for addr in &d.addresses {
            let addr: std::net::SocketAddr =
                addr.parse().map_err(|_| format!("DC {}'s address {addr:?} is not host:port", d.dc.0))?;
            let reach =
                tokio::time::timeout(std::time::Duration::from_secs(3), tokio::net::TcpStream::connect(addr)).await;
            if !matches!(reach, Ok(Ok(_))) {
                return Err(format!("DC {} cannot be reached at {addr}", d.dc.0));
            }
            addrs.push(addr);
        }
        let addr = crate::wan::PeerAddrs::Nodes(addrs);
        peers.push(crate::wan::PeerConfig { dc: d.dc.0, addr, delay_ms: 0, jitter_ms: 0 });
    }
    for p in &peers {
        if state.routes.wan.add_peer(p) {
            tracing::info!(peer = p.dc, addrs = ?p.addr.nodes(), "connected to a DC through ApbConnectToDCs");
        }
    }
    Ok(())
}

fn transaction_of(body: &ClientRequest) -> Option<causet_core::TxId> {
    match body {
        ClientRequest::Read { tx, .. }
        | ClientRequest::Update { tx, .. }
        | ClientRequest::Commit { tx }
        | ClientRequest::Abort { tx } => Some(*tx),
        _ => None,
    }
}

fn request_name(body: &ClientRequest) -> &'static str {
    match body {
        ClientRequest::Start { .. } => "start",
        ClientRequest::Read { .. } => "read",
        ClientRequest::Update { .. } => "update",
        ClientRequest::Commit { .. } => "commit",
        ClientRequest::Abort { .. } => "abort",
        ClientRequest::StaticRead { .. } => "static_read",
        ClientRequest::StaticUpdate { .. } => "static_update",
    }
}
