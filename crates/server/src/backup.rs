//! The admin API's side of backups: `POST /admin/export/{partition}` pages through a partition's objects at a
//! snapshot (`causet backup` drives it; see `docs/backup.md`). Requests and replies are postcard after a format
//! byte, as the storage engine's values are.

use crate::routes::ShardInput;
use crate::NodeState;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use causet_core::{ObjectId, PartitionId, VectorClock};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::oneshot;

/// The first byte of every request and reply body.
pub const FORMAT: u8 = 1;
/// The most objects one page may ask for.
pub const MAX_PAGE: u32 = 10_000;

/// What `POST /admin/export/{partition}` asks for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExportRequest {
    /// The snapshot: a stable one of the DC, held by a transaction open at it.
    pub snapshot: VectorClock,
    /// Only objects above this id (the previous page's `next`).
    pub after: Option<ObjectId>,
    /// At most this many objects (up to [`MAX_PAGE`]).
    pub limit: u32,
}

/// Its answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExportReply {
    /// Each object with its state at the snapshot (`Crdt::encode`), ascending by id; objects still in their
    /// initial state there are left out.
    pub objects: Vec<(ObjectId, Vec<u8>)>,
    /// Where the next page starts; none after the last.
    pub next: Option<ObjectId>,
}

/// Encodes a request or reply body.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![FORMAT]).expect("a Vec grows as needed")
}

/// Decodes a request or reply body.
pub fn decode<T: for<'a> Deserialize<'a>>(bytes: &[u8]) -> Result<T, String> {
    match bytes.split_first() {
        Some((&FORMAT, body)) => postcard::from_bytes(body).map_err(|e| e.to_string()),
        Some((other, _)) => Err(format!("unknown format {other} (this build reads {FORMAT})")),
        None => Err("an empty body".into()),
    }
}

/// `POST /admin/export/{partition}`: a page of the partition's objects, from the shard that serves it. Needs the
/// admin token: it reads every object.
pub async fn export(
    State(state): State<Arc<NodeState>>,
    headers: HeaderMap,
    Path(partition): Path<u32>,
    body: Bytes,
) -> Result<impl IntoResponse, (StatusCode, String)> {
    crate::admin::authorized(&state, &headers)?;
    let bad = |e: String| (StatusCode::BAD_REQUEST, format!("{e}\n"));
    let request: ExportRequest = decode(&body).map_err(|e| bad(format!("an undecodable export request: {e}")))?;
    if partition >= state.config.partitions {
        return Err(bad(format!("no partition {partition} (the DC has {})", state.config.partitions)));
    }
    let limit = request.limit.clamp(1, MAX_PAGE) as usize;
    let p = PartitionId(partition);
    let (reply, answer) = oneshot::channel();
    let input = ShardInput::Export { partition: p, snapshot: request.snapshot, after: request.after, limit, reply };
    state.routes.send(state.routes.partition_shard(p), input).await;
    let unavailable = || (StatusCode::SERVICE_UNAVAILABLE, "the node is shutting down\n".to_string());
    let page = match answer.await.map_err(|_| unavailable())? {
        None => {
            let msg = format!("partition {partition} is not served by this node: ask the node /status names\n");
            return Err((StatusCode::MISDIRECTED_REQUEST, msg));
        }
        // Not there yet (the snapshot's local entry came from a clock a little ahead of this partition's): the
        // caller asks again.
        Some(Err(e @ causet_core::message::RemoteError::NotYetApplied(_))) => {
            return Err((StatusCode::SERVICE_UNAVAILABLE, format!("partition {partition}: {e}\n")))
        }
        Some(Err(e)) => return Err((StatusCode::CONFLICT, format!("partition {partition}: {e}\n"))),
        Some(Ok(page)) => page,
    };
    let reply = ExportReply {
        objects: page.objects.into_iter().map(|(id, state)| (id, state.encode())).collect(),
        next: page.next,
    };
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], encode(&reply)))
}
