//! The admin HTTP server: `/metrics` (Prometheus text) and `/status` (JSON).

use crate::NodeState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use causet_storage::LogStore;
use serde::Serialize;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves until `stop` turns true.
pub async fn serve(listener: TcpListener, state: Arc<NodeState>, mut stop: watch::Receiver<bool>) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/health", get(|| async { "ok\n" }))
        .with_state(state);
    let shutdown = async move { crate::connection::stopped(&mut stop).await };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        tracing::error!(error = %e, "the admin server failed");
    }
}

async fn metrics(State(state): State<Arc<NodeState>>) -> impl IntoResponse {
    let shards = state.status().await;
    let m = &state.metrics;
    m.open_transactions.set(shards.iter().map(|s| s.open_transactions as i64).sum());
    if let Some(stable) = shards.first().and_then(|s| s.stable_snapshot.first()) {
        let local_us = stable >> causet_core::time::LOGICAL_BITS;
        m.stable_snapshot_age_us.set(state.clock.now_us().saturating_sub(local_us) as i64);
    }
    let stats = state.store.stats();
    m.log_records.set(stats.logs.values().map(|l| l.records).sum());
    m.log_bytes.set(stats.logs.values().map(|l| l.bytes).sum());
    m.fsyncs.set(stats.fsyncs);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], m.encode())
}

#[derive(Serialize)]
struct Status {
    dc: u16,
    dcs: u16,
    partitions: u32,
    shards: usize,
    incarnation: u32,
    clock: causet_core::ClockKind,
    now_us: u64,
    stable_snapshot: Vec<u64>,
    open_transactions: usize,
    shard_status: Vec<crate::shard::ShardStatus>,
    storage: serde_json::Value,
}

async fn status(State(state): State<Arc<NodeState>>) -> Json<Status> {
    let shards = state.status().await;
    let protocol = state.config.protocol();
    let stable = shards.first().map(|s| s.stable_snapshot.clone()).unwrap_or_default();
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
        partitions: protocol.partitions,
        shards: shards.len(),
        incarnation: state.routes.incarnation,
        clock: protocol.clock,
        now_us: state.clock.now_us(),
        stable_snapshot: stable,
        open_transactions: shards.iter().map(|s| s.open_transactions).sum(),
        shard_status: shards,
        storage,
    })
}
