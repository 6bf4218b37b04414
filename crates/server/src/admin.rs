//! The admin HTTP server: `/metrics` (Prometheus text), `/status` (JSON), the operator's calls under `/admin`, and
//! the web console at `/` ([`crate::console`]).

use crate::metrics::raise;
use crate::status::PlacementStatus;
use crate::NodeState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use causet_storage::LogStore;
use serde::Serialize;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves until `stop` turns true.
pub async fn serve(listener: TcpListener, state: Arc<NodeState>, mut stop: watch::Receiver<bool>) {
    let app = crate::console::routes(Router::new())
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/health", get(|| async { "ok\n" }))
        .route("/admin/links/{dc}/cut", post(cut))
        .route("/admin/links/{dc}/heal", post(heal))
        .route("/admin/links/{dc}/delay", post(delay))
        .route("/admin/nodes/{node}/cut", post(cut_node))
        .route("/admin/nodes/{node}/heal", post(heal_node))
        .route("/admin/clock", post(clock))
        .route("/admin/partitions/{partition}/move", post(move_replica))
        .route("/admin/nodes/{node}/retire", post(retire))
        .route("/admin/token", post(check_token))
        .route("/admin/export/{partition}", post(crate::backup::export))
        .with_state(state);
    let shutdown = async move { crate::shutdown::stopped(&mut stop).await };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        tracing::error!(error = %e, "the admin server failed");
    }
}

async fn metrics(State(state): State<Arc<NodeState>>, headers: axum::http::HeaderMap) -> impl IntoResponse {
    let shards = state.status().await;
    let m = &state.metrics;
    m.open_transactions.set(shards.iter().map(|s| s.open_transactions as i64).sum());
    m.observe_shards(&shards);
    if let Some(stable) = shards.first().map(|s| &s.stable_snapshot) {
        let now = state.clock.now_us();
        // Before the first stable snapshot an entry is 0, and has no age.
        for (dc, entry) in stable.iter().enumerate() {
            if let Some(ms) = crate::console::age_ms(now, *entry) {
                m.stable_snapshot_age.get_or_create(&vec![("dc", dc.to_string())]).set(ms / 1000.0);
            }
        }
    }
    // Summed over the links to each DC's nodes (several per DC).
    let mut links: std::collections::BTreeMap<(u16, &str), u64> = std::collections::BTreeMap::new();
    let mut bytes: std::collections::BTreeMap<u16, u64> = std::collections::BTreeMap::new();
    for link in state.wan.links() {
        let s = link.status();
        *links.entry((s.dc, "sent")).or_default() += s.sent;
        *links.entry((s.dc, "dropped")).or_default() += s.dropped;
        *bytes.entry(s.dc).or_default() += s.sent_bytes;
    }
    for ((dc, outcome), total) in links {
        raise(&m.link_messages.get_or_create(&vec![("peer", dc.to_string()), ("outcome", outcome.into())]), total);
    }
    for (dc, total) in bytes {
        raise(&m.link_bytes.get_or_create(&vec![("peer", dc.to_string())]), total);
    }
    raise(&m.shard_messages_dropped, state.routes.dropped.load(std::sync::atomic::Ordering::Relaxed));
    let stats = state.store.stats();
    m.log_records.set(stats.logs.values().map(|l| l.records).sum());
    m.log_bytes.set(stats.logs.values().map(|l| l.bytes).sum());
    raise(&m.fsyncs, stats.fsyncs);
    let (openmetrics, content_type) = crate::metrics::content_type(&headers);
    ([(header::CONTENT_TYPE, content_type)], m.encode(openmetrics))
}

/// Checks the admin token: a state-changing call is refused unless the node was given a token and the request
/// carries it.
pub(crate) fn authorized(state: &NodeState, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
    let Some(token) = &state.config.admin_token else {
        return Err((
            StatusCode::FORBIDDEN,
            "state-changing admin calls (fault injection, replica moves) are disabled: start the node with an admin_token\n".into(),
        ));
    };
    let given =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !token_matches(given, token) {
        return Err((
            StatusCode::UNAUTHORIZED,
            "missing or wrong admin token (Authorization: Bearer <token>)\n".into(),
        ));
    }
    Ok(())
}

/// Whether the token a request carries is the node's, compared in constant time (how long the comparison takes
/// says nothing of how much of the token a guess got right; only the length may show).
fn token_matches(given: Option<&str>, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(token.as_bytes())))
}

/// `POST /admin/token`: whether the request's token would be accepted (the console asks before it offers the
/// state-changing buttons); changes nothing.
async fn check_token(State(state): State<Arc<NodeState>>, headers: HeaderMap) -> impl IntoResponse {
    authorized(&state, &headers)?;
    Ok::<_, (StatusCode, String)>("the token is accepted\n")
}

/// A fault change that could not be kept on disk (so it was not made).
fn unkept(e: anyhow::Error) -> (StatusCode, String) {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("not changed: {e:#}\n"))
}

fn no_link(dc: u16) -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, format!("no link to DC {dc}\n"))
}

async fn cut(State(state): State<Arc<NodeState>>, headers: HeaderMap, Path(dc): Path<u16>) -> impl IntoResponse {
    authorized(&state, &headers)?;
    if !state.wan.cut_dc(causet_core::DcId(dc), true).map_err(unkept)? {
        return Err(no_link(dc));
    }
    tracing::warn!(peer = dc, "the link to the peer DC was cut by an operator");
    Ok::<_, (StatusCode, String)>(format!("link to DC {dc} cut\n"))
}

async fn heal(State(state): State<Arc<NodeState>>, headers: HeaderMap, Path(dc): Path<u16>) -> impl IntoResponse {
    authorized(&state, &headers)?;
    if !state.wan.cut_dc(causet_core::DcId(dc), false).map_err(unkept)? {
        return Err(no_link(dc));
    }
    tracing::info!(peer = dc, "the link to the peer DC was healed by an operator");
    Ok::<_, (StatusCode, String)>(format!("link to DC {dc} healed\n"))
}

/// Cuts (`true`) or heals the link to another node of this DC, both ways.
fn cut_member(state: &NodeState, node: u16, cut: bool) -> Result<String, (StatusCode, String)> {
    if !state.wan.cut_member(node, cut).map_err(unkept)? {
        return Err((StatusCode::NOT_FOUND, format!("no other node {node} in this DC\n")));
    }
    if cut {
        tracing::warn!(node, "the link to a node of this DC was cut by an operator");
        Ok(format!("link to node {node} cut\n"))
    } else {
        tracing::info!(node, "the link to a node of this DC was healed by an operator");
        Ok(format!("link to node {node} healed\n"))
    }
}

async fn cut_node(State(state): State<Arc<NodeState>>, headers: HeaderMap, Path(node): Path<u16>) -> impl IntoResponse {
    authorized(&state, &headers)?;
    cut_member(&state, node, true)
}

async fn heal_node(
    State(state): State<Arc<NodeState>>,
    headers: HeaderMap,
    Path(node): Path<u16>,
) -> impl IntoResponse {
    authorized(&state, &headers)?;
    cut_member(&state, node, false)
}

#[derive(serde::Deserialize)]
struct DelayQuery {
    ms: f64,
    #[serde(default)]
    jitter_ms: f64,
}

async fn delay(
    State(state): State<Arc<NodeState>>,
    headers: HeaderMap,
    Path(dc): Path<u16>,
    Query(q): Query<DelayQuery>,
) -> impl IntoResponse {
    authorized(&state, &headers)?;
    if !(0.0..=60_000.0).contains(&q.ms) || !(0.0..=60_000.0).contains(&q.jitter_ms) {
        return Err((StatusCode::BAD_REQUEST, "delays are between 0 and 60000 ms\n".into()));
    }
    let (delay_us, jitter_us) = ((q.ms * 1000.0) as u64, (q.jitter_ms * 1000.0) as u64);
    if !state.wan.set_delay(causet_core::DcId(dc), delay_us, jitter_us).map_err(unkept)? {
        return Err(no_link(dc));
    }
    Ok(format!("link to DC {dc}: {} ms delay, {} ms jitter\n", q.ms, q.jitter_ms))
}

#[derive(serde::Deserialize)]
struct ClockQuery {
    offset_ms: i64,
}

async fn clock(
    State(state): State<Arc<NodeState>>,
    headers: HeaderMap,
    Query(q): Query<ClockQuery>,
) -> impl IntoResponse {
    authorized(&state, &headers)?;
    let offset_us = q.offset_ms.saturating_mul(1000);
    state.wan.faults().change(|f| f.clock_offset_us = offset_us).map_err(unkept)?;
    state.clock.set_offset_us(offset_us);
    tracing::warn!(offset_ms = q.offset_ms, "this node's clock was skewed by an operator");
    Ok::<_, (StatusCode, String)>(format!("clock offset {} ms\n", q.offset_ms))
}

/// Where every replicated partition lives, as this node heard from the partitions' leaders.
async fn placements(state: &NodeState) -> Vec<PlacementStatus> {
    state.status().await.into_iter().next().map(|s| s.placements).unwrap_or_default()
}

type Refusal = (StatusCode, String);

/// Whether partition `p`'s replica on node `from` may move to node `to`: `Ok(true)` to ask for it, `Ok(false)` if
/// that move is under way already (asking again is harmless), else why not.
fn movable(
    state: &NodeState,
    placement: Option<&PlacementStatus>,
    p: u32,
    from: u16,
    to: u16,
) -> Result<bool, Refusal> {
    let topology = &state.routes.topology;
    let nodes = state.wan.members().count();
    let bad = |why: String| Err((StatusCode::BAD_REQUEST, why + "\n"));
    if !topology.replicated() {
        return bad("this DC's partitions are not replicated (replicas = 1): a partition lives on its node".into());
    }
    if p >= topology.partition_count() {
        return Err((StatusCode::NOT_FOUND, format!("no partition {p}: the DC has {}\n", topology.partition_count())));
    }
    if from >= nodes || to >= nodes || from == to {
        return bad(format!("from and to must be two different nodes of this DC, 0..{nodes}"));
    }
    let conflict = |why: String| Err((StatusCode::CONFLICT, why + "\n"));
    let Some(pl) = placement else {
        return Err((StatusCode::SERVICE_UNAVAILABLE, format!("no leader of partition {p} announced itself yet\n")));
    };
    if pl.learners.iter().any(|m| m.node == to)
        || (pl.outgoing.iter().any(|m| m.node == from) && pl.voters.iter().any(|m| m.node == to))
    {
        return Ok(false);
    }
    if !pl.voters.iter().any(|m| m.node == from) {
        return conflict(format!("node {from} holds no voting replica of partition {p} (its nodes: {:?})", pl.nodes()));
    }
    if pl.nodes().contains(&to) {
        return conflict(format!("node {to} already holds a replica of partition {p}"));
    }
    if !pl.outgoing.is_empty() || !pl.learners.is_empty() {
        return conflict(format!("partition {p} is changing its membership: try again once that is done"));
    }
    Ok(true)
}

#[derive(serde::Deserialize)]
struct MoveQuery {
    from: u16,
    to: u16,
}

/// `POST /admin/partitions/{p}/move?from=A&to=B`: node B starts a replica of partition p that joins its group in
/// place of node A's (A may be down). Progress shows in `/status`'s `placement`.
async fn move_replica(
    State(state): State<Arc<NodeState>>,
    headers: HeaderMap,
    Path(p): Path<u32>,
    Query(q): Query<MoveQuery>,
) -> impl IntoResponse {
    authorized(&state, &headers)?;
    let all = placements(&state).await;
    let fresh = movable(&state, all.iter().find(|pl| pl.partition == p), p, q.from, q.to)?;
    let partition = causet_core::PartitionId(p);
    let input = crate::routes::ShardInput::MoveReplica { partition, from: q.from, to: q.to };
    state.routes.send(state.routes.partition_shard(partition), input).await;
    tracing::info!(partition = p, from = q.from, to = q.to, "an operator moves a replica");
    let what = if fresh { "moving" } else { "already moving" };
    Ok::<_, Refusal>((
        StatusCode::ACCEPTED,
        format!(
            "{what} partition {p}'s replica from node {} to node {}: see `placement` in GET /status\n",
            q.from, q.to
        ),
    ))
}

/// `POST /admin/nodes/{n}/retire`: every replica on node n moves to a node of the DC that holds none of its
/// partition, the least loaded first (node n may be down: its groups re-replicate onto the others), and every
/// node's stabilizer stops waiting for node n's coordinators before it collects old versions. Answers with the
/// moves asked for, one line each, and the partitions that could not move.
async fn retire(State(state): State<Arc<NodeState>>, headers: HeaderMap, Path(node): Path<u16>) -> impl IntoResponse {
    authorized(&state, &headers)?;
    let topology = &state.routes.topology;
    let nodes = state.wan.members().count();
    if node >= nodes {
        return Err((StatusCode::NOT_FOUND, format!("no node {node}: the DC has {nodes}\n")));
    }
    let all = placements(&state).await;
    let mut load = vec![0usize; usize::from(nodes)];
    for pl in &all {
        for n in pl.nodes() {
            load[usize::from(n)] += 1;
        }
    }
    let (mut lines, mut asked) = (Vec::new(), 0);
    for p in 0..topology.partition_count() {
        let pl = all.iter().find(|pl| pl.partition == p);
        if pl.is_some_and(|pl| !pl.nodes().contains(&node)) {
            continue;
        }
        let held = pl.map(PlacementStatus::nodes).unwrap_or_default();
        let to = (0..nodes).filter(|n| *n != node && !held.contains(n)).min_by_key(|n| (load[usize::from(*n)], *n));
        let Some(to) = to else {
            lines.push(format!("partition {p}: stays (every other node holds a replica of it)"));
            continue;
        };
        match movable(&state, pl, p, node, to) {
            Ok(_) => {
                load[usize::from(to)] += 1;
                let partition = causet_core::PartitionId(p);
                let input = crate::routes::ShardInput::MoveReplica { partition, from: node, to };
                state.routes.send(state.routes.partition_shard(partition), input).await;
                lines.push(format!("partition {p}: node {node} -> node {to}"));
                asked += 1;
            }
            Err((_, why)) => lines.push(format!("partition {p}: stays ({})", why.trim_end())),
        }
    }
    state.routes.send(0, crate::routes::ShardInput::RetireNode(node)).await;
    tracing::info!(node, moves = asked, "an operator retires a node");
    let status = if asked > 0 || lines.is_empty() { StatusCode::ACCEPTED } else { StatusCode::CONFLICT };
    lines.push(format!("{asked} replica moves asked for; see `placement` in GET /status"));
    Ok::<_, Refusal>((status, lines.join("\n") + "\n"))
}

#[derive(Serialize)]
struct Status {
    dc: u16,
    dcs: u16,
    node: u16,
    /// How many nodes the DC has, those that joined it while it ran included.
    nodes: u16,
    /// Where each node of the DC accepts links, by node index (empty for a DC of one node configured without
    /// `nodes`).
    members: Vec<std::net::SocketAddr>,
    partitions: u32,
    shards: usize,
    incarnation: u64,
    /// The disk's generation (0 for a node of a new cluster; a new one after the node joined with an empty disk).
    generation: u64,
    clock: causet_core::ClockKind,
    now_us: u64,
    stable_snapshot: Vec<u64>,
    /// The garbage-collection frontier of this node's stabilizer.
    gc_frontier: Vec<u64>,
    open_transactions: usize,
    shard_status: Vec<crate::status::ShardStatus>,
    storage: serde_json::Value,
    links: Vec<crate::wan::LinkStatus>,
    clock_offset_ms: f64,
    /// Where each replicated partition lives, as its leaders announced.
    placement: Vec<PlacementStatus>,
    /// Every partition of this DC: the node that serves it and the nodes with a copy.
    partition_map: Vec<PartitionPlace>,
    /// Each peer DC as this node sees it: its nodes, the state of the links to it and its remote visibility.
    peers: Vec<PeerStatus>,
    /// Whether state-changing admin calls are enabled (the node has an admin token).
    admin_enabled: bool,
    /// Which DCs hold which buckets (`[placement]`): the rings and the buckets placed by them (every other
    /// bucket is at every DC), and the objects this node's partitions store.
    buckets: serde_json::Value,
}

/// Where a partition of this DC is served, for `/status`.
#[derive(Serialize)]
struct PartitionPlace {
    partition: u32,
    /// The node serving it: its leader as last announced when replicated, its home node otherwise.
    leader: Option<u16>,
    /// The nodes with a copy (one unless partitions are replicated).
    nodes: Vec<u16>,
}

/// A peer DC, for `/status`.
#[derive(Serialize)]
struct PeerStatus {
    dc: u16,
    /// Its nodes this node has links to.
    nodes: Vec<u16>,
    state: crate::console::LinkState,
    /// The emulated one-way delay, ms (the largest of the links').
    delay_ms: f64,
    /// How far the stable snapshot's entry for the DC lags behind now, ms: the remote visibility delay (none
    /// before the first stable snapshot).
    visibility_ms: Option<f64>,
    /// The longest any partition here has waited for the DC's acknowledgement, ms.
    replication_lag_ms: u64,
}

fn partition_map(topology: &causet_core::topology::Topology, placement: &[PlacementStatus]) -> Vec<PartitionPlace> {
    (topology.partitions())
        .map(|p| match placement.iter().find(|s| s.partition == p.0) {
            Some(s) => PartitionPlace { partition: p.0, leader: s.leader, nodes: s.nodes() },
            None => {
                let set = topology.replicas(p);
                PartitionPlace { partition: p.0, leader: set.nodes.first().copied(), nodes: set.nodes }
            }
        })
        .collect()
}

fn peers(
    own: u16,
    links: &[crate::wan::LinkStatus],
    shards: &[crate::status::ShardStatus],
    stable: &[u64],
    now_us: u64,
) -> Vec<PeerStatus> {
    let mut dcs: Vec<u16> = links.iter().map(|l| l.dc).filter(|&dc| dc != own).collect();
    dcs.dedup();
    (dcs.into_iter())
        .map(|dc| {
            let to: Vec<_> = links.iter().filter(|l| l.dc == dc).collect();
            let visibility_ms = stable.get(dc as usize).and_then(|&t| crate::console::age_ms(now_us, t));
            let replication_lag_ms = (shards.iter().flat_map(|s| &s.partitions))
                .flat_map(|p| &p.replication_lag_ms)
                .filter(|&&(d, _)| d == dc)
                .map(|&(_, ms)| ms)
                .max()
                .unwrap_or(0);
            let delay_ms = to.iter().map(|l| l.delay_ms).fold(0.0, f64::max);
            let state = crate::console::LinkState::of(
                to.len(),
                to.iter().filter(|l| l.cut).count(),
                to.iter().filter(|l| l.connected).count(),
                visibility_ms.unwrap_or(0.0).max(replication_lag_ms as f64),
                delay_ms,
            );
            PeerStatus {
                dc,
                nodes: to.iter().map(|l| l.node).collect(),
                state,
                delay_ms,
                visibility_ms,
                replication_lag_ms,
            }
        })
        .collect()
}

async fn status(State(state): State<Arc<NodeState>>) -> Json<Status> {
    let shards = state.status().await;
    let protocol = state.config.protocol();
    let stable = shards.first().map(|s| s.stable_snapshot.clone()).unwrap_or_default();
    let gc_frontier = shards.first().and_then(|s| s.gc_frontier.clone()).unwrap_or_default();
    let placement = shards.first().map(|s| s.placements.clone()).unwrap_or_default();
    let links: Vec<_> = state.wan.links().iter().map(|l| l.status()).collect();
    let now_us = state.clock.now_us();
    let peers = peers(protocol.dc.0, &links, &shards, &stable, now_us);
    let stats = state.store.stats();
    let storage = serde_json::json!({
        "sync": format!("{:?}", state.config.sync).to_lowercase(),
        "data_dir": state.config.data_dir.display().to_string(),
        "log_records": stats.logs.values().map(|l| l.records).sum::<u64>(),
        "log_bytes": stats.logs.values().map(|l| l.bytes).sum::<u64>(),
        "records_written": stats.records_written,
        "checkpoints_written": stats.checkpoints_written,
        "records_truncated": stats.records_truncated,
        "fsyncs": stats.fsyncs,
        "records_per_fsync": stats.records_per_fsync(),
        "fsync_latency_us_mean": stats.fsync_latency_us_mean(),
        "fsync_latency_us_max": stats.fsync_latency_us_max,
    });
    Json(Status {
        dc: protocol.dc.0,
        dcs: protocol.dcs,
        node: state.routes.layout.node,
        nodes: state.wan.members().count(),
        members: state.wan.members().addrs(),
        partitions: protocol.partitions,
        shards: shards.len(),
        incarnation: state.routes.layout.incarnation,
        generation: state.routes.layout.generation,
        clock: protocol.clock,
        now_us,
        stable_snapshot: stable,
        gc_frontier,
        open_transactions: shards.iter().map(|s| s.open_transactions).sum(),
        storage,
        links,
        clock_offset_ms: state.clock.offset_us() as f64 / 1000.0,
        partition_map: partition_map(&state.routes.topology, &placement),
        peers,
        placement,
        admin_enabled: state.config.admin_token.is_some(),
        buckets: serde_json::json!({
            "default": "full",
            "rings": state.config.placement.rings,
            "placed_by_rings": state.config.placement.buckets,
            "read_from": state.config.placement.read_from,
            "stored_objects": shards.iter().map(crate::status::ShardStatus::stored_objects).sum::<usize>(),
        }),
        shard_status: shards,
    })
}

#[cfg(test)]
mod tests {
    use super::token_matches;

    #[test]
    fn only_the_exact_token_is_accepted() {
        assert!(token_matches(Some("s3cret"), "s3cret"));
        for wrong in [None, Some(""), Some("s3cre"), Some("s3cret "), Some("S3cret"), Some("s3cret-and-more")] {
            assert!(!token_matches(wrong, "s3cret"), "{wrong:?}");
        }
    }
}
