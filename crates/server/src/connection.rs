//! Client connections: AntidoteDB's protocol on TCP.
//!
//! A connection reads frames, decodes each into a request, hands it to the shard whose coordinator owns the
//! transaction (a new transaction goes to the connection's own shard), and writes the answer. Requests on one
//! connection are served in order, one at a time, as AntidoteDB's protocol has no request ids. A frame that does not
//! decode is answered with `ApbErrorResp` and the connection stays usable. A frame over the size limit is read to
//! its end and discarded without being kept, then answered with `ApbErrorResp` naming the limit and the option that
//! raises it, and the connection stays usable too; only a frame that declares more than `discard_limit`, or one
//! with no code byte, breaks the framing and closes the connection after an error reply.

use crate::cluster::{connect_dcs, create_dc, descriptor};
use crate::routes::ShardInput;
use crate::shutdown::stopped;
use crate::NodeState;
use bytes::Buf;
use bytes::BytesMut;
use causet_core::coordinator::{ClientRequest, ClientResponse, TxError};
use causet_core::ClientId;
use causet_wire::frame::{decode_frame, Frame, FrameError, LENGTH_PREFIX_BYTES};
use causet_wire::proto::MessageCode;
use causet_wire::request::{decode_request, Request};
use causet_wire::response::{cluster_reply, encode_reply, error_frame, not_supported, ReplyKind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Semaphore};
use tracing::{debug, warn};

/// AntidoteDB's "unknown" error code.
const ERROR_UNKNOWN: u32 = 0;

/// Accepts connections until `stop` turns true; with `tls`, each speaks TLS (`[client_tls]`).
pub async fn accept_loop(
    listener: TcpListener,
    state: Arc<NodeState>,
    tls: Option<crate::tls::ClientTls>,
    stop: watch::Receiver<bool>,
) {
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
                let permit = limit.clone().try_acquire_owned().ok();
                let (state, stop, tls) = (state.clone(), stop.clone(), tls.clone());
                tokio::spawn(async move {
                    let Some(tls) = tls else {
                        let (reader, writer) = socket.into_split();
                        return admit(reader, writer, quick_ack, permit, peer, state, stop).await;
                    };
                    match tls.accept(socket).await {
                        // No quick acknowledgements under TLS: the session owns the socket.
                        Ok(stream) => {
                            let (reader, writer) = tokio::io::split(stream);
                            admit(reader, writer, |_| {}, permit, peer, state, stop).await
                        }
                        Err(e) => debug!(%peer, error = %e, "a client's TLS handshake failed"),
                    }
                });
            }
            _ = stopped(&mut stopping) => break,
        }
    }
}

/// Serves a connection that holds a `permit`; without one (the node is at `max_connections`), answers with the
/// reason and closes it.
async fn admit<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin>(
    reader: R,
    mut writer: W,
    quick_ack: impl Fn(&R),
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    peer: std::net::SocketAddr,
    state: Arc<NodeState>,
    stop: watch::Receiver<bool>,
) {
    let Some(_permit) = permit else {
        state.metrics.connections_refused.inc();
        debug!(%peer, "refused: connection limit");
        let max = state.config.max_connections;
        let msg = format!("too many connections: this node serves at most {max} at once; retry later");
        let _ = writer.write_all(&error_frame(&msg, ERROR_UNKNOWN)).await;
        let _ = writer.shutdown().await;
        return;
    };
    serve(reader, writer, quick_ack, state, stop).await
}

async fn serve<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin>(
    mut reader: R,
    mut writer: W,
    quick_ack: impl Fn(&R),
    state: Arc<NodeState>,
    mut stop: watch::Receiver<bool>,
) {
    let client = ClientId(state.next_client.fetch_add(1, Ordering::Relaxed));
    let home = client.0 as usize % state.routes.inboxes.len();
    state.metrics.connections.inc();
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
                Err(FrameError::TooLarge { declared_bytes, max_frame_bytes })
                    if declared_bytes <= discard_limit(max_frame_bytes) =>
                {
                    // The client is still writing a request it believes valid: read its body to the end without
                    // keeping it, then say why it was refused, so that the client sees the reason (not a broken
                    // pipe) and the connection goes on.
                    state.metrics.protocol_errors.inc();
                    buf.advance(LENGTH_PREFIX_BYTES);
                    if !discard(&mut reader, &mut buf, declared_bytes, &mut stop).await {
                        break 'connection;
                    }
                    let msg = format!(
                        "a request of {declared_bytes} bytes is over this node's limit of {max_frame_bytes} bytes; it \
                         was discarded (the limit is the `max_frame_bytes` configuration option, or \
                         `--max-frame-bytes`)"
                    );
                    if writer.write_all(&error_frame(&msg, ERROR_UNKNOWN)).await.is_err() {
                        break 'connection;
                    }
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
    state.routes.broadcast(|| ShardInput::Disconnect(client)).await;
    state.metrics.connections.dec();
}

/// The largest declared frame whose body a connection reads and discards to answer with the reason and go on:
/// 256 MiB, or the frame limit if that is larger. A larger declaration is taken for a stream that is not
/// AntidoteDB's protocol (an HTTP request's first bytes declare over 1 GiB, a TLS handshake's about 350 MiB), so the
/// connection is closed after the error reply instead of waiting for a body that will never come.
fn discard_limit(max_frame_bytes: usize) -> usize {
    max_frame_bytes.max(256 * 1024 * 1024)
}

/// Reads and drops the next `bytes` bytes of the stream, those already in `buf` first, reusing `buf`'s room (at most
/// 64 KiB at a time, so nothing is allocated in proportion to the frame). Bytes that follow go on in `buf`. False
/// when the stream ended, failed or the node is stopping.
async fn discard(
    reader: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut BytesMut,
    mut bytes: usize,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    loop {
        let here = bytes.min(buf.len());
        buf.advance(here);
        bytes -= here;
        if bytes == 0 {
            return true;
        }
        // `buf` is empty here: reuse its room.
        buf.reserve(64 * 1024);
        tokio::select! {
            read = reader.read_buf(buf) => match read {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            },
            _ = stopped(stop) => return false,
        }
    }
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
            return cluster_reply(MessageCode::ApbCreateDC, create_dc(&nodes, state.wan.members().count()))
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
    let kind = ReplyKind::of(&body);
    let name = request_name(&body);
    let shard = match state.routes.layout.client_shard(&body, home) {
        Ok(shard) => shard,
        Err(e) => return encode_reply(&kind, &Err(e)),
    };
    let started = Instant::now();
    let starts = matches!(
        body,
        ClientRequest::Start { .. } | ClientRequest::StaticRead { .. } | ClientRequest::StaticUpdate { .. }
    );
    let (reply, answer) = oneshot::channel();
    let result = match state.routes.inboxes[shard].send(ShardInput::Client { client, body, reply }).await {
        Ok(()) => answer.await.unwrap_or_else(|_| Err(TxError::Aborted("the node is shutting down".into()))),
        Err(_) => Err(TxError::Aborted("the node is shutting down".into())),
    };
    let m = &state.metrics;
    let labels = vec![("kind", name)];
    m.requests.get_or_create(&labels).inc();
    let elapsed = started.elapsed().as_secs_f64();
    m.latency.get_or_create(&labels).observe(elapsed);
    m.recent_latency.observe(elapsed);
    if starts && !matches!(result, Err(TxError::InvalidClock(_) | TxError::TooManyTransactions(_))) {
        m.started.inc();
    }
    match &result {
        Ok(ClientResponse::Committed { .. } | ClientResponse::StaticValues { .. }) => {
            m.committed.inc();
        }
        Ok(ClientResponse::Aborted) | Err(TxError::Aborted(_) | TxError::Timeout(_)) => {
            m.aborted.inc();
        }
        _ => {}
    }
    encode_reply(&kind, &result)
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
