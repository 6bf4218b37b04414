//! What a load runs against: the DCs' client and admin addresses.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// One DC of the target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DcTarget {
    /// The DC's index.
    pub dc: u16,
    /// Its nodes' client addresses (sessions spread over them).
    pub clients: Vec<SocketAddr>,
    /// Its nodes' admin addresses, for the server-side metrics (empty if unknown).
    pub admins: Vec<SocketAddr>,
}

/// What the load runs against.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    /// The DCs, by index.
    pub dcs: Vec<DcTarget>,
    /// Partitions per DC (multiplies `keys.per_partition`).
    pub partitions: u32,
}
