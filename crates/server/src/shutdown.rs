//! Shutdown signalling: the node flips one watch channel, and every task that serves it waits on it.

use tokio::sync::watch;

/// Resolves once the node is stopping.
pub async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: the node is stopping too.
    let _ = stop.wait_for(|s| *s).await;
}
